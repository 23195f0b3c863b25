"""The dispatcher's lateness histogram, fed a pass at a time, reads like any Prometheus
histogram: cumulative buckets with inclusive upper bounds, a count and a sum."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from tidings.engine.metrics import BatchHistogram


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
