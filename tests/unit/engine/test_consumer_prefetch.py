"""How the default prefetch follows the handlers' pace, and when it must not: a consumer
whose handlers run dry while the queue holds more is waiting on the store (a firing burst
sharing SQLite's one writer), and shrinking its batches would starve it further."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tidings import App
from tidings.client import Tidings
from tidings.engine.bridge import Bridge
from tidings.engine.consumers import PACED_PREFETCH, Consumer


@pytest.fixture
def consumer(t: Tidings) -> Iterator[Consumer]:
    app = App(queue="work")

    @app.handler("noop")
    def noop(job: object) -> None:
        return None

    bridge = Bridge(1)
    try:
        yield Consumer(app, t.queues, bridge, concurrency=8, grace_s=1.0)
    finally:
        bridge.close()


def prefetch(c: Consumer) -> int:
    return c.capacity - c.concurrency


def test_slow_handlers_shrink_the_prefetch_gently_to_its_floor(consumer: Consumer) -> None:
    consumer.capacity = consumer.concurrency + PACED_PREFETCH
    consumer._backlog = True
    consumer._ready.extend([object()] * 3)  # type: ignore[list-item]  # handlers are busy
    consumer._size_prefetch(ran=10, seconds=0.25)  # 40 jobs/s: 4 in 0.1 s
    assert prefetch(consumer) == PACED_PREFETCH * 3 // 4  # a quarter at a time
    for _ in range(30):
        consumer._size_prefetch(ran=10, seconds=0.25)
    assert prefetch(consumer) == consumer.prefetch == 32  # 4 x concurrency


def test_handlers_starved_by_the_store_take_more_per_receive(consumer: Consumer) -> None:
    consumer._backlog = True  # the last receive was full: the queue holds more
    assert not consumer._unstarted()  # and every handler is waiting for work
    consumer._size_prefetch(ran=40, seconds=0.25)  # the starved pace would say 16
    assert prefetch(consumer) == 64
    for _ in range(10):
        consumer._size_prefetch(ran=40, seconds=0.25)
    assert prefetch(consumer) == PACED_PREFETCH


def test_an_idle_queue_lets_the_prefetch_fall_back(consumer: Consumer) -> None:
    consumer.capacity = consumer.concurrency + PACED_PREFETCH
    consumer._backlog = False  # the last receive found less than it asked for
    for _ in range(30):
        consumer._size_prefetch(ran=0, seconds=0.25)
    assert prefetch(consumer) == consumer.prefetch
