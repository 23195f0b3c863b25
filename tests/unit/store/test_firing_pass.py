"""A dispatcher pass claims its rows without marking them: on a single-writer database
(SQLite) its claim is a plain read and it plans outside any transaction; where many nodes
write (PostgreSQL) the pass is one transaction whose claim locks the rows. Either way a
pass that fails after its claim leaves nothing behind, not even the claim, other writers
go on while it plans, and the completion's compare-and-set refuses a row fired or changed
since. The pass is a handle (`with store.firing_pass(…) as p`): what it claimed and read
lives in it, and it is good only inside its block."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from tidings.client import Tidings
from tidings.clock import FrozenClock, from_ms
from tidings.errors import ScheduleNotFound, StoreUnavailable
from tidings.model.schedules import (
    ActionAfterCompletion,
    Schedule,
    ScheduleSpec,
    ScheduleState,
    Target,
)
from tidings.settings import Settings
from tidings.store.base import Firing, TargetMessage


class _Boom(Exception):
    pass


def test_a_failed_pass_leaves_its_rows_due_at_once(t: Tidings, clock: FrozenClock) -> None:
    t.queues.create_queue("jobs")
    now = clock.now_ms()
    t.schedules.create(ScheduleSpec.once("one", from_ms(now + 10), Target.queue("jobs", "a"),
                                         action_after_completion=ActionAfterCompletion.DELETE))
    clock.advance(1_000)
    with pytest.raises(_Boom), t.store.firing_pass(clock.now_ms(), 10, 10_000) as p:
        assert len(p.schedules) == 1
        raise _Boom
    assert t.store.next_due_at() == now + 10  # no claim to wait out
    assert t.schedules.get("one").due_at == now + 10


def test_a_pass_commits_its_claim_and_completion_together(t: Tidings,
                                                          clock: FrozenClock) -> None:
    t.queues.create_queue("jobs")
    t.schedules.create(ScheduleSpec("every", "rate(1 minute)", Target.queue("jobs", "b")))
    clock.advance(60_000)
    with t.store.firing_pass(clock.now_ms(), 10, 10_000) as p:
        [s] = p.schedules
        assert s.next_fire_at is not None
        firing = Firing(schedule_id=s.id, occurrence=s.next_fire_at,
                        next_fire_at=s.next_fire_at + 60_000,
                        due_at=s.next_fire_at + 60_000, delete=False, fired=True)
        assert p.complete([firing], clock.now_ms()) == [True]
    assert t.schedules.get("every").next_fire_at == s.next_fire_at + 60_000
    assert t.store.next_due_at() == s.next_fire_at + 60_000


def _one_shot(t: Tidings, clock: FrozenClock, name: str = "one") -> int:
    t.queues.create_queue("jobs")
    at = clock.now_ms() + 10
    t.schedules.create(ScheduleSpec.once(name, from_ms(at), Target.queue("jobs", "a"),
                                         action_after_completion=ActionAfterCompletion.DELETE))
    clock.advance(1_000)
    return at


def _fire(s: Schedule, occurrence: int | None = None,
          messages: Sequence[TargetMessage] = ()) -> Firing:
    assert s.next_fire_at is not None
    return Firing(schedule_id=s.id,
                  occurrence=s.next_fire_at if occurrence is None else occurrence,
                  next_fire_at=None, due_at=None, delete=True, fired=True, messages=messages)


def test_a_pass_claims_without_marking(t: Tidings, clock: FrozenClock) -> None:
    at = _one_shot(t, clock)
    with t.store.firing_pass(clock.now_ms(), 10, 10_000) as p:
        [s] = p.schedules
        # Not rewritten (due_at where it was): SQLite's pass holds no lock yet,
        # PostgreSQL's holds the row's lock in its transaction.
        assert t.store.next_due_at() == at
        assert p.complete([_fire(s)], clock.now_ms()) == [True]
    assert t.store.next_due_at() is None


def test_a_pass_completes_only_what_it_claimed_as_it_read_it_and_once(
        t: Tidings, clock: FrozenClock) -> None:
    _one_shot(t, clock)
    with t.store.firing_pass(clock.now_ms(), 10, 10_000) as p:
        [s] = p.schedules
        assert s.next_fire_at is not None
        stale = _fire(s, occurrence=s.next_fire_at - 1)
        assert p.complete([stale], clock.now_ms()) == [False]
        foreign = Firing(schedule_id=s.id + 1, occurrence=s.next_fire_at, next_fire_at=None,
                         due_at=None, delete=True, fired=True)
        assert p.complete([foreign], clock.now_ms()) == [False]  # not claimed by this pass
        twice = _fire(s)
        assert p.complete([twice, _fire(s)], clock.now_ms()) == [True, False]
        assert p.complete([_fire(s)], clock.now_ms()) == [False]  # once
    assert t.store.next_due_at() is None


def test_a_pass_is_completed_inside_its_block_or_not_at_all(t: Tidings,
                                                            clock: FrozenClock) -> None:
    at = _one_shot(t, clock)
    with t.store.firing_pass(clock.now_ms(), 10, 10_000) as p:
        [s] = p.schedules
    with pytest.raises(RuntimeError):
        p.complete([_fire(s)], clock.now_ms())
    assert t.store.next_due_at() == at  # still due: the next pass fires it


def test_of_two_passes_that_claimed_a_row_only_the_first_to_complete_fires_it(
        t: Tidings, clock: FrozenClock) -> None:
    """SQLite: two passes (a dispatcher process and one that outlived it) may read the
    same due rows, since a read takes no lock; the compare-and-set lets one fire them.
    PostgreSQL: the second pass skips the rows the first one locked."""
    _one_shot(t, clock)
    jobs = t.store.get_queue("jobs")

    def fire(s: Schedule, body: str) -> Firing:
        message = t.queues.ops.new_message(jobs, body, now=clock.now_ms())
        return _fire(s, messages=[TargetMessage(jobs.id, False, message)])

    with t.store.firing_pass(clock.now_ms(), 10, 10_000) as first:
        [s] = first.schedules
        with t.store.firing_pass(clock.now_ms(), 10, 10_000) as second:
            if t.store.inline_lock is None:  # PostgreSQL
                assert second.schedules == []
            else:
                assert [r.id for r in second.schedules] == [s.id]
                assert second.complete([fire(s, "second")], clock.now_ms()) == [True]
        held = first.complete([fire(s, "first")], clock.now_ms())
        assert held == [t.store.inline_lock is None]
    assert t.store.next_due_at() is None
    [m] = t.store.peek_messages(jobs.id, None, 10)  # fired once
    assert m.body == ("first" if t.store.inline_lock is None else "second")


def test_other_writers_go_on_while_a_pass_plans(t: Tidings, clock: FrozenClock) -> None:
    _one_shot(t, clock)
    sent = threading.Event()
    with t.store.firing_pass(clock.now_ms(), 10, 10_000) as p:
        [s] = p.schedules
        # (the dispatcher plans here, in Python: a send from another thread, or a web
        # process, must not wait for the pass's commit)
        writer = threading.Thread(target=lambda: (t.queues.send("jobs", "meanwhile"),
                                                  sent.set()))
        writer.start()
        assert sent.wait(10), "the send waited for the firing pass"
        assert p.complete([_fire(s)], clock.now_ms()) == [True]
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
    with t.store.firing_pass(clock.now_ms(), 10, 10_000) as p:
        [s] = p.schedules
        clock.advance(1)
        updated = t.schedules.update(update)
        assert updated.next_fire_at == s.next_fire_at  # the same occurrence: only the
        # row's modification tells
        assert p.complete([_fire(s)], clock.now_ms()) == [False]
    assert t.schedules.get("one").spec.target.input == "new input"
    assert t.store.next_due_at() is not None  # still due: the next pass fires the new one


@pytest.mark.parametrize("change", ["paused", "updated"])
def test_a_change_in_the_millisecond_of_the_read_refuses_the_stale_completion(
        t: Tidings, clock: FrozenClock, change: str) -> None:
    """The clock never moves: the one-shot is created due, read by the pass and paused (or
    updated) in one millisecond, so its `modified_at` is what the pass read. Its version
    is not: the completion planned from the row as it was must neither fire the old
    input nor delete the paused schedule. (PostgreSQL: the pass holds the row's lock,
    so the change waits for the pass instead: see the test above.)"""
    if t.store.inline_lock is None:
        pytest.skip("PostgreSQL: a change waits for the pass that locked its row")
    t.queues.create_queue("jobs")
    jobs = t.store.get_queue("jobs")
    now = clock.now_ms()
    spec = ScheduleSpec.once("one", from_ms(now), Target.queue("jobs", "old input"),
                             action_after_completion=ActionAfterCompletion.DELETE)
    t.schedules.create(spec)
    with t.store.firing_pass(now, 10, 10_000) as p:
        [s] = p.schedules
        planned = _fire(s, messages=[TargetMessage(jobs.id, False, t.queues.ops.new_message(
            jobs, "old input", now=now))])
        if change == "paused":
            changed = t.schedules.set_state("one", ScheduleState.DISABLED)
        else:
            changed = t.schedules.update(ScheduleSpec.once(
                "one", from_ms(now), Target.queue("jobs", "new input"),
                action_after_completion=ActionAfterCompletion.DELETE))
        assert (changed.modified_at, changed.next_fire_at) == (s.modified_at, s.next_fire_at)
        assert changed.version == s.version + 1
        assert p.complete([planned], now) == [False]
    assert t.store.peek_messages(jobs.id, None, 10) == []  # the old plan fired nothing
    kept = t.schedules.get("one")
    if change == "paused":
        assert kept.spec.state is ScheduleState.DISABLED and kept.due_at is None
    else:  # still due: the next pass fires the new input
        assert kept.spec.target.input == "new input" and kept.due_at == now


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

    with t.store.firing_pass(clock.now_ms(), 10, 10_000) as p:
        [s] = p.schedules
        writer = threading.Thread(target=updating)
        writer.start()
        writer.join(0.5)
        assert writer.is_alive(), "the update did not wait for the pass's row lock"
        assert p.complete([_fire(s)], clock.now_ms()) == [True]
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
        with pytest.raises(StoreUnavailable), \
                one.store.firing_pass(clock.now_ms(), 10, 200) as stalled:
            [s] = stalled.schedules
            with other.store.firing_pass(clock.now_ms(), 10, 10_000) as p:
                assert p.schedules == []  # meanwhile: locked, so skipped
            time.sleep(1.0)  # stalled past its hold: the server ends the transaction
            with other.store.firing_pass(clock.now_ms(), 10, 10_000) as p:
                [again] = p.schedules
                assert again.id == s.id
                assert p.complete([_fire(again)], clock.now_ms()) == [True]
            stalled.complete([_fire(s)], clock.now_ms())
        assert other.store.next_due_at() is None  # fired once, by the other node
