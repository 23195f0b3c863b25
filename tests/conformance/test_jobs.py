"""Job keys on every backend: reserved while a handler runs, done with the acknowledgement,
given back after a failure, taken over when their holder's lease ran out."""

from __future__ import annotations

from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.engine.jobs import Failure, Jobs
from tidings.model.queues import RedrivePolicy
from tidings.store.base import Reservation

R, D, B = Reservation.RESERVED, Reservation.DONE, Reservation.BUSY


def test_a_key_is_reserved_once_done_once_and_remembered(t: Tidings, clock: FrozenClock) -> None:
    q, jobs = t.queues, Jobs(t.queues)
    rec = q.create_queue("jobs", visibility_timeout_s=30)
    for _ in range(2):
        q.send("jobs", '{"type": "x", "id": 1}')
    first, second = jobs.receive(rec, 10)
    assert jobs.reserve(rec, [("x:1", first)]) == [R]
    assert jobs.reserve(rec, [("x:1", second)]) == [B]  # held by the first
    assert jobs.complete(rec.id, [(first, "x:1")]) == [True]
    assert jobs.reserve(rec, [("x:1", second)]) == [D]  # acknowledged unrun by a consumer
    assert jobs.acknowledge(rec.id, [second]) == [True]
    assert q.describe("jobs").counts.visible + q.describe("jobs").counts.in_flight == 0
    # remembered for the job memory, then forgotten
    clock.advance(10_000)
    assert t.store.forget_jobs(clock.now_ms() - 20_000, 100) == 0
    assert t.store.forget_jobs(clock.now_ms(), 100) == 1


def test_a_failure_gives_the_key_back_and_a_dead_holder_loses_it(
        t: Tidings, clock: FrozenClock) -> None:
    q, jobs = t.queues, Jobs(t.queues)
    rec = q.create_queue("jobs", visibility_timeout_s=30)
    q.send("jobs", '{"type": "x", "id": 1}')
    q.send("jobs", '{"type": "x", "id": 1}')
    first, second = jobs.receive(rec, 10)
    assert jobs.reserve(rec, [("x:1", first)]) == [R]
    jobs.fail(rec.id, [Failure(first, "x:1", 0, "RuntimeError: boom")])
    assert jobs.reserve(rec, [("x:1", second)]) == [R]  # given back: the duplicate runs
    # its holder dies: after the lease (the visibility timeout), a redelivery takes over
    clock.advance(31_000)
    got = {h.message.message_id: h for h in jobs.receive(rec, 10)}
    again, other = got.pop(second.message.message_id), got.popitem()[1]
    assert jobs.reserve(rec, [("x:1", again)]) == [R]  # lease until +30 s
    # the heartbeat keeps a lease alive past its first end
    clock.advance(10_000)
    jobs.extend(rec, [(again, "x:1")])  # until +40 s from the reservation
    clock.advance(24_000)
    assert jobs.reserve(rec, [("x:1", other)]) == [B]


def test_a_stale_ack_still_records_the_job_done(t: Tidings, clock: FrozenClock) -> None:
    q, jobs = t.queues, Jobs(t.queues)
    rec = q.create_queue("jobs", visibility_timeout_s=30)
    q.send("jobs", '{"type": "x", "id": 2}')
    [mine] = jobs.receive(rec, 10)
    assert jobs.reserve(rec, [("x:2", mine)]) == [R]
    clock.advance(31_000)
    [theirs] = jobs.receive(rec, 10)  # my lease ran out: someone else has the message
    # my handler still returned: the message is not mine to delete, but the job is done
    assert jobs.complete(rec.id, [(mine, "x:2")]) == [False]
    assert jobs.reserve(rec, [("x:2", theirs)]) == [D]


def test_poison_goes_to_the_dlq_at_once_with_its_reason(t: Tidings) -> None:
    q, jobs = t.queues, Jobs(t.queues)
    dlq = q.create_queue("jobs-dlq")
    rec = q.create_queue("jobs", redrive_policy=RedrivePolicy("jobs-dlq", 5))
    q.send("jobs", "not json")
    [held] = jobs.receive(rec, 10)
    assert jobs.dead_letter_queue(rec) == dlq
    assert jobs.reject(rec, dlq, [(held, "NotAJob: the body is not JSON")]) == [True]
    assert jobs.reject(rec, dlq, [(held, "again")]) == [False]  # no longer held
    [dead] = q.receive("jobs-dlq", wait_s=0)
    assert dead.receive_count == 1 and dead.last_error == "NotAJob: the body is not JSON"
    assert dead.attributes["ERROR_CODE"].string_value == "NotAJob"
    assert dead.dead_letter_source is not None and dead.dead_letter_source.endswith(":jobs")
