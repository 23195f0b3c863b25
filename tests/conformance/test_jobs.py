"""Job keys on every backend: reserved while a handler runs, done with the acknowledgement,
given back after a failure, taken over when their holder's lease ran out."""

from __future__ import annotations

from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.jobs.batches import Failure, Jobs
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


def test_a_group_of_many_receives_and_odd_keys_is_answered_key_by_key(
        t: Tidings, clock: FrozenClock) -> None:
    """One reservation and one acknowledgement holding messages of two receives (two lease
    tokens), keys any text may make (non-ASCII, quotes, on SQLite a NUL: never cut short,
    never mistaken for each other), and a stale receipt among them. (PostgreSQL text holds
    no NUL: a job id with one cannot be stored there.)"""
    q, jobs = t.queues, Jobs(t.queues)
    rec = q.create_queue("jobs", visibility_timeout_s=30)
    nul = "\x00" if t.store.url.startswith("sqlite") else "\\0"
    keys = ['x:é😀', 'x:"q\\u0000"', f"x:a{nul}b", "x:a", "x:done", "x:busy"]
    for _ in range(len(keys) + 1):
        q.send("jobs", '{"type": "x"}')
    early = jobs.receive(rec, 4)
    late = jobs.receive(rec, 10)
    held = early + late
    assert jobs.reserve(rec, [("x:done", held[4])]) == [R]
    assert jobs.complete(rec.id, [(held[4], "x:done")]) == [True]
    assert jobs.reserve(rec, [("x:busy", held[5])]) == [R]
    group = [held[0], held[1], held[2], held[3], held[6], late[-1]]
    assert jobs.reserve(rec, list(zip(keys, group, strict=True))) == [R, R, R, R, D, B]
    # "x:a\x00b" is its own key: "x:a" was free, and both are held now
    assert jobs.reserve(rec, [("x:a", held[5])]) == [B]
    clock.advance(31_000)  # the first receive's leases run out; their messages come back
    again = jobs.receive(rec, 10)
    assert {h.message.message_id for h in again} == {h.message.message_id for h in held[:5]
                                                      if h is not held[4]} | {
        held[5].message.message_id, held[6].message.message_id, late[-1].message.message_id}
    stale = held[0]
    acks = [(h, k) for h, k in zip(group[:4], keys[:4], strict=True)]
    assert jobs.complete(rec.id, acks) == [False, False, False, False]  # all stale now
    assert jobs.reserve(rec, [(k, again[0]) for k in keys[:4]]) == [D, D, D, D]
    assert stale.receipt.lease_token != again[0].receipt.lease_token
    fresh = {h.message.message_id: h for h in again}
    mine = [fresh[h.message.message_id] for h in (held[5], held[6])]
    assert jobs.complete(rec.id, [(mine[0], "x:busy"), (mine[1], "x:done")]) == [True, True]
