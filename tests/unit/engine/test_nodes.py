"""Heartbeats and the overview built from them, on every backend, with a frozen clock."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.model.queues import RedrivePolicy
from tidings.model.schedules import ScheduleSpec, Target, TargetKind, at_expression
from tidings.ops.nodes import HOUR_MS, MINUTE_MS, SILENT_AFTER_MS, Heartbeat
from tidings.ops.overview import percentile
from tidings.runtime import metrics
from tidings.runtime.bridge import Bridge


def test_a_heartbeat_shows_the_node_its_activity_and_its_silence(
        t: Tidings, clock: FrozenClock) -> None:
    bridge = Bridge(1)
    try:
        beat = Heartbeat(t.store, clock, bridge, "test")
        t.queues.create_queue("q")
        beat.beat()
        t.queues.send("q", "one")
        t.queues.send("q", "two")
        metrics.FIRED.labels("queue").inc(3)
        metrics.LATENESS.observe(0.02)
        beat.beat()
        view = t.overview.overview()
        assert [n.alive for n in view.nodes] == [True]
        assert view.sent[-1] == 2 and view.firings[-1] == 3
        assert view.lateness_p50_s is not None and view.lateness_p50_s <= 0.025
        clock.advance(SILENT_AFTER_MS + 1)
        view = t.overview.overview()
        assert [n.alive for n in view.nodes] == [False]
        assert any("stopped heart-beating" in text for text, _ in view.attention)
        clock.advance(HOUR_MS)  # an hour later the silent node is no longer listed
        assert t.overview.overview().nodes == []
    finally:
        bridge.close()


def test_a_node_that_stops_cleanly_is_not_a_worry(t: Tidings, clock: FrozenClock) -> None:
    bridge = Bridge(1)
    try:
        beat = Heartbeat(t.store, clock, bridge, "test", interval_s=0.01, first_counts_s=0)

        async def run_briefly() -> None:
            task = asyncio.create_task(beat.run())
            await asyncio.sleep(0.05)
            beat.stop()
            await task

        asyncio.run(run_briefly())
        view = t.overview.overview()
        assert [(n.alive, n.stopped) for n in view.nodes] == [(False, True)]
        assert not any("heart-beating" in text for text, _ in view.attention)
        assert set(view.counts) == {"pending_schedules", "due_next_hour", "email_today"}
    finally:
        bridge.close()


def test_counts_are_taken_with_their_instant(t: Tidings, clock: FrozenClock) -> None:
    t.queues.create_queue("target")
    later = datetime.fromtimestamp(clock.now_ms() / 1000 + 3 * 3600, UTC)
    for i, expression in enumerate(("rate(5 minutes)", "rate(30 minutes)",
                                    at_expression(later))):
        t.schedules.create(ScheduleSpec(name=f"s{i}", expression=expression,
                                        target=Target(TargetKind.QUEUE, "target")))
    from tidings.ops.nodes import take_counts

    take_counts(t.store, clock.now_ms())
    counts = t.overview.overview().counts
    assert counts["pending_schedules"].value == 3
    assert counts["due_next_hour"].value == 2
    assert counts["pending_schedules"].taken_at == clock.now_ms()


def test_dead_letters_and_paused_campaigns_need_attention(t: Tidings) -> None:
    t.queues.create_queue("dlq")
    t.queues.create_queue("src", redrive_policy=RedrivePolicy("dlq", 1))
    assert t.overview.overview().attention == []
    t.queues.send("dlq", "dead")
    assert [link for _, link in t.overview.overview().attention] == ["/ui/queues/dlq"]


def test_percentiles_are_bucket_bounds() -> None:
    buckets = [0] * 16
    buckets[2] = 99  # ≤ 25 ms
    buckets[10] = 1  # ≤ 10 s
    assert percentile(buckets, 0.5) == 0.025
    assert percentile(buckets, 0.99) == 0.025
    assert percentile(buckets, 0.999) == 10.0
    assert percentile([0] * 16, 0.5) is None


def test_activity_keeps_one_hour(t: Tidings, clock: FrozenClock) -> None:
    bridge = Bridge(1)
    try:
        beat = Heartbeat(t.store, clock, bridge, "test")
        for _ in range(70):
            beat.beat()
            clock.advance(MINUTE_MS)
        activity = json.loads(t.store.list_nodes(0)[0].activity)
        assert len(activity["minutes"]) <= 61
    finally:
        bridge.close()


def test_a_silent_node_replaced_on_its_host_is_not_an_alarm(t: Tidings,
                                                           clock: FrozenClock) -> None:
    bridge = Bridge(1)
    try:
        first = Heartbeat(t.store, clock, bridge, "0.3.0")
        first.beat()  # ... then it is killed: no last beat
        clock.advance(SILENT_AFTER_MS + 1)
        assert [n.state for n in t.overview.overview().nodes] == ["silent"]
        clock.advance(MINUTE_MS)
        restarted = Heartbeat(t.store, clock, bridge, "0.3.0")  # same host, started later
        restarted.beat()
        view = t.overview.overview()
        assert sorted(n.state for n in view.nodes) == ["alive", "replaced"]
        assert not any("heart-beating" in text for text, _ in view.attention)
    finally:
        bridge.close()


def test_one_newer_node_replaces_one_silent_node(t: Tidings, clock: FrozenClock) -> None:
    """Two nodes of a host die, one comes back: one alarm stays."""
    bridge = Bridge(1)
    try:
        for _ in range(2):
            Heartbeat(t.store, clock, bridge, "0.3.0").beat()
        clock.advance(SILENT_AFTER_MS + 1)
        Heartbeat(t.store, clock, bridge, "0.3.0").beat()
        view = t.overview.overview()
        assert sorted(n.state for n in view.nodes) == ["alive", "replaced", "silent"]
        assert len([text for text, _ in view.attention if "heart-beating" in text]) == 1
    finally:
        bridge.close()


def test_a_mixed_cluster_is_shown(t: Tidings, clock: FrozenClock) -> None:
    bridge = Bridge(1)
    try:
        for version in ("0.3.0", "0.3.0", "0.4.0"):
            Heartbeat(t.store, clock, bridge, version).beat()
        view = t.overview.overview()
        assert sorted(n.record.version for n in view.nodes) == ["0.3.0", "0.3.0", "0.4.0"]
        assert ("Nodes run different tidings versions: 0.3.0 (2), 0.4.0 (1) "
                "(docs/upgrading.md)", "") in view.attention
    finally:
        bridge.close()
