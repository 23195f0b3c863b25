"""The group commit (runtime/batching.py): requests gathered while a group is written
share the next write; `put` requests hear of their group once, in `on_written`, beside
`submit` callers that each wait for their own result."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator, Sequence

import pytest

from tidings.errors import StoreUnavailable
from tidings.runtime.batching import Batcher
from tidings.runtime.bridge import Bridge


@pytest.fixture
def bridge() -> Iterator[Bridge]:
    b = Bridge(1)
    yield b
    b.close()


class Store:
    """A write that records its groups; `gate` holds the first write back until set."""

    def __init__(self) -> None:
        self.groups: list[tuple[str, list[int]]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.fail: BaseException | None = None

    def write(self, key: str, requests: Sequence[int]) -> list[int | BaseException]:
        self.gate.wait(5)
        self.groups.append((key, list(requests)))
        if self.fail is not None:
            raise self.fail
        return [ValueError(r) if r < 0 else r * 10 for r in requests]


Told = list[tuple[str, list[int], object]]


def batcher(bridge: Bridge, store: Store, told: Told, max_batch: int = 1000,
            linger: Callable[[int], float] | None = None) -> Batcher[str, int, int]:
    async def on_written(key: str, requests: list[int],
                         outcome: Sequence[int | BaseException] | BaseException) -> None:
        told.append((key, requests, outcome if isinstance(outcome, BaseException)
                     else [r if isinstance(r, int) else repr(r) for r in outcome]))

    return Batcher(bridge, store.write, max_batch, linger=linger, on_written=on_written)


def test_what_arrives_during_a_write_shares_the_next_one(bridge: Bridge) -> None:
    store, told = Store(), Told()

    async def scenario() -> None:
        b = batcher(bridge, store, told)
        store.gate.clear()
        b.put("q", 1)
        await asyncio.sleep(0.05)  # the first group, alone, is being written
        b.put_many("q", [2, 3])
        b.put("other", 4)
        waiter = asyncio.ensure_future(b.submit("q", 5))
        await asyncio.sleep(0)
        assert b.pending() == 4
        store.gate.set()
        assert await waiter == 50
        await b.flushed()
        assert b.pending() == 0

    asyncio.run(scenario())
    assert store.groups == [("q", [1]), ("q", [2, 3, 5]), ("other", [4])]
    # each put request heard of once, with its group; the submitted one was not told
    assert told == [("q", [1], [10]), ("q", [2, 3], [20, 30]), ("other", [4], [40])]


def test_a_request_that_failed_alone_or_a_group_that_failed_is_told(bridge: Bridge) -> None:
    store, told = Store(), Told()

    async def scenario() -> None:
        b = batcher(bridge, store, told)
        b.put_many("q", [1, -2])
        await b.flushed()
        store.fail = StoreUnavailable("down")
        b.put("q", 3)
        waiter = asyncio.ensure_future(b.submit("q", 4))
        await b.flushed()
        with pytest.raises(StoreUnavailable):
            await waiter

    asyncio.run(scenario())
    assert told[0] == ("q", [1, -2], [10, "ValueError(-2)"])
    assert told[1][:2] == ("q", [3]) and isinstance(told[1][2], StoreUnavailable)


def test_a_group_lingers_for_company_only_when_asked(bridge: Bridge) -> None:
    store, told = Store(), Told()
    asked: list[int] = []

    def linger(pending: int) -> float:
        asked.append(pending)
        return 0.05 if pending < 3 else 0.0

    async def scenario() -> None:
        b = batcher(bridge, store, told, linger=linger)
        b.put("q", 1)
        await asyncio.sleep(0.01)  # lingering: the next ones join it
        b.put_many("q", [2, 3])
        await b.flushed()

    asyncio.run(scenario())
    assert store.groups == [("q", [1, 2, 3])]
    assert asked[0] == 1


def test_groups_are_cut_at_max_batch(bridge: Bridge) -> None:
    store, told = Store(), Told()

    async def scenario() -> None:
        b = batcher(bridge, store, told, max_batch=2)
        b.put_many("q", [1, 2, 3, 4, 5])
        await b.flushed()

    asyncio.run(scenario())
    assert [g for _, g in store.groups] == [[1, 2], [3, 4], [5]]
