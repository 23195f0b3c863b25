"""The firing history (each schedule's last firings and their outcome) on every backend:
written with the firing for queue targets (not for one that deletes its schedule), read
newest first, trimmed after `TIDINGS_FIRING_HISTORY_S` (a day by default)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.model.schedules import (
    ActionAfterCompletion,
    RetryPolicy,
    ScheduleSpec,
    Target,
    TargetKind,
)
from tidings.ops.sweeper import Sweeper
from tidings.queues.internal import ensure_internal_queues
from tidings.runtime.bridge import Bridge
from tidings.schedules.dispatcher import Dispatcher
from tidings.schedules.firing_log import KEEP_MS, TRIM_STEP, FiringLog, Outcome, outcome_row
from tidings.settings import Settings


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


@pytest.fixture
def dispatcher(t: Tidings) -> Dispatcher:
    ensure_internal_queues(t.queues)
    return Dispatcher(t.schedules, t.queues, t.store, t.clock, t.notifier, Bridge(1))


def test_queue_firings_are_recorded_with_their_outcome(t: Tidings, clock: FrozenClock,
                                                       dispatcher: Dispatcher) -> None:
    t.queues.create_queue("jobs")
    clock.set(ms("2026-01-01T00:00:00"))
    daily = t.schedules.create(ScheduleSpec(
        "daily", "cron(0 0 * * ? *)",
        Target(TargetKind.QUEUE, "jobs", retry_policy=RetryPolicy(maximum_event_age_s=3600))))
    t.queues.create_queue("gone")
    missing = t.schedules.create(ScheduleSpec(
        "to-missing", "at(2026-01-01T00:00:00)", Target(TargetKind.QUEUE, "gone")))
    t.queues.delete_queue("gone")
    dispatcher.fire_due()
    clock.set(ms("2026-01-02T00:00:01"))
    dispatcher.fire_due()
    clock.set(ms("2026-01-03T05:00:00"))  # 5 h late: older than its 1 h maximum age
    dispatcher.fire_due()
    got = t.firing_log.recent(daily.id)
    assert [(f.occurrence, f.outcome, f.attempts) for f in got] == [
        (ms("2026-01-03T00:00:00"), Outcome.SKIPPED, 0),
        (ms("2026-01-02T00:00:00"), Outcome.DELIVERED, 1),
        (ms("2026-01-01T00:00:00"), Outcome.DELIVERED, 1)]
    assert got[1].at == ms("2026-01-02T00:00:01") and got[1].good and not got[0].good
    # A queue that does not exist: handed to the delivery queue, whose outcome comes later.
    assert t.firing_log.recent(missing.id) == []


def test_recent_is_bounded_and_per_schedule(t: Tidings) -> None:
    t.store.record_firings([outcome_row(7, i, 1000 + i, Outcome.DELIVERED) for i in range(15)]
                           + [outcome_row(8, 0, 2000, Outcome.DROPPED, 3, "HTTP500: nope")])
    got = t.firing_log.recent(7)
    assert [f.occurrence for f in got] == list(range(14, 4, -1))  # the last 10, newest first
    (other,) = t.firing_log.recent(8)
    assert (other.outcome, other.attempts, other.detail) == ("dropped", 3, "HTTP500: nope")


def test_trim_forgets_rows_older_than_a_day_in_bounded_steps(t: Tidings,
                                                              clock: FrozenClock) -> None:
    now = clock.now_ms()
    old = [outcome_row(1, i, now - KEEP_MS - 1000 + i, Outcome.DELIVERED) for i in range(5)]
    young = [outcome_row(1, 100 + i, now - 1000 + i, Outcome.DELIVERED) for i in range(3)]
    t.store.record_firings(old + young)
    assert t.store.trim_firings(now - KEEP_MS, 2) == 2  # at most the limit per call
    assert t.firing_log.trim() == 3
    assert t.firing_log.trim() == 0
    assert [f.occurrence for f in t.firing_log.recent(1)] == [102, 101, 100]
    clock.advance(KEEP_MS + 60_000)
    assert t.firing_log.trim() == 3
    assert t.firing_log.recent(1) == []
    assert t.firing_log.trim() == 0  # an empty history


def test_a_firing_that_deletes_its_schedule_writes_no_history(t: Tidings, clock: FrozenClock,
                                                              dispatcher: Dispatcher) -> None:
    t.queues.create_queue("jobs")
    clock.set(ms("2026-01-01T00:00:00"))
    target = Target(TargetKind.QUEUE, "jobs")
    gone = t.schedules.create(ScheduleSpec(
        "once-and-gone", "at(2026-01-01T00:00:00)", target,
        action_after_completion=ActionAfterCompletion.DELETE))
    kept = t.schedules.create(ScheduleSpec("once", "at(2026-01-01T00:00:00)", target))
    assert dispatcher.fire_due() == 2
    assert t.queues.describe("jobs").counts.visible == 2
    assert t.firing_log.recent(gone.id) == []
    assert [f.outcome for f in t.firing_log.recent(kept.id)] == [Outcome.DELIVERED]
    assert t.store.trim_firings(clock.now_ms() + 1, 10) == 1  # the only row: kept's


def test_the_history_keeps_what_the_setting_says_in_short_steps(db_url: str,
                                                                clock: FrozenClock) -> None:
    with Tidings(settings=Settings(db=db_url, firing_history_s=3600), clock=clock) as t:
        now = clock.now_ms()
        rows = [outcome_row(1, i, now - 3_600_000 - 10_000, Outcome.DELIVERED)
                for i in range(TRIM_STEP + 5)]
        t.store.record_firings([*rows, outcome_row(1, -1, now - 3_500_000, Outcome.DELIVERED)])
        assert t.firing_log.trim() == TRIM_STEP  # one step at a time
        assert t.firing_log.trim() == 5
        assert [f.occurrence for f in t.firing_log.recent(1)] == [-1]
        assert FiringLog(t.store, clock).keep_ms == KEEP_MS  # the default: a day


def test_a_sweeper_pass_trims_in_several_short_transactions(t: Tidings,
                                                            clock: FrozenClock) -> None:
    old = clock.now_ms() - KEEP_MS - 1000
    t.store.record_firings([outcome_row(1, i, old, Outcome.DELIVERED)
                            for i in range(2 * TRIM_STEP + 3)])
    calls: list[int] = []
    log = t.firing_log
    trim = log.trim

    def counted() -> int:
        calls.append(n := trim())
        return n

    log.trim = counted  # type: ignore[method-assign]
    sweeper = Sweeper(t.queues, Bridge(1), interval_s=5, job_memory_s=60, firings=log)
    asyncio.run(sweeper._trim_firings(log))
    assert calls == [TRIM_STEP, TRIM_STEP, 3]
    assert t.firing_log.recent(1) == []


def test_a_new_schedule_shows_none_of_a_deleted_ones_history(
        t: Tidings, clock: FrozenClock, dispatcher: Dispatcher) -> None:
    # Schedule ids are never reused (SQLite used to give a new row the id of the deleted
    # row that had the highest id): the page must not show the old schedule's firings.
    t.queues.create_queue("jobs")
    clock.set(ms("2026-01-01T00:00:00"))
    jobs = Target(TargetKind.QUEUE, "jobs")
    old = t.schedules.create(ScheduleSpec("old", "rate(1 minute)", jobs))
    clock.advance(60_000)
    assert dispatcher.fire_due() == 1
    assert len(t.schedule_search.detail("default", "old").firings) == 1
    t.schedules.delete("old")
    clock.advance(1)
    new = t.schedules.create(ScheduleSpec("new", "rate(1 hour)", jobs))
    assert new.id > old.id
    assert t.schedule_search.detail("default", "new").firings == []
