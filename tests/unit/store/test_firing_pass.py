"""A dispatcher pass: on a single-writer database (SQLite) its claim is a plain read and
it plans outside any transaction, so a pass that fails after its claim leaves nothing
behind, not even the claim, and other writers go on while it plans; the completion's
compare-and-set refuses a row fired or changed since. Where many nodes write
(PostgreSQL) the claim is marked and committed at once, and holds until it expires."""

from __future__ import annotations

import threading

import pytest

from tidings.client import Tidings
from tidings.clock import FrozenClock, from_ms
from tidings.model.schedules import ActionAfterCompletion, Schedule, ScheduleSpec, Target
from tidings.store.base import Firing


class _Boom(Exception):
    pass


def test_a_failed_pass_keeps_or_drops_its_claim_by_backend(t: Tidings,
                                                          clock: FrozenClock) -> None:
    t.queues.create_queue("jobs")
    now = clock.now_ms()
    t.schedules.create(ScheduleSpec.once("one", from_ms(now + 10), Target.queue("jobs", "a"),
                                         action_after_completion=ActionAfterCompletion.DELETE))
    clock.advance(1_000)
    with pytest.raises(_Boom), t.store.firing_pass():
        assert len(t.store.claim_due_schedules(clock.now_ms(), 10, 10_000, 7)) == 1
        raise _Boom
    due = t.store.next_due_at()
    if t.store.inline_lock is not None:  # SQLite: one connection, one transaction
        assert due == now + 10
    else:
        assert due == clock.now_ms() + 10_000  # the claim committed on its own


def test_a_pass_commits_its_claim_and_completion_together(t: Tidings,
                                                          clock: FrozenClock) -> None:
    t.queues.create_queue("jobs")
    t.schedules.create(ScheduleSpec("every", "rate(1 minute)", Target.queue("jobs", "b")))
    clock.advance(60_000)
    with t.store.firing_pass():
        claimed = t.store.claim_due_schedules(clock.now_ms(), 10, 10_000, 7)
        assert len(claimed) == 1
        s = claimed[0]
        assert s.next_fire_at is not None
        firing = Firing(schedule_id=s.id, claim_token=7, occurrence=s.next_fire_at,
                        next_fire_at=s.next_fire_at + 60_000,
                        due_at=s.next_fire_at + 60_000, delete=False, fired=True)
        assert t.store.complete_firings([firing], clock.now_ms()) == [True]
    assert t.schedules.get("every").next_fire_at == s.next_fire_at + 60_000
    assert t.store.next_due_at() == s.next_fire_at + 60_000


def _one_shot(t: Tidings, clock: FrozenClock, name: str = "one") -> int:
    t.queues.create_queue("jobs")
    at = clock.now_ms() + 10
    t.schedules.create(ScheduleSpec.once(name, from_ms(at), Target.queue("jobs", "a"),
                                         action_after_completion=ActionAfterCompletion.DELETE))
    clock.advance(1_000)
    return at


def _fire(s: Schedule, token: int, occurrence: int | None = None) -> Firing:
    assert s.next_fire_at is not None
    return Firing(schedule_id=s.id, claim_token=token,
                  occurrence=s.next_fire_at if occurrence is None else occurrence,
                  next_fire_at=None, due_at=None, delete=True, fired=True)


def test_a_one_transaction_pass_reads_its_claim_without_marking(t: Tidings,
                                                                clock: FrozenClock) -> None:
    at = _one_shot(t, clock)
    with t.store.firing_pass():
        [s] = t.store.claim_due_schedules(clock.now_ms(), 10, 10_000, 7)
        # SQLite: the write lock is the pass's until it commits, so the row is not
        # rewritten (no claim token, due_at where it was); PostgreSQL marks it at once.
        due = t.store.next_due_at()
        if t.store.inline_lock is not None:
            assert due == at
        else:
            assert due == clock.now_ms() + 10_000
        assert t.store.complete_firings([_fire(s, 7)], clock.now_ms()) == [True]
    assert t.store.next_due_at() is None


