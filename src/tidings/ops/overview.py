"""What the console's overview shows, gathered from the nodes' heartbeats, the counts they
take and the queues' own counters: no full scan on a page view, whatever the database holds.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Protocol

from tidings.clock import Clock
from tidings.model.nodes import NodeRecord
from tidings.ops.nodes import (
    FAILED,
    FIRINGS,
    HOUR_MS,
    LATENESS_BOUNDS_S,
    MINUTE_MS,
    SENT,
    SILENT_AFTER_MS,
)
from tidings.queues.service import QueueInfo, QueueService
from tidings.store.base import CampaignStore, NodeStore, QueueStore


class OverviewStore(CampaignStore, NodeStore, QueueStore, Protocol):
    """What this module asks of the store: the nodes' counts, the queues' counters and the
    campaigns."""

#: How many queues the overview and the queue list show on one page.
QUEUE_PAGE = 100


@dataclass(frozen=True)
class NodeView:
    record: NodeRecord
    alive: bool
    stopped: bool  # said goodbye: shut down cleanly
    #: Went silent, and a node started on its host after its last heartbeat (a supervisor
    #: restarted it after a kill): shown, but not an alarm.
    replaced: bool = False

    @property
    def state(self) -> str:
        if self.alive:
            return "alive"
        return "stopped" if self.stopped else "replaced" if self.replaced else "silent"


def mark_replaced(nodes: list[NodeView]) -> list[NodeView]:
    """The nodes, a silent one marked `replaced` when a node of its host started after
    its last heartbeat. Each newer node stands in for one silent node at most (matched in
    time order), so where two nodes of a host died and one came back, one alarm stays."""
    by_host: dict[str, list[NodeView]] = defaultdict(list)
    for n in nodes:
        by_host[n.record.host].append(n)
    replaced: set[str] = set()
    for group in by_host.values():
        successors = sorted(group, key=lambda n: n.record.started_at)
        taken: set[str] = set()
        for dead in sorted((n for n in group if not n.alive and not n.stopped),
                           key=lambda n: n.record.seen_at):
            for newer in successors:
                if newer.record.id not in taken and \
                        newer.record.started_at > dead.record.seen_at:
                    taken.add(newer.record.id)
                    replaced.add(dead.record.id)
                    break
    return [dataclasses.replace(n, replaced=True) if n.record.id in replaced else n
            for n in nodes]


@dataclass(frozen=True)
class Failing:
    """A target whose deliveries failed in the last hour."""

    kind: str
    destination: str
    failures: int
    last_at: int
    last_error: str


@dataclass(frozen=True)
class Counted:
    """A count taken by a node at `taken_at` (None: no node has taken it yet)."""

    value: Any
    taken_at: int | None


@dataclass
class Overview:
    now: int
    nodes: list[NodeView]
    minutes: list[int]  # the start of each of the last 60 minutes
    firings: list[int]  # per minute, every node
    sent: list[int]
    failed: list[int]
    lateness_p50_s: float | None
    lateness_p99_s: float | None
    failing: list[Failing]
    counts: dict[str, Counted]
    queues: list[QueueInfo]
    more_queues: bool
    attention: list[tuple[str, str]] = field(default_factory=list)  # (text, link)


def percentile(buckets: list[int], q: float) -> float | None:
    """The upper bound of the bucket holding the q-quantile (histograms keep no more)."""
    total = sum(buckets)
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for bound, n in zip(LATENESS_BOUNDS_S, buckets, strict=True):
        seen += n
        if seen >= rank:
            return bound
    return LATENESS_BOUNDS_S[-1]


class OverviewService:
    def __init__(self, store: OverviewStore, clock: Clock, queues: QueueService) -> None:
        self.store = store
        self.clock = clock
        self.queues = queues

    def secret(self, name: str) -> bytes:
        """A key kept in the database, the same on every node (signs console sessions)."""
        return self.store.get_or_create_secret(name, secrets.token_bytes(32))

    def queue_page(self, prefix: str = "", after: str | None = None,
                   limit: int = QUEUE_PAGE) -> tuple[list[QueueInfo], str | None]:
        # The engine's own queues too: an operator looks at the deliveries' backlog here.
        records, token = self.queues.list_queues(prefix, limit=limit, next_token=after,
                                                 include_internal=True)
        return [self.queues.describe_record(r) for r in records], token

    def overview(self) -> Overview:
        now = self.clock.now_ms()
        first_minute = now - now % MINUTE_MS - HOUR_MS + MINUTE_MS
        minutes = [first_minute + i * MINUTE_MS for i in range(60)]
        index = {m: i for i, m in enumerate(minutes)}
        series = {FIRINGS: [0] * 60, SENT: [0] * 60, FAILED: [0] * 60}
        lateness = [0] * len(LATENESS_BOUNDS_S)
        failing: dict[tuple[str, str], list[Any]] = defaultdict(list)
        nodes = []
        for record in self.store.list_nodes(now - HOUR_MS):
            activity = json.loads(record.activity or "{}")
            stopped = bool(activity.get("stopped"))
            nodes.append(NodeView(record, now - record.seen_at <= SILENT_AFTER_MS and not stopped,
                                  stopped))
            for minute, row in activity.get("minutes", {}).items():
                i = index.get(int(minute))
                if i is not None:
                    for column in series:
                        series[column][i] += row[column]
            for minute, buckets in activity.get("lateness", {}).items():
                if int(minute) >= first_minute:
                    lateness = [a + b for a, b in zip(lateness, buckets, strict=True)]
            for at, kind, destination, message in activity.get("failures", []):
                if at >= now - HOUR_MS:
                    failing[(kind, destination)].append((at, message))
        nodes = mark_replaced(nodes)
        failures = sorted(
            (Failing(kind, dest, len(items), max(items)[0], max(items)[1])
             for (kind, dest), items in failing.items()),
            key=lambda f: -f.failures)
        counts = {name: Counted(json.loads(c.value), c.taken_at)
                  for name, c in self.store.console_counts().items()}
        queues, more = self.queue_page()
        view = Overview(now, nodes, minutes, series[FIRINGS], series[SENT], series[FAILED],
                        percentile(lateness, 0.5), percentile(lateness, 0.99), failures,
                        counts, queues, more is not None)
        view.attention = self._attention(view)
        return view

    def _attention(self, view: Overview) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        dlqs = {policy.dead_letter_queue for q in view.queues
                if (policy := q.record.attributes.redrive_policy) is not None}
        for q in view.queues:
            waiting = q.counts.visible + q.counts.in_flight + q.counts.delayed
            if q.name in dlqs and waiting:
                out.append((f"Dead-letter queue {q.name} holds {waiting} message(s)",
                            f"/ui/queues/{q.name}"))
        for f in view.failing:
            out.append((f"{f.kind} target {f.destination or '(email)'}: {f.failures} failed "
                        f"deliveries in the last hour", ""))
        for name, _ in self.paused_campaigns():
            out.append((f"Campaign {name} is paused", f"/ui/campaigns/{name}"))
        for n in view.nodes:
            if n.state == "silent":
                out.append((f"Node {n.record.host} (pid {n.record.pid}) stopped heart-beating",
                            ""))
        versions = Counter(n.record.version for n in view.nodes if n.alive)
        if len(versions) > 1:  # a rolling upgrade under way, or one forgotten half-way
            out.append(("Nodes run different tidings versions: " + ", ".join(
                f"{version} ({count})" for version, count in sorted(versions.items())) +
                " (docs/upgrading.md)", ""))
        return out

    def paused_campaigns(self, limit: int = 20) -> list[tuple[str, int]]:
        """Paused campaigns (by name), with when they were paused."""
        out: list[tuple[str, int]] = []
        after: str | None = None
        while len(out) < limit:
            page = self.store.list_campaigns(after, 100)
            out += [(c.name, c.modified_at) for c in page if c.status.value == "PAUSED"]
            if len(page) < 100:
                break
            after = page[-1].name
        return out[:limit]
