"""A held job's life cycle inside a consumer (`Work` in the consumer package): the transitions
table is whole, every move goes through it, and what the consumer counts (room, running
handlers, the keys it holds) follows the moves."""

from __future__ import annotations

from collections import deque

import pytest

from tidings.jobs.batches import Held
from tidings.jobs.consumer.work import (
    HOLDS_KEY,
    TRANSITIONS,
    InvalidTransition,
    JobState,
    Ledger,
    ServedQueue,
    Work,
)
from tidings.jobs.handlers import Job
from tidings.model.messages import StoredMessage
from tidings.model.queues import QueueAttributes, QueueRecord
from tidings.model.receipts import Receipt

S = JobState


def served() -> ServedQueue:
    return ServedQueue("q", QueueRecord(1, "q", QueueAttributes.build(), 0, 0), {})


def work(queue: ServedQueue, n: int) -> Work:
    message = StoredMessage(
        row_id=n, lease_token=7, message_id=f"m-{n}", body="{}", md5_body="", attributes_json=None,
        md5_attributes=None, receive_count=1, first_received_at=0, sent_at=0, visible_at=0,
        group_id=None, deduplication_id=None, sequence_number=None, source_queue_id=None,
        last_error=None, scheduled_at=None)
    job = Job(id=str(n), type="t", payload={}, queue="q", attempt=1, message_id=f"m-{n}",
              sent_at=0)
    return Work(queue, Held(message, Receipt(1, n, 7)), job, job.key, 0.0)


def path_to(target: JobState) -> list[JobState]:
    """The shortest run of moves from RECEIVED to `target`."""
    paths = {S.RECEIVED: [S.RECEIVED]}
    todo = deque([S.RECEIVED])
    while todo:
        state = todo.popleft()
        for nxt in TRANSITIONS[state]:
            if nxt not in paths:
                paths[nxt] = [*paths[state], nxt]
                todo.append(nxt)
    return paths[target]


