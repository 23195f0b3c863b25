"""A dispatcher pass in one transaction where the backend gains by it (SQLite): a pass
that fails after its claim leaves nothing behind, not even the claim; where each call
commits on its own (PostgreSQL), the claim holds until it expires, as before."""

from __future__ import annotations

import pytest

from tidings.client import Tidings
from tidings.clock import FrozenClock, from_ms
from tidings.model.schedules import ActionAfterCompletion, ScheduleSpec, Target
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
