"""Prometheus metrics of this process, served at `/metrics`.

prometheus-client is the standard exposition library; its metrics are process-global,
which is what a scrape of one node wants.
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Info
from prometheus_client.core import HistogramMetricFamily, Metric

from tidings.version import VERSION

REGISTRY = CollectorRegistry()

# `tidings_build_info{version="…"} 1`, the Prometheus convention for what a process runs:
# a dashboard joins it to other series, and a mixed cluster mid-upgrade shows.
BUILD = Info("tidings_build", "The tidings release this process runs", registry=REGISTRY)
BUILD.info({"version": VERSION})

FIRED = Counter("tidings_schedule_firings", "Occurrences fired by the dispatcher",
                ["target"], registry=REGISTRY)
SKIPPED = Counter("tidings_schedule_skipped",
                  "Missed occurrences not fired (older than the maximum event age)",
                  registry=REGISTRY)
DELIVERED = Counter("tidings_deliveries", "Deliveries accepted by their target",
                    ["target"], registry=REGISTRY)
FAILED = Counter("tidings_delivery_failures", "Delivery attempts that failed", ["target"],
                 registry=REGISTRY)
DEAD_LETTERED = Counter("tidings_dead_lettered",
                        "Deliveries sent to the schedule's dead-letter queue (or dropped when"
                        " it has none)", ["target"], registry=REGISTRY)
LATENESS_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600)


class BatchHistogram:
    """A Prometheus histogram fed a batch at a time. prometheus-client's `Histogram` takes
    one observation per call, each with two locked increments and a walk of the bounds:
    at 10,000 firings a second that was ~3 % of the dispatcher's time per firing; here a
    pass's whole batch costs one lock. Exposed like any histogram (`_bucket`, `_count`,
    `_sum`), through the registry's custom-collector interface."""

    def __init__(self, name: str, documentation: str, buckets: Sequence[float],
                 registry: CollectorRegistry) -> None:
        self.name = name
        self.documentation = documentation
        self._bounds = [float(b) for b in buckets] + [math.inf]
        self._counts = [0] * len(self._bounds)
        self._sum = 0.0
        self._lock = threading.Lock()
        registry.register(self)

    def observe(self, value: float) -> None:
        self.observe_many((value,))

    def observe_many(self, values: Iterable[float]) -> None:
        bounds, found, total = self._bounds, [0] * len(self._bounds), 0.0
        for v in values:
            found[bisect_left(bounds, v)] += 1  # the first bound >= v: "le" is inclusive
            total += v
        self.merge(found, total)

    def state(self) -> tuple[list[int], float]:
        """The counts per bucket (not cumulative) and the sum: what a child process reports
        (`merge`) to its parent."""
        with self._lock:
            return list(self._counts), self._sum

    def merge(self, counts: Sequence[int], total: float) -> None:
        """Add counts per bucket (not cumulative) and their sum: a batch, or what a child
        process counted."""
        if len(counts) != len(self._counts):
            raise ValueError(f"{self.name}: {len(counts)} buckets, not {len(self._counts)}")
        with self._lock:
            self._counts = [a + b for a, b in zip(self._counts, counts, strict=True)]
            self._sum += total

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            counts, total = list(self._counts), self._sum
        cumulative, running = [], 0
        for bound, n in zip(self._bounds, counts, strict=True):
            running += n
            cumulative.append(("+Inf" if bound == math.inf else repr(bound), running))
        yield HistogramMetricFamily(self.name, self.documentation, buckets=cumulative,
                                    sum_value=total)


LATENESS = BatchHistogram(
    "tidings_firing_lateness_seconds", "Actual firing time minus scheduled time",
    LATENESS_BUCKETS_S, REGISTRY)
JOBS = Counter("tidings_jobs", "Jobs by outcome: succeeded, failed, duplicate (acknowledged "
               "without running: its key was done), poison (could never be a job), abandoned "
               "(still running at the shutdown deadline)", ["outcome"], registry=REGISTRY)
DUPLICATES = Counter("tidings_deliveries_duplicate",
                     "Deliveries found already done by their execution id (an email whose "
                     "log row is final) and not made again, by target kind; jobs dropped as "
                     "duplicates before running are in tidings_jobs_total{outcome=duplicate}",
                     ["kind"], registry=REGISTRY)
EMAIL_WAITING = Gauge("tidings_email_waiting",
                      "Emails accepted and not yet sent: waiting for a node with an SMTP relay,"
                      " or being retried", registry=REGISTRY)
SENT = Counter("tidings_messages_sent", "Messages accepted into queues (sends and batches)",
               registry=REGISTRY)
COMPONENT_FAILING = Gauge("tidings_component_failing",
                          "1 while a component of this node cannot do its work (its reason is "
                          "in GET /health/ready): dispatcher, sweeper, consumer of <queue>",
                          ["component"], registry=REGISTRY)
LIMIT_WAITING = Gauge("tidings_limit_waiting",
                      "Jobs this node held back by a limit key (back in their queue until the "
                      "key has room) whose wait has not ended", ["key"], registry=REGISTRY)
