"""A loop's troubles, as the readiness probe and the gauge see them (runtime/health.py)."""

from __future__ import annotations

import asyncio
import logging

from tidings.runtime import metrics
from tidings.runtime.backoff import Backoff
from tidings.runtime.health import Health

log = logging.getLogger("test")


def gauge(component: str) -> float | None:
    return metrics.REGISTRY.get_sample_value("tidings_component_failing",
                                             {"component": component})


def test_a_trouble_keeps_its_first_since_and_is_gone_once_recovered() -> None:
    seen: list[dict[str, str]] = []
    health = Health(on_change=lambda t: seen.append({k: v.reason for k, v in t.items()}))
    health.failing("unit-a", "disk full")
    first = health.troubles()["unit-a"]
    health.failing("unit-a", "disk full")  # the same again: no change to report
    health.failing("unit-a", "database unreachable")
    again = health.troubles()["unit-a"]
    assert again.reason == "database unreachable" and again.since_ms == first.since_ms
    assert gauge("unit-a") == 1
    health.recovered("unit-a")
    health.recovered("unit-a")  # twice: reported once
    assert health.troubles() == {} and gauge("unit-a") == 0
    assert seen == [{"unit-a": "disk full"}, {"unit-a": "database unreachable"}, {}]


def test_a_health_that_does_not_export_leaves_the_gauge_alone() -> None:
    health = Health(export=False)
    health.failing("unit-b", "starting")
    assert gauge("unit-b") is None and "unit-b" in health.troubles()


def test_a_backoff_reports_its_loop_failing_until_the_next_success() -> None:
    health = Health()
    backoff = Backoff(first_s=0.001, health=health, component="unit-c")

    def wait(b: Backoff, error: str) -> None:
        async def waiting() -> None:
            await b.wait(log, "the unit loop", RuntimeError(error), asyncio.Event())
        asyncio.run(waiting())

    backoff.reset()  # all well: nothing to clear
    assert health.troubles() == {}
    wait(backoff, "SQLITE_FULL")
    assert health.troubles()["unit-c"].reason == "SQLITE_FULL"
    backoff.reset()
    assert health.troubles() == {}
    unnamed = Backoff(first_s=0.001, health=health)  # no component: the name it logs with
    wait(unnamed, "gone")
    assert set(health.troubles()) == {"the unit loop"}
    unnamed.reset()
    assert health.troubles() == {}
