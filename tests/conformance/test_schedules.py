"""Schedule semantics (EventBridge Scheduler) over every backend, with a frozen clock.

The dispatcher's `fire_due()` is one pass of its loop; tests step the clock and call it.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime

import pytest

from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.errors import ConflictError, GroupNotFound, ScheduleNotFound, ValidationError
from tidings.model.schedules import (
    ActionAfterCompletion,
    RetryPolicy,
    ScheduleSpec,
    ScheduleState,
    Target,
    TargetKind,
)
from tidings.queues.internal import DELIVERY_QUEUE, ensure_internal_queues
from tidings.runtime.bridge import Bridge
from tidings.schedules.dispatcher import Dispatcher
from tidings.store.base import Firing


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


@pytest.fixture
def dispatcher(t: Tidings) -> Dispatcher:
    ensure_internal_queues(t.queues)
    return Dispatcher(t.schedules, t.queues, t.store, t.clock, t.notifier, Bridge(1))


def queue_target(name: str = "jobs", **kw: object) -> Target:
    return Target(TargetKind.QUEUE, name, **kw)  # type: ignore[arg-type]


def drain(t: Tidings, queue: str) -> list[str]:
    bodies = []
    while msgs := t.queues.receive(queue, 10, wait_s=0):
        bodies.extend(m.body for m in msgs)
        for m in msgs:
            t.queues.delete(queue, m.receipt_handle)
    return bodies


def test_crud_and_validation(t: Tidings, clock: FrozenClock) -> None:
    t.queues.create_queue("jobs")
    s = t.schedules.create(ScheduleSpec("daily", "cron(0 9 * * ? *)", queue_target(),
                                        timezone="Europe/Paris", description="morning"))
    assert s.spec.state is ScheduleState.ENABLED and s.next_fire_at is not None
    assert t.schedules.get("daily").spec.description == "morning"
    with pytest.raises(ConflictError):
        t.schedules.create(ScheduleSpec("daily", "rate(5 minutes)", queue_target()))
    # the same request retried with its client token is idempotent
    tok = ScheduleSpec("tok", "rate(5 minutes)", queue_target(), client_token="abc")
    assert t.schedules.create(tok).id == t.schedules.create(tok).id
    for bad, field in [
        (ScheduleSpec("x y", "rate(1 minute)", queue_target()), "Name"),
        (ScheduleSpec("x", "rate(1 minutes)", queue_target()), "ScheduleExpression"),
        (ScheduleSpec("x", "rate(1 minute)", queue_target(), timezone="Mars/Base"),
         "ScheduleExpressionTimezone"),
        (ScheduleSpec("x", "rate(1 minute)", queue_target(), flexible_window_minutes=1441),
         "FlexibleTimeWindow.MaximumWindowInMinutes"),
        (ScheduleSpec("x", "rate(1 minute)", queue_target("missing")), "Target.Arn"),
        (ScheduleSpec("x", "rate(1 minute)", queue_target(), start_ms=10, end_ms=5), "EndDate"),
    ]:
        with pytest.raises(ValidationError) as err:
            t.schedules.create(bad)
        assert err.value.field == field
    with pytest.raises(ValidationError) as err:
        RetryPolicy(maximum_retry_attempts=186)
    assert err.value.field == "RetryPolicy.MaximumRetryAttempts"
    with pytest.raises(ValidationError):
        RetryPolicy(maximum_event_age_s=59)
    # update is a full replace
    updated = t.schedules.update(ScheduleSpec("daily", "rate(1 hour)", queue_target()))
    assert updated.spec.description is None and updated.spec.timezone == "UTC"
    t.schedules.set_state("daily", ScheduleState.DISABLED)
    assert t.schedules.get("daily").due_at is None
    t.schedules.delete("daily")
    with pytest.raises(ScheduleNotFound):
        t.schedules.get("daily")


def test_list_prefix_and_pagination(t: Tidings) -> None:
    t.queues.create_queue("jobs")
    for i in range(7):
        t.schedules.create(ScheduleSpec(f"r-{i}", "rate(1 hour)", queue_target()))
    t.schedules.create(ScheduleSpec("other", "rate(1 hour)", queue_target()))
    page, token = t.schedules.list(prefix="r-", limit=3)
    names = [s.name for s in page]
    while token:
        page, token = t.schedules.list(prefix="r-", limit=3, next_token=token)
        names += [s.name for s in page]
    assert names == [f"r-{i}" for i in range(7)]


def test_groups(t: Tidings) -> None:
    t.queues.create_queue("jobs")
    t.schedules.create_group("promo", {"team": "growth"})
    with pytest.raises(ConflictError):
        t.schedules.create_group("promo")
    t.schedules.create(ScheduleSpec("a", "rate(1 hour)", queue_target(), group="promo"))
    t.schedules.create(ScheduleSpec("a", "rate(1 hour)", queue_target()))  # same name, default
    with pytest.raises(GroupNotFound):
        t.schedules.create(ScheduleSpec("a", "rate(1 hour)", queue_target(), group="nope"))
    assert t.schedules.delete_group("promo") == 1
    assert t.schedules.get("a").group == "default"
    with pytest.raises(ValidationError):
        t.schedules.delete_group("default")


def test_one_shot_fires_once_into_queue_and_deletes_itself(
    t: Tidings, clock: FrozenClock, dispatcher: Dispatcher
) -> None:
    t.queues.create_queue("jobs")
    clock.set(ms("2026-04-20T08:59:00"))
    t.schedules.create(ScheduleSpec(
        "reminder-1", "at(2026-04-20T09:00:00)",
        queue_target(input='{"type": "reminder", "at": "<aws.scheduler.scheduled-time>",'
                     ' "exec": "<aws.scheduler.execution-id>", "n": <aws.scheduler.attempt-number>,'
                     ' "arn": "<aws.scheduler.schedule-arn>"}'),
        action_after_completion=ActionAfterCompletion.DELETE))
    assert dispatcher.fire_due() == 0
    clock.set(ms("2026-04-20T09:00:00"))
    assert dispatcher.fire_due() == 1
    [body] = drain(t, "jobs")
    doc = json.loads(body)
    assert doc["at"] == "2026-04-20T09:00:00Z" and doc["n"] == 1
    assert doc["arn"].endswith(":schedule/default/reminder-1") and len(doc["exec"]) == 36
    with pytest.raises(ScheduleNotFound):  # DELETE after completion leaves no row
        t.schedules.get("reminder-1")
    clock.advance(600_000)
    assert dispatcher.fire_due() == 0 and drain(t, "jobs") == []


def test_one_shot_without_delete_stays_completed(
    t: Tidings, clock: FrozenClock, dispatcher: Dispatcher
) -> None:
    t.queues.create_queue("jobs")
    clock.set(ms("2026-04-20T08:00:00"))
    t.schedules.create(ScheduleSpec("once", "at(2026-04-20T09:00:00)", queue_target()))
    clock.set(ms("2026-04-20T09:00:01"))
    dispatcher.fire_due()
    s = t.schedules.get("once")
    assert s.next_fire_at is None and s.due_at is None and s.last_fired_at is not None
    assert len(drain(t, "jobs")) == 1


def test_at_in_the_zone(t: Tidings, clock: FrozenClock, dispatcher: Dispatcher) -> None:
    t.queues.create_queue("jobs")
    clock.set(ms("2026-04-20T00:00:00"))
    s = t.schedules.create(ScheduleSpec("tokyo", "at(2026-04-20T09:00:00)", queue_target(),
                                        timezone="Asia/Tokyo"))
    assert s.next_fire_at == ms("2026-04-20T00:00:00")  # 09:00 JST is midnight UTC


def test_disabled_schedule_never_fires(t: Tidings, clock: FrozenClock,
                                       dispatcher: Dispatcher) -> None:
    t.queues.create_queue("jobs")
    t.schedules.create(ScheduleSpec("off", "rate(1 minute)", queue_target(),
                                    state=ScheduleState.DISABLED))
    for _ in range(5):
        clock.advance(60_000)
        assert dispatcher.fire_due() == 0
    assert drain(t, "jobs") == []


def test_rate_until_end_date(t: Tidings, clock: FrozenClock, dispatcher: Dispatcher) -> None:
    t.queues.create_queue("jobs")
    start = clock.now_ms()
    t.schedules.create(ScheduleSpec("tick", "rate(1 minute)", queue_target(input="tick"),
                                    start_ms=start, end_ms=start + 3 * 60_000))
    fired = 0
    for _ in range(10):
        fired += dispatcher.fire_due()
        clock.advance(60_000)
    assert drain(t, "jobs") == ["tick"] * 4  # start, +1, +2, +3 (EndDate is inclusive)
    assert t.schedules.get("tick").next_fire_at is None


def test_missed_recurring_fires_latest_once_one_shots_always(
    t: Tidings, clock: FrozenClock, dispatcher: Dispatcher
) -> None:
    t.queues.create_queue("jobs")
    clock.set(ms("2026-01-01T00:00:00"))
    t.schedules.create(ScheduleSpec("every-min", "rate(1 minute)",
                                    queue_target(input="<aws.scheduler.scheduled-time>")))
    t.schedules.create(ScheduleSpec("shot", "at(2026-01-01T00:30:00)", queue_target(input="x")))
    dispatcher.fire_due()
    assert drain(t, "jobs") == ["2026-01-01T00:00:00Z"]
    clock.set(ms("2026-01-01T01:00:30"))  # an hour of downtime
    dispatcher.fire_due()
    assert sorted(drain(t, "jobs")) == ["2026-01-01T01:00:00Z", "x"]  # no burst of 60
    assert t.schedules.get("every-min").next_fire_at == ms("2026-01-01T01:01:00")


def test_missed_occurrence_older_than_max_event_age_is_skipped(
    t: Tidings, clock: FrozenClock, dispatcher: Dispatcher
) -> None:
    t.queues.create_queue("jobs")
    clock.set(ms("2026-01-01T00:00:00"))
    t.schedules.create(ScheduleSpec(
        "daily", "cron(0 0 * * ? *)",
        queue_target(retry_policy=RetryPolicy(maximum_event_age_s=3600))))
    dispatcher.fire_due()
    drain(t, "jobs")
    clock.set(ms("2026-01-02T05:00:00"))  # 5 h late: older than its 1 h maximum age
    dispatcher.fire_due()
    assert drain(t, "jobs") == []
    assert t.schedules.get("daily").next_fire_at == ms("2026-01-03T00:00:00")


def test_flexible_window_spreads_evenly(t: Tidings, clock: FrozenClock,
                                        dispatcher: Dispatcher) -> None:
    t.queues.create_queue("jobs")
    clock.set(ms("2026-06-01T08:00:00"))
    results = list(t.schedules.create_many(
        ScheduleSpec(f"r{i}", "at(2026-06-01T09:00:00)", queue_target(input=str(i)),
                     flexible_window_minutes=10) for i in range(2000)))
    assert all(r.created for r in results)
    dues = [s.due_at for s in t.schedules.list(limit=1000)[0]]
    page, token = t.schedules.list(limit=1000)
    rows = page + t.schedules.list(limit=1000, next_token=token)[0]
    dues = [s.due_at - ms("2026-06-01T09:00:00") for s in rows if s.due_at is not None]
    assert len(dues) == 2000 and min(dues) >= 0 and max(dues) < 600_000
    per_minute = Counter(d // 60_000 for d in dues)
    assert sorted(per_minute) == list(range(10))
    assert all(150 <= n <= 250 for n in per_minute.values()), per_minute  # ~200 each
    clock.set(ms("2026-06-01T09:05:00"))
    while dispatcher.fire_due():
        pass
    assert 800 <= len(drain(t, "jobs")) <= 1200  # about half fired by mid-window


def test_create_many_reports_per_item_errors_and_resumes(t: Tidings) -> None:
    t.queues.create_queue("jobs")
    specs = [ScheduleSpec(f"s{i}", "rate(1 hour)", queue_target()) for i in range(5)]
    specs.insert(2, ScheduleSpec("bad zone", "rate(1 hour)", queue_target()))
    specs.insert(4, ScheduleSpec("s-bad-q", "rate(1 hour)", queue_target("nope")))
    results = list(t.schedules.create_many(specs, chunk=3))
    assert [r.index for r in results] == list(range(7))
    errors = {r.index: r.error.field for r in results if r.error}  # type: ignore[union-attr]
    assert errors == {2: "Name", 4: "Target.Arn"}
    assert sum(r.created for r in results) == 5
    again = list(t.schedules.create_many(specs))
    assert sum(r.created for r in again) == 0  # re-run creates nothing twice


def test_fifo_queue_target_needs_group_and_dedupes_by_execution(
    t: Tidings, clock: FrozenClock, dispatcher: Dispatcher
) -> None:
    t.queues.create_queue("jobs.fifo")
    with pytest.raises(ValidationError) as err:
        t.schedules.create(ScheduleSpec("f", "rate(1 minute)", queue_target("jobs.fifo")))
    assert err.value.field == "Target.SqsParameters.MessageGroupId"
    t.schedules.create(ScheduleSpec("f", "rate(1 minute)",
                                    queue_target("jobs.fifo", message_group_id="g")))
    dispatcher.fire_due()
    [m] = t.queues.receive("jobs.fifo", 10, wait_s=0)
    assert m.group_id == "g" and m.deduplication_id is not None


def test_missing_target_queue_becomes_a_retried_delivery(
    t: Tidings, clock: FrozenClock, dispatcher: Dispatcher
) -> None:
    """A queue missing at fire time fails that invocation: the firing becomes a delivery
    job, retried by the target's retry policy, then dead-lettered (test_aws_edges.py runs
    it to the DLQ through a real node)."""
    t.queues.create_queue("jobs")
    t.queues.create_queue("sched-dlq")
    t.schedules.create(ScheduleSpec("s", "rate(1 hour)",
                                    queue_target(input="payload", dead_letter_queue="sched-dlq")))
    t.queues.delete_queue("jobs")
    dispatcher.fire_due()
    assert t.queues.receive("sched-dlq", wait_s=0) == []
    [m], _ = t.queues.peek(DELIVERY_QUEUE)  # the engine's own: read, not received
    doc = json.loads(m.message.body)
    assert doc["target"]["kind"] == "queue" and doc["target"]["destination"] == "jobs"
    assert doc["input"] == "payload"
    assert doc["context"]["schedule_arn"].endswith("schedule/default/s")


def test_non_queue_targets_become_deliveries(
    t: Tidings, clock: FrozenClock, dispatcher: Dispatcher
) -> None:
    t.schedules.create(ScheduleSpec("hook", "rate(1 hour)",
                                    Target(TargetKind.WEBHOOK, "http://127.0.0.1:9/x",
                                           input='{"n": <aws.scheduler.attempt-number>}')))
    dispatcher.fire_due()
    [m], _ = t.queues.peek(DELIVERY_QUEUE)  # the engine's own: read, not received
    doc = json.loads(m.message.body)
    assert doc["type"] == "tidings.delivery" and doc["target"]["kind"] == "webhook"
    assert doc["input"] == '{"n": <aws.scheduler.attempt-number>}'  # filled per attempt
    assert doc["id"] == doc["context"]["execution_id"]


def test_a_pass_that_lost_its_rows_writes_nothing(t: Tidings, clock: FrozenClock,
                                                  dispatcher: Dispatcher) -> None:
    """A pass whose rows another dispatcher fired meanwhile cannot fire them again."""
    t.queues.create_queue("jobs")
    t.schedules.create(ScheduleSpec("s", "at(2020-01-01T00:00:00)", queue_target(input="x")))
    with t.store.firing_pass(clock.now_ms(), 10, 10_000) as stale:
        [s] = stale.schedules
        assert s.next_fire_at is not None
        # SQLite: the other dispatcher reads the row too, and fires it; PostgreSQL: the
        # row is locked by the stale pass, so the other dispatcher skips it.
        fired = dispatcher.fire_due()
        held = stale.complete([Firing(s.id, s.next_fire_at, None, None, False, True)],
                              clock.now_ms())
    assert fired + held.count(True) == 1
    assert drain(t, "jobs") == (["x"] if fired else [])
