"""Downstream limits: what `tidings.limits` and the consumers ask of the store. The
settings, pauses, sliding windows and concurrency slots live in the database, so every
node (every process of a SQLite file) counts against the same limit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from tidings.model.limits import LimitSetting, Rate
from tidings.model.receipts import Receipt


@dataclass(frozen=True, slots=True)
class KeyRule:
    """A key's limit as the caller resolved it from the settings (the key's own, else its
    name's); `name`, when the key is `name:value`, is also looked at for a pause."""

    key: str
    rate: Rate | None
    burst: int | None
    concurrency: int | None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class LimitClaim:
    """One job's claim: a start of each rule's rate and, where a rule has a concurrency,
    a slot held by `holder` until `lease_until` (renewed by the heartbeat)."""

    holder: str
    rules: tuple[KeyRule, ...]
    lease_until: int


class LimitAnswer(NamedTuple):
    """Granted, or when to look again (epoch ms): when the key's window frees a start or
    its pause ends; for a full concurrency, an estimate."""

    granted: bool
    retry_at: int
    paused: bool = False


class HeldBack(NamedTuple):
    """A received message a limit held back: visible again at `visible_at`, its receive
    not counted."""

    receipt: Receipt
    visible_at: int
    error: str | None = None


class LimitStore(Protocol):
    def limit_settings(self) -> list[LimitSetting]: ...
    def put_limits(self, settings: Sequence[LimitSetting]) -> None:
        """Insert or replace, one transaction."""
        ...

    def delete_limit(self, key: str) -> bool: ...
    def limit_pauses(self, now: int) -> dict[str, int]:
        """Keys (and names) paused beyond `now`: key → until."""
        ...

    def pause_limit(self, key: str, until: int | None, *, extend: bool) -> None:
        """Pause `key` until the instant (None: resume). `extend`: a later pause already
        there stands (a pushback); otherwise the instant given replaces it (an operator)."""
        ...

    def acquire_limits(self, claims: Sequence[LimitClaim], now: int,
                       release: Sequence[tuple[str, str]] = ()) -> list[LimitAnswer]:
        """In one transaction: the slots in `release` ((key, holder): jobs that ended)
        given back first, then, in order: each claim is granted (a start recorded for each
        rate, a slot taken for each concurrency) if every one of its keys has room and
        none is paused, else refused with when to look again. Nodes take a key's room in
        turn (its row locked), so no window or concurrency is ever exceeded."""
        ...

    def release_limit_slots(self, slots: Sequence[tuple[str, str]]) -> None:
        """(key, holder): slots given back."""
        ...

    def extend_limit_slots(self, slots: Sequence[tuple[str, str]], until: int) -> None: ...
    def limit_usage(self, now: int, since: int) -> tuple[dict[str, int],
                                                         dict[str, tuple[int, int]]]:
        """Live slots by key; starts since `since` by key (count, latest)."""
        ...

    def forget_limit_rows(self, before: int, now: int) -> int:
        """Starts older than `before`, slots expired before `now`."""
        ...

    def hold_back_messages(self, queue_id: int, items: Sequence[HeldBack],
                           now: int) -> list[bool]:
        """Back to the queue until each one's instant, their receive not counted (only
        while the receipt still holds the message)."""
        ...

    def wake_held_back(self, queue_id: int, items: Sequence[tuple[int, int]],
                       now: int) -> int:
        """(row id, lease token of the receipt that held it back): messages held back
        and not received since, visible now (their limit changed); how many."""
        ...
