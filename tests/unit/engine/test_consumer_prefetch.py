"""How the default prefetch follows the handlers' pace, and when it must not: a consumer
whose handlers run dry while the queue holds more is waiting on the store (a firing burst
sharing SQLite's one writer), and shrinking its batches would starve it further."""

from __future__ import annotations

from dataclasses import dataclass

from tidings.jobs.consumer.admission import PACED_PREFETCH, Admission
from tidings.jobs.consumer.work import Ledger


@dataclass
class Pace:
    handled: int = 0
    failed: int = 0
    held_back: int = 0
    waiting: int = 0  # jobs held ready that no handler has begun

    def unstarted(self) -> int:
        return self.waiting


def admission(pace: Pace, prefetch: int | None = None) -> Admission:
    return Admission(Ledger(), pace, concurrency=8, prefetch=prefetch)


def test_the_default_prefetch_is_four_per_slot() -> None:
    a = admission(Pace())
    assert a.prefetch == a.floor == 32 and a.capacity == 40


def test_slow_handlers_shrink_the_prefetch_gently_to_its_floor() -> None:
    a = admission(Pace(waiting=3))  # handlers are busy
    a.received(got=1000, asked=1000)  # the queue holds more
    a.size_prefetch(ran=10_000, seconds=0.25)  # fast: grows at once to the cap
    assert a.prefetch == PACED_PREFETCH
    a.size_prefetch(ran=10, seconds=0.25)  # 40 jobs/s: 4 in 0.1 s
    assert a.prefetch == PACED_PREFETCH * 3 // 4  # a quarter at a time
    for _ in range(30):
        a.size_prefetch(ran=10, seconds=0.25)
    assert a.prefetch == 32  # 4 x concurrency


def test_handlers_starved_by_the_store_take_more_per_receive() -> None:
    a = admission(Pace(waiting=0))  # every handler is waiting for work
    a.received(got=40, asked=40)  # the last receive was full: the queue holds more
    a.size_prefetch(ran=40, seconds=0.25)  # the starved pace would say 16
    assert a.prefetch == 64
    for _ in range(10):
        a.size_prefetch(ran=40, seconds=0.25)
    assert a.prefetch == PACED_PREFETCH


def test_an_idle_queue_lets_the_prefetch_fall_back() -> None:
    a = admission(Pace(waiting=0))
    a.received(got=1000, asked=1000)
    a.size_prefetch(ran=10_000, seconds=0.25)
    assert a.prefetch == PACED_PREFETCH
    a.received(got=3, asked=1000)  # the last receive found less than it asked for
    for _ in range(30):
        a.size_prefetch(ran=0, seconds=0.25)
    assert a.prefetch == 32


def test_a_fixed_prefetch_stays_as_the_app_set_it() -> None:
    a = admission(Pace(), prefetch=5)
    a.received(got=1000, asked=1000)
    a.size_prefetch(ran=10_000, seconds=0.25)
    assert a.prefetch == 5


def test_the_poller_waits_for_half_the_room_unless_nothing_is_left_to_run() -> None:
    pace = Pace(waiting=1)
    a = admission(pace)
    assert a.room() == 40 and not a.must_wait(40)
    assert a.must_wait(19)  # less than half, and a job still waits for a slot
    pace.waiting = 0
    assert not a.must_wait(19)  # the handlers ran dry: take what fits
    assert a.must_wait(0)