def test_the_table_names_every_state_and_every_job_can_be_let_go() -> None:
    assert set(TRANSITIONS) == set(JobState)
    assert [s for s, moves in TRANSITIONS.items() if not moves] == [S.GONE]
    for state in JobState:
        assert path_to(state)[-1] is state  # reachable from a receive
        seen, todo = {state}, [state]
        while todo:
            for nxt in TRANSITIONS[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        assert S.GONE in seen | {state}, state


@pytest.mark.parametrize("old", list(JobState))
def test_a_move_the_table_forbids_raises_and_changes_nothing(old: JobState) -> None:
    ledger, queue = Ledger(), served()
    w = work(queue, 1)
    ledger.hold([w])
    for state in path_to(old)[1:]:
        ledger.move(w, state)
    assert w.state is old
    for new in set(JobState) - TRANSITIONS[old]:
        counts, keys, held = dict(ledger.counts), set(queue.keys), set(ledger.held)
        with pytest.raises(InvalidTransition):
            ledger.move(w, new)
        assert (w.state, ledger.counts, queue.keys, ledger.held) == (old, counts, keys, held)


def test_the_ledger_counts_room_runs_and_keys_as_jobs_move() -> None:
    ledger, queue = Ledger(), served()
    works = [work(queue, n) for n in range(3)]
    ledger.hold(works)
    assert len(ledger.held) == 3 and ledger.counts[S.RECEIVED] == 3
    ledger.move_all(works, S.RESERVING)
    assert queue.keys == set()
    ledger.move_all(works, S.READY)
    assert queue.keys == {"t:0", "t:1", "t:2"}
    ledger.move_all(works, S.STARTED)
    assert ledger.running == 3 and ledger.finished == 0
    ledger.freed.clear()
    ledger.idle.clear()
    ledger.move(works[0], S.SUCCEEDED)
    ledger.move(works[1], S.FAILED)
    assert ledger.running == 1 and ledger.finished == 2
    assert ledger.freed.is_set() and not ledger.idle.is_set()  # room for a receive
    ledger.move(works[2], S.ABANDONED)
    assert ledger.idle.is_set()  # nothing runs any more
    ledger.move_all(works, S.GONE)
    assert ledger.held == set() and queue.keys == set()
    assert {s: n for s, n in ledger.counts.items() if n} == {S.GONE: 3}


def test_holding_is_set_while_any_job_is_held_and_only_then() -> None:
    """What the lease heartbeat, the prefetch pacing and the waiting duplicates' loop
    sleep on while the consumer holds nothing (an idle node wakes for none of them)."""
    ledger, queue = Ledger(), served()
    assert not ledger.holding.is_set()
    ledger.hold([])
    assert not ledger.holding.is_set()
    works = [work(queue, n) for n in range(2)]
    ledger.hold(works)
    assert ledger.holding.is_set()
    ledger.move(works[0], S.POISON)
    ledger.move(works[0], S.GONE)
    assert ledger.holding.is_set()  # one still held
    ledger.move(works[1], S.POISON)
    ledger.move(works[1], S.GONE)
    assert not ledger.holding.is_set()


def test_a_key_duplicates_wait_for_is_announced_when_our_run_gives_it_back() -> None:
    ledger, queue = Ledger(), served()
    first, duplicate = work(queue, 1), work(queue, 1)
    ledger.hold([first, duplicate])
    for state in (S.RESERVING, S.READY, S.STARTED, S.SUCCEEDED):
        ledger.move(first, state)
    ledger.move(duplicate, S.WAITING)
    queue.waiting["t:1"] = [duplicate]
    assert not ledger.key_released.is_set()
    ledger.move(first, S.GONE)
    assert ledger.key_released.is_set() and ledger.released == [(queue, "t:1")]


def test_a_move_of_many_refused_for_one_is_made_for_none() -> None:
    ledger, queue = Ledger(), served()
    a, b = work(queue, 1), work(queue, 2)
    ledger.hold([a, b])
    ledger.move(b, S.POISON)
    with pytest.raises(InvalidTransition, match="cannot go from poison to reserving"):
        ledger.move_all([a, b], S.RESERVING)
    assert (a.state, b.state) == (S.RECEIVED, S.POISON)
    assert ledger.counts[S.RECEIVED] == 1 and ledger.counts[S.POISON] == 1


def test_jobs_from_several_states_move_together() -> None:
    ledger, queue = Ledger(), served()
    ready, waiting = work(queue, 1), work(queue, 2)
    ledger.hold([ready, waiting])
    for state in (S.RESERVING, S.READY):
        ledger.move(ready, state)
    ledger.move(waiting, S.WAITING)
    assert queue.keys == {"t:1"}
    ledger.move_all([ready, waiting], S.RETURNING)  # shutdown gives both back
    assert queue.keys == set() and ledger.counts[S.RETURNING] == 2
    assert ledger.counts[S.READY] == ledger.counts[S.WAITING] == 0


def test_only_a_job_whose_key_is_reserved_holds_it() -> None:
    assert HOLDS_KEY == {S.READY, S.LIMITED, S.STARTED, S.SUCCEEDED, S.FAILED, S.HELD_BACK,
                         S.ABANDONED}
    assert all(S.READY in path_to(s) for s in HOLDS_KEY)


def test_a_job_held_back_by_a_limit_frees_its_room_and_its_key() -> None:
    queue, ledger = served(), Ledger()
    job = work(queue, 1)
    ledger.hold([job])
    for state in (S.RESERVING, S.READY, S.LIMITED):
        ledger.move(job, state)
    assert queue.keys == {"t:1"} and ledger.finished == 0 and ledger.running == 0
    ledger.move(job, S.HELD_BACK)  # back to its queue: the room is free again
    assert ledger.finished == 1 and queue.keys == {"t:1"}
    ledger.move(job, S.GONE)
    assert queue.keys == set() and not ledger.held
    with pytest.raises(InvalidTransition):
        ledger.move(work(queue, 2), S.LIMITED)  # only a job whose key is reserved waits
