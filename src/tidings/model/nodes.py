"""Records of the nodes themselves, for the console: who is alive, and what each did."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NodeRecord:
    """One process running the engine. `activity` is JSON written by the node (see
    `tidings.ops.nodes`); `seen_at` is its last heartbeat (epoch ms)."""

    id: str
    host: str
    pid: int
    version: str
    started_at: int
    seen_at: int
    activity: str


@dataclass(frozen=True)
class TakenCount:
    """A count taken now and then rather than on every page view, with when (epoch ms)."""

    value: str  # JSON
    taken_at: int
