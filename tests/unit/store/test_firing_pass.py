"""A dispatcher pass claims its rows without marking them: on a single-writer database
(SQLite) its claim is a plain read and it plans outside any transaction; where many nodes
write (PostgreSQL) the pass is one transaction whose claim locks the rows. Either way a
pass that fails after its claim leaves nothing behind, not even the claim, other writers
go on while it plans, and the completion's compare-and-set refuses a row fired or changed
since. A claim marked outside a pass holds until it expires."""

from __future__ import annotations

import threading
import time

import pytest

from tidings.client import Tidings
from tidings.clock import FrozenClock, from_ms
from tidings.errors import ScheduleNotFound, StoreUnavailable
from tidings.model.schedules import ActionAfterCompletion, Schedule, ScheduleSpec, Target
from tidings.settings import Settings
from tidings.store.base import Firing


class _Boom(Exception):
    pass


def test_a_failed_pass_leaves_its_rows_due_at_once(t: Tidings, clock: FrozenClock) -> None:
    t.queues.create_queue("jobs")
    now = clock.now_ms()
    t.schedules.create(ScheduleSpec.once("one", from_ms(now + 10), Target.queue("jobs", "a"),
                                         action_after_completion=ActionAfterCompletion.DELETE))
    clock.advance(1_000)
    with pytest.raises(_Boom), t.store.firing_pass():
        assert len(t.store.claim_due_schedules(clock.now_ms(), 10, 10_000, 7)) == 1
        raise _Boom
    assert t.store.next_due_at() == now + 10  # no claim to wait out
    assert t.schedules.get("one").due_at == now + 10


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


def test_a_pass_claims_without_marking(t: Tidings, clock: FrozenClock) -> None:
    at = _one_shot(t, clock)
    with t.store.firing_pass():
        [s] = t.store.claim_due_schedules(clock.now_ms(), 10, 10_000, 7)
        # Not rewritten (no claim token, due_at where it was): SQLite's pass holds no
        # lock yet, PostgreSQL's holds the row's lock in its transaction.
        assert t.store.next_due_at() == at
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
    # unmarked: nothing holds outside the pass
    assert t.store.complete_firings([_fire(s, 7)], clock.now_ms()) == [False]
    assert t.store.next_due_at() == at  # still due: the next pass fires it


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
    update = ScheduleSpec.once("one", from_ms(at), Target.queue("jobs", "new input"),
                               action_after_completion=ActionAfterCompletion.DELETE)
    if t.store.inline_lock is None:  # PostgreSQL: the pass holds the row's lock
        _an_update_waits_for_the_pass_that_locked_its_row(t, clock, update)
        return
    with t.store.firing_pass():
        [s] = t.store.claim_due_schedules(clock.now_ms(), 10, 10_000, 7)
        clock.advance(1)
        updated = t.schedules.update(update)
        assert updated.next_fire_at == s.next_fire_at  # the same occurrence: only the
        # row's modification tells
        assert t.store.complete_firings([_fire(s, 7)], clock.now_ms()) == [False]
    assert t.schedules.get("one").spec.target.input == "new input"
    assert t.store.next_due_at() is not None  # still due: the next pass fires the new one


def _an_update_waits_for_the_pass_that_locked_its_row(t: Tidings, clock: FrozenClock,
                                                      update: ScheduleSpec) -> None:
    """PostgreSQL: the update and the firing are serialised by the row lock. The pass
    completes (the firing was planned from the row as it was), then the update finds the
    one-shot gone, as if it had come a moment after the firing."""
    outcome: list[BaseException | None] = []

    def updating() -> None:
        try:
            t.schedules.update(update)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 (handed to the test's thread)
            outcome.append(exc)

    with t.store.firing_pass():
        [s] = t.store.claim_due_schedules(clock.now_ms(), 10, 10_000, 7)
        writer = threading.Thread(target=updating)
        writer.start()
        writer.join(0.5)
        assert writer.is_alive(), "the update did not wait for the pass's row lock"
        assert t.store.complete_firings([_fire(s, 7)], clock.now_ms()) == [True]
    writer.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], ScheduleNotFound)
    assert t.store.next_due_at() is None  # fired (and deleted) once, as planned


def test_a_stalled_pass_loses_its_rows_to_another_node(db_url: str, clock: FrozenClock,
                                                       ) -> None:
    """PostgreSQL: a pass idle in its transaction for longer than its hold (a node paused
    or swapped out) is ended by the server; its rows go to the next pass, which fires
    them once, and the stalled pass writes nothing. (SQLite's pass holds nothing while it
    plans: there is nothing to lose.)"""
    if not db_url.startswith("postgres"):
        pytest.skip("SQLite: a pass holds no lock while it plans")
    with Tidings(settings=Settings(db=db_url), clock=clock) as one, \
            Tidings(settings=Settings(db=db_url), clock=clock) as other:
        _one_shot(one, clock)
        with pytest.raises(StoreUnavailable), one.store.firing_pass():
            [s] = one.store.claim_due_schedules(clock.now_ms(), 10, 200, 7)
            with other.store.firing_pass():  # meanwhile: locked, so skipped
                assert other.store.claim_due_schedules(clock.now_ms(), 10, 10_000, 8) == []
            time.sleep(1.0)  # stalled past its hold: the server ends the transaction
            with other.store.firing_pass():
                [again] = other.store.claim_due_schedules(clock.now_ms(), 10, 10_000, 8)
                assert again.id == s.id
                assert other.store.complete_firings([_fire(again, 8)],
                                                    clock.now_ms()) == [True]
            one.store.complete_firings([_fire(s, 7)], clock.now_ms())
        assert other.store.next_due_at() is None  # fired once, by the other node
