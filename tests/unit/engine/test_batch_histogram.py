"""The dispatcher's lateness histogram, fed a pass at a time, reads like any Prometheus
histogram: cumulative buckets with inclusive upper bounds, a count and a sum."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from tidings.runtime.metrics import BatchHistogram


def test_a_batch_lands_in_inclusive_cumulative_buckets() -> None:
    registry = CollectorRegistry()
    hist = BatchHistogram("t_lateness_seconds", "test", (0.005, 0.1, 1), registry)
    hist.observe_many([0.001, 0.005, 0.05, 0.1, 0.5])  # 0.005 and 0.1: on their bound
    hist.observe(7.0)  # beyond the last bound: only +Inf

    def sample(suffix: str, le: str | None = None) -> float | None:
        labels = {} if le is None else {"le": le}
        return registry.get_sample_value(f"t_lateness_seconds{suffix}", labels)

    assert [sample("_bucket", le) for le in ("0.005", "0.1", "1.0", "+Inf")] == [2, 4, 5, 6]
    assert sample("_count") == 6
    assert sample("_sum") == pytest.approx(7.656)
    text = generate_latest(registry).decode()
    assert 't_lateness_seconds_bucket{le="+Inf"} 6.0' in text
    assert "# TYPE t_lateness_seconds histogram" in text


def test_an_empty_batch_changes_nothing() -> None:
    registry = CollectorRegistry()
    hist = BatchHistogram("t_empty_seconds", "test", (1,), registry)
    hist.observe_many([])
    assert registry.get_sample_value("t_empty_seconds_count") == 0
    assert registry.get_sample_value("t_empty_seconds_sum") == 0


def test_a_child_process_counts_reach_the_parent_through_a_snapshot_delta() -> None:
    # What a dispatcher process reports (dispatch_process.py): only what moved since its
    # last report, added to the receiving process's own metrics.
    from tidings.runtime import metrics

    def fired(target: str) -> float:
        return metrics.REGISTRY.get_sample_value(
            "tidings_schedule_firings_total", {"target": target}) or 0.0

    before = metrics.forwarded_snapshot()
    assert metrics.snapshot_delta(before, before) is None
    metrics.FIRED.labels("queue").inc(3)
    metrics.SKIPPED.inc()
    metrics.LATENESS.observe_many([0.002, 0.2])
    delta = metrics.snapshot_delta(metrics.forwarded_snapshot(), before)
    assert delta is not None
    assert ["tidings_schedule_firings", {"target": "queue"}, 3.0] in delta["counters"]
    assert ["tidings_schedule_skipped", {}, 1.0] in delta["counters"]
    counts, total = delta["tidings_firing_lateness_seconds"]
    assert sum(counts) == 2 and total == pytest.approx(0.202)
    queue_fired = fired("queue")
    count = metrics.REGISTRY.get_sample_value("tidings_firing_lateness_seconds_count")
    metrics.merge_snapshot(delta)  # as the parent does
    assert fired("queue") == queue_fired + 3
    assert metrics.REGISTRY.get_sample_value("tidings_firing_lateness_seconds_count") == \
        (count or 0) + 2
    metrics.merge_snapshot({"counters": [["tidings_from_a_newer_version", {}, 1.0]]})
    with pytest.raises(ValueError, match="buckets"):
        metrics.LATENESS.merge([1, 2], 0.1)