LIMIT_IN_USE = Gauge("tidings_limit_in_use",
                     "Concurrency slots of a limit key held now, on every node",
                     ["key"], registry=REGISTRY)
LIMIT_HELD_FIRINGS = Counter("tidings_limit_held_firings",
                             "Firings a limit held back, by target kind: a queue target's "
                             "occurrence left due for later, a delivery sent back to wait in "
                             "its queue (neither counts as an attempt)", ["kind"],
                             registry=REGISTRY)
LIMIT_PAST_WINDOW = Counter("tidings_limit_past_window_firings",
                            "Firings of a schedule with a flexible window that a limit's rate "
                            "made start at or after the window's end (more were due than the "
                            "window holds at that rate), by target kind", ["kind"],
                            registry=REGISTRY)


def by_label(metric: Gauge | Counter, label: str) -> dict[str, float]:
    """A labelled metric's values in this process, by the label's value (a counter's
    totals): what the console shows beside what the store says."""
    return {sample.labels[label]: sample.value for family in metric.collect()
            for sample in family.samples
            if label in sample.labels and not sample.name.endswith("_created")}


DISPATCHER_STARTS = Counter("tidings_dispatcher_process_starts",
                            "Dispatcher processes this node started (more than one: restarts)",
                            registry=REGISTRY)
EMAIL_PROCESS_STARTS = Counter("tidings_email_process_starts",
                               "Email sender processes this node started (more than one: "
                               "restarts)", registry=REGISTRY)


# What a dispatcher or an email sender counts, reported by a child process to the node
# that started it (tidings/child_process.py), so one scrape of the node still sees every
# firing and every delivery.
_FORWARDED: dict[str, Counter] = {
    "tidings_schedule_firings": FIRED, "tidings_schedule_skipped": SKIPPED,
    "tidings_deliveries": DELIVERED, "tidings_delivery_failures": FAILED,
    "tidings_dead_lettered": DEAD_LETTERED, "tidings_limit_held_firings": LIMIT_HELD_FIRINGS,
    "tidings_limit_past_window_firings": LIMIT_PAST_WINDOW, "tidings_jobs": JOBS,
    "tidings_deliveries_duplicate": DUPLICATES}
_LATENESS_KEY = "tidings_firing_lateness_seconds"

Snapshot = dict[str, Any]


def forwarded_snapshot() -> Snapshot:
    """This process's totals of the forwarded metrics, JSON-ready: {"counters": [[name,
    labels, value], ...], "tidings_firing_lateness_seconds": [counts per bucket, sum]}."""
    counters = []
    for family in REGISTRY.collect():
        if family.name in _FORWARDED:
            counters += [[family.name, s.labels, s.value] for s in family.samples
                         if s.name.endswith("_total")]
    counts, total = LATENESS.state()
    return {"counters": counters, _LATENESS_KEY: [counts, total]}


def snapshot_delta(now: Snapshot, before: Snapshot | None) -> Snapshot | None:
    """What `now` counted beyond `before`; None when nothing moved."""
    seen = {(n, tuple(sorted(labels.items()))): v
            for n, labels, v in (before or {}).get("counters", [])}
    counters = []
    for name, labels, value in now["counters"]:
        moved = value - seen.get((name, tuple(sorted(labels.items()))), 0.0)
        if moved:
            counters.append([name, labels, moved])
    counts, total = now[_LATENESS_KEY]
    old_counts, old_total = (before or {}).get(_LATENESS_KEY, [[0] * len(counts), 0.0])
    counts = [a - b for a, b in zip(counts, old_counts, strict=True)]
    if not counters and not any(counts):
        return None
    return {"counters": counters, _LATENESS_KEY: [counts, total - old_total]}


def merge_snapshot(delta: Snapshot) -> None:
    """Add what another process counted (`snapshot_delta`) to this process's metrics;
    a name this version does not know is ignored, not fatal."""
    for name, labels, value in delta.get("counters", []):
        counter = _FORWARDED.get(name)
        if counter is not None and value > 0:
            (counter.labels(**labels) if labels else counter).inc(value)
    if _LATENESS_KEY in delta:
        LATENESS.merge(*delta[_LATENESS_KEY])


class RecentFailures:
    """The last delivery failures of this process, by target: what the console's overview
    lists as failing targets (the counters say how many, not where)."""

    def __init__(self, keep: int = 200) -> None:
        self._lock = threading.Lock()
        self._items: deque[tuple[int, str, str, str]] = deque(maxlen=keep)
        #: Told each failure as it is kept: a child process forwards it to its node
        #: (child_process.py), whose heartbeat carries them to the console.
        self.listener: Callable[[tuple[int, str, str, str]], None] | None = None

    def add(self, at_ms: int, kind: str, destination: str, message: str) -> None:
        item = (at_ms, kind, destination, message[:300])
        with self._lock:
            self._items.append(item)
        if self.listener is not None:
            self.listener(item)

    def since(self, at_ms: int) -> list[tuple[int, str, str, str]]:
        with self._lock:
            return [item for item in self._items if item[0] >= at_ms]


FAILURES = RecentFailures()