def test_a_pass_refuses_a_stale_occurrence_and_a_foreign_token(t: Tidings,
                                                               clock: FrozenClock) -> None:
    _one_shot(t, clock)
    with t.store.firing_pass():
        [s] = t.store.claim_due_schedules(clock.now_ms(), 10, 10_000, 7)
        assert s.next_fire_at is not None
        stale = _fire(s, 7, occurrence=s.next_fire_at - 1)
        assert t.store.complete_firings([stale], clock.now_ms()) == [False]
        assert t.store.complete_firings([_fire(s, 8)], clock.now_ms()) == [False]
        assert t.store.complete_firings([_fire(s, 7)], clock.now_ms()) == [True]
        assert t.store.complete_firings([_fire(s, 7)], clock.now_ms()) == [False]  # once
    assert t.store.next_due_at() is None


def test_a_claim_read_in_a_pass_cannot_be_completed_after_it(t: Tidings,
                                                             clock: FrozenClock) -> None:
    at = _one_shot(t, clock)
    with t.store.firing_pass():
        [s] = t.store.claim_due_schedules(clock.now_ms(), 10, 10_000, 7)
    if t.store.inline_lock is not None:  # read unmarked: nothing holds outside the pass
        assert t.store.complete_firings([_fire(s, 7)], clock.now_ms()) == [False]
        assert t.store.next_due_at() == at  # still due: the next pass fires it
    else:  # marked: the claim holds until it expires
        assert t.store.complete_firings([_fire(s, 7)], clock.now_ms()) == [True]


def test_a_pass_takes_over_an_expired_claim_and_completes_a_marked_one(
        t: Tidings, clock: FrozenClock) -> None:
    _one_shot(t, clock, "dead")
    [dead] = t.store.claim_due_schedules(clock.now_ms(), 10, 1_000, 111)  # node died
    clock.advance(1_001)
    with t.store.firing_pass():
        [s] = t.store.claim_due_schedules(clock.now_ms(), 10, 10_000, 7)
        assert s.id == dead.id
        assert t.store.complete_firings([_fire(s, 7)], clock.now_ms()) == [True]
    assert t.store.complete_firings([_fire(dead, 111)], clock.now_ms()) == [False]
    _one_shot(t, clock, "marked")  # claimed outside a pass, completed inside one
    [m] = t.store.claim_due_schedules(clock.now_ms(), 10, 10_000, 5)
    with t.store.firing_pass():
        assert t.store.claim_due_schedules(clock.now_ms(), 10, 10_000, 6) == []
        assert t.store.complete_firings([_fire(m, 6)], clock.now_ms()) == [False]
        assert t.store.complete_firings([_fire(m, 5)], clock.now_ms()) == [True]


def test_other_writers_go_on_while_a_pass_plans(t: Tidings, clock: FrozenClock) -> None:
    _one_shot(t, clock)
    sent = threading.Event()
    with t.store.firing_pass():
        [s] = t.store.claim_due_schedules(clock.now_ms(), 10, 10_000, 7)
        # (the dispatcher plans here, in Python: a send from another thread, or a web
        # process, must not wait for the pass's commit)
        writer = threading.Thread(target=lambda: (t.queues.send("jobs", "meanwhile"),
                                                  sent.set()))
        writer.start()
        assert sent.wait(10), "the send waited for the firing pass"
        assert t.store.complete_firings([_fire(s, 7)], clock.now_ms()) == [True]
    writer.join()
    assert t.queues.describe("jobs").counts.visible == 1  # the send (the firing wrote none)


def test_a_schedule_updated_while_its_pass_plans_is_not_fired_by_the_old_plan(
        t: Tidings, clock: FrozenClock) -> None:
    at = _one_shot(t, clock)
    with t.store.firing_pass():
        [s] = t.store.claim_due_schedules(clock.now_ms(), 10, 10_000, 7)
        clock.advance(1)
        updated = t.schedules.update(ScheduleSpec.once(
            "one", from_ms(at), Target.queue("jobs", "new input"),
            action_after_completion=ActionAfterCompletion.DELETE))
        assert updated.next_fire_at == s.next_fire_at  # the same occurrence: only the
        # row's modification (SQLite) or its cleared claim (PostgreSQL) tells
        assert t.store.complete_firings([_fire(s, 7)], clock.now_ms()) == [False]
    assert t.schedules.get("one").spec.target.input == "new input"
    assert t.store.next_due_at() is not None  # still due: the next pass fires the new one
