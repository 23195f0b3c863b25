"""Group commit: concurrent callers of one store operation share a transaction.

Each caller waits for its own result, exactly as if it had its own transaction, but the
commit (WAL writes on SQLite, a round trip and an fsync on PostgreSQL) is paid once per
group. While one group is being written, the next one gathers; under no load a group is a
single request and nothing waits for a timer. Used for single SendMessage / DeleteMessage
requests of the server, the email target's reads and outcomes, and consumers'
acknowledgements and failures.

Two ways in: `submit` awaits its own result (a request of the API); `put` does not wait,
and hears of its group's outcome in `on_written`, once per group (a consumer's
acknowledgement: a future and a task per job would cost more than its share of the
commit).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Generic, TypeVar

from tidings.runtime.bridge import Bridge

K = TypeVar("K", bound=Hashable)
Req = TypeVar("Req")
Res = TypeVar("Res")

#: `on_written(key, requests, outcome)`: the requests `put` in one group, and for each its
#: result or the exception it alone failed with, or the exception the whole group failed
#: with.
Written = Callable[[K, list[Req], Sequence[Res | BaseException] | BaseException],
                   Awaitable[None]]


class _Group(Generic[Req, Res]):
    """A key's pending requests; each `submit`ted one with its future (None: `put`)."""

    __slots__ = ("requests", "futures")

    def __init__(self) -> None:
        self.requests: list[Req] = []
        self.futures: list[asyncio.Future[Res] | None] = []


class Batcher(Generic[K, Req, Res]):
    """`write(key, requests)` runs on the store's thread and returns, for each request, its
    result or the exception that request alone failed with; an exception it raises fails
    the whole group alike. Requests of different keys go to separate calls.

    `max_batch`: the most requests in one group (None: all that gathered). `short`: each
    group is a short store call (`Bridge.run_short`: on the loop's thread when the store
    allows it). `linger(pending)`: seconds to wait, with `pending` requests
    gathered, before writing the next group (None or 0: write at once); what a caller
    whose requests arrive in a stream uses to buy bigger groups."""

    def __init__(self, bridge: Bridge,
                 write: Callable[[K, Sequence[Req]], Sequence[Res | BaseException]],
                 max_batch: int | None = 1000, *, short: bool = False,
                 linger: Callable[[int], float] | None = None,
                 on_written: Written[K, Req, Res] | None = None) -> None:
        self.bridge = bridge
        self.write = write
        self.max_batch = max_batch
        self.linger = linger
        self.on_written = on_written
        self._run = bridge.run_short if short else bridge.run
        self._pending: dict[K, _Group[Req, Res]] = {}
        self._count = 0  # requests pending, every key
        self._worker: asyncio.Task[None] | None = None

    async def submit(self, key: K, request: Req) -> Res:
        future: asyncio.Future[Res] = asyncio.get_running_loop().create_future()
        group = self._group(key)
        group.requests.append(request)
        group.futures.append(future)
        self._added(1)
        return await future

    def put(self, key: K, request: Req) -> None:
        """Add a request to the next group without waiting: its outcome goes to
        `on_written` with the rest of its group."""
        self.put_many(key, (request,))

    def put_many(self, key: K, requests: Sequence[Req]) -> None:
        """`put` for many requests of one key."""
        assert self.on_written is not None, "put needs on_written"
        group = self._group(key)
        group.requests.extend(requests)
        group.futures.extend([None] * len(requests))
        self._added(len(requests))

    def pending(self) -> int:
        """Requests not yet handed to `write`."""
        return self._count

    async def flushed(self) -> None:
        """Return once every request added so far is written and told."""
        while self._worker is not None and not self._worker.done():
            await asyncio.shield(self._worker)

    def _group(self, key: K) -> _Group[Req, Res]:
        group = self._pending.get(key)
        if group is None:
            group = self._pending[key] = _Group()
        return group

    def _added(self, count: int) -> None:
        self._count += count
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain())

    async def _drain(self) -> None:
        while self._pending:
            if self.linger is not None and (delay := self.linger(self._count)) > 0:
                await asyncio.sleep(delay)
            key = next(iter(self._pending))
            group = self._pending[key]
            limit = self.max_batch
            if limit is None or len(group.requests) <= limit:
                requests, futures = group.requests, group.futures
                del self._pending[key]
            else:
                requests, futures = group.requests[:limit], group.futures[:limit]
                del group.requests[:limit], group.futures[:limit]
            self._count -= len(requests)
            try:
                results = await self._run(self.write, key, requests)
            except BaseException as exc:  # noqa: BLE001 - every waiter gets the failure
                for future in futures:
                    if future is not None and not future.done():
                        future.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                await self._tell(key, requests, futures, exc)
                continue
            for future, result in zip(futures, results, strict=True):
                if future is None or future.done():
                    continue
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)
            await self._tell(key, requests, futures, results)

    async def _tell(self, key: K, requests: list[Req],
                    futures: list[asyncio.Future[Res] | None],
                    outcome: Sequence[Res | BaseException] | BaseException) -> None:
        """`on_written` for the requests of the group that were `put`."""
        if self.on_written is None:
            return
        put = futures.count(None)
        if put < len(futures):  # some were submitted: only the others
            if not put:
                return
            kept = [i for i, f in enumerate(futures) if f is None]
            requests = [requests[i] for i in kept]
            if not isinstance(outcome, BaseException):
                outcome = [outcome[i] for i in kept]
        await self.on_written(key, requests, outcome)
