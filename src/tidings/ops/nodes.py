"""Heartbeats: each node says it is alive, what it did minute by minute, and now and then
takes the counts too costly for a page view. The console's overview reads them back.

Why in the database rather than in each process: the console of any node shows the whole
cluster (a node that stopped heart-beating is exactly the one that cannot say so itself),
and no time-series database is needed for one hour of per-minute figures.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import socket
from collections.abc import Iterable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from tidings.clock import Clock
from tidings.errors import StoreUnavailable
from tidings.model.nodes import NodeRecord
from tidings.runtime import metrics
from tidings.runtime.bridge import Bridge
from tidings.store.base import NodeStore

log = logging.getLogger("tidings.nodes")

HEARTBEAT_S = 5.0
#: A node silent for this long (three missed beats) is shown as not heart-beating.
SILENT_AFTER_MS = int(3 * HEARTBEAT_S * 1000)
COUNTS_EVERY_S = 60.0
#: The counts walk big indexes (13 s at 10M schedules on SQLite, whose one connection the
#: walk holds meanwhile): they take at most this share of the node's time.
COUNTS_SHARE = 0.01
FIRST_COUNTS_S = 10.0  # not at the very start, where a node has better things to do
MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS
LATENESS_BOUNDS_S = (*(float(b) for b in metrics.LATENESS_BUCKETS_S), float("inf"))

#: Columns of a minute in the activity JSON.
FIRINGS, SENT, FAILED = 0, 1, 2


def _totals() -> dict[str, Any]:
    """This process's counters now: firings, messages sent, failed deliveries, and the
    cumulative lateness histogram (read from those four alone, not the whole registry: a
    heartbeat is most of what an idle node does)."""
    out: dict[str, Any] = {"fired": 0.0, "sent": 0.0, "failed": 0.0,
                           "lateness": [0.0] * len(LATENESS_BOUNDS_S)}
    for metric in (m for c in (metrics.FIRED, metrics.SENT, metrics.FAILED, metrics.LATENESS)
                   for m in c.collect()):
        for s in metric.samples:
            if s.name == "tidings_schedule_firings_total":
                out["fired"] += s.value
            elif s.name == "tidings_messages_sent_total":
                out["sent"] += s.value
            elif s.name == "tidings_delivery_failures_total":
                out["failed"] += s.value
            elif s.name == "tidings_firing_lateness_seconds_bucket":
                le = float(s.labels["le"])
                out["lateness"][LATENESS_BOUNDS_S.index(le)] = s.value
    return out


@dataclass
class Activity:
    """One node's last hour: per minute [firings, sent, failed] and lateness bucket counts
    (per bucket, not cumulative), plus its recent delivery failures."""

    minutes: dict[int, list[int]] = field(default_factory=dict)
    lateness: dict[int, list[int]] = field(default_factory=dict)
    stopped: bool = False

    def add(self, minute: int, delta: dict[str, Any]) -> None:
        row = self.minutes.setdefault(minute, [0, 0, 0])
        row[FIRINGS] += int(delta["fired"])
        row[SENT] += int(delta["sent"])
        row[FAILED] += int(delta["failed"])
        if any(delta["lateness"]):
            late = self.lateness.setdefault(minute, [0] * len(LATENESS_BOUNDS_S))
            for i, n in enumerate(delta["lateness"]):
                late[i] += int(n)

    def trim(self, oldest_minute: int) -> None:
        for table in (self.minutes, self.lateness):
            for m in [m for m in table if m < oldest_minute]:
                del table[m]

    def to_json(self, failures: Iterable[tuple[int, str, str, str]]) -> str:
        return json.dumps({"minutes": {str(k): v for k, v in self.minutes.items()},
                           "lateness": {str(k): v for k, v in self.lateness.items()},
                           "failures": list(failures), "stopped": self.stopped},
                          separators=(",", ":"))


def _delta(now: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    cumulative = [a - b for a, b in zip(now["lateness"], before["lateness"], strict=True)]
    per_bucket = [cumulative[0]] + [cumulative[i] - cumulative[i - 1]
                                    for i in range(1, len(cumulative))]
    return {"fired": now["fired"] - before["fired"], "sent": now["sent"] - before["sent"],
            "failed": now["failed"] - before["failed"], "lateness": per_bucket}


def is_alive(node: NodeRecord, now: int) -> bool:
    """Heart-beating (its last beat within `SILENT_AFTER_MS`) and not stopped cleanly
    (its last beat said goodbye)."""
    return now - node.seen_at <= SILENT_AFTER_MS and not json.loads(
        node.activity or "{}").get("stopped", False)


def take_counts(store: NodeStore, now: int) -> None:
    """The console's costly counts, kept with the instant they were taken."""
    day_start = now - now % DAY_MS
    found = {
        "pending_schedules": store.count_pending_schedules(),
        "due_next_hour": store.count_due_between(now, now + HOUR_MS),
        "email_today": store.delivery_counts_since(day_start),
    }
    for name, value in found.items():
        store.put_console_count(name, json.dumps(value), now)


@dataclass(eq=False)
class Heartbeat:
    """The service that writes this node's row every `interval_s` and the console's counts
    every `counts_every_s`."""

    store: NodeStore
    clock: Clock
    bridge: Bridge
    version: str
    _: KW_ONLY
    interval_s: float = HEARTBEAT_S
    counts_every_s: float = COUNTS_EVERY_S
    first_counts_s: float = FIRST_COUNTS_S

    def __post_init__(self) -> None:
        now = self.clock.now_ms()
        self.record = NodeRecord(
            id=secrets.token_hex(8), host=socket.gethostname(), pid=os.getpid(),
            version=self.version, started_at=now, seen_at=now, activity="{}")
        self.activity = Activity()
        self._last = _totals()
        self._stopping = asyncio.Event()

    def beat(self) -> None:
        now = self.clock.now_ms()
        totals = _totals()
        self.activity.add(now - now % MINUTE_MS, _delta(totals, self._last))
        self._last = totals
        self.activity.trim(now - now % MINUTE_MS - HOUR_MS)
        self.store.put_node(NodeRecord(
            self.record.id, self.record.host, self.record.pid, self.record.version,
            self.record.started_at, now,
            self.activity.to_json(metrics.FAILURES.since(now - HOUR_MS))))

    def _counts(self) -> None:
        now = self.clock.now_ms()
        take_counts(self.store, now)
        self.store.forget_nodes(now - DAY_MS)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        next_counts = loop.time() + self.first_counts_s
        while not self._stopping.is_set():
            try:
                await self.bridge.run(self.beat)
                if loop.time() >= next_counts:
                    started = loop.time()
                    await self.bridge.run(self._counts)
                    took = loop.time() - started
                    next_counts = loop.time() + max(self.counts_every_s, took / COUNTS_SHARE)
            except StoreUnavailable as exc:  # the loops that back off say why, in health
                log.warning("heartbeat failed: %s", exc)
            except Exception:  # a heartbeat missed is shown as such; never stop the node
                log.exception("heartbeat failed")
            try:
                await asyncio.wait_for(self._stopping.wait(), self.interval_s)
            except TimeoutError:
                pass
        self.activity.stopped = True
        try:
            await self.bridge.run(self.beat)
        except Exception:
            log.exception("last heartbeat failed")

    def stop(self) -> None:
        self._stopping.set()
