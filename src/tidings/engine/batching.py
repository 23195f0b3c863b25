"""Group commit: concurrent callers of one store operation share a transaction.

Each caller waits for its own result, exactly as if it had its own transaction, but the
commit (WAL writes on SQLite, a round trip and an fsync on PostgreSQL) is paid once per
group. While one group is being written, the next one gathers; under no load a group is a
single request and nothing waits for a timer. Used for single SendMessage / DeleteMessage
requests of the server, the email target's reads and outcomes, and consumers'
acknowledgements, releases and rejections.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, TypeVar

from tidings.engine.bridge import Bridge

K = TypeVar("K", bound=Hashable)
Req = TypeVar("Req")
Res = TypeVar("Res")


class Batcher(Generic[K, Req, Res]):
    """`write(key, requests)` runs on the store's thread and returns, for each request, its
    result or the exception that request alone failed with; an exception it raises fails
    the whole group alike. Requests of different keys go to separate calls.

    `short`: each group is a short store call (`Bridge.run_short`: on the loop's thread
    when the store allows it)."""

    def __init__(self, bridge: Bridge,
                 write: Callable[[K, Sequence[Req]], Sequence[Res | BaseException]],
                 max_batch: int = 1000, *, short: bool = False) -> None:
        self.bridge = bridge
        self.write = write
        self.max_batch = max_batch
        self._run = bridge.run_short if short else bridge.run
        self._pending: dict[K, list[tuple[Req, asyncio.Future[Res]]]] = {}
        self._worker: asyncio.Task[None] | None = None

    async def submit(self, key: K, request: Req) -> Res:
        future: asyncio.Future[Res] = asyncio.get_running_loop().create_future()
        self._pending.setdefault(key, []).append((request, future))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._pending:
            key = next(iter(self._pending))
            items = self._pending[key]
            batch, rest = items[: self.max_batch], items[self.max_batch:]
            if rest:
                self._pending[key] = rest
            else:
                del self._pending[key]
            try:
                results = await self._run(self.write, key, [r for r, _ in batch])
            except BaseException as exc:  # noqa: BLE001 - every waiter gets the failure
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                continue
            for (_, future), result in zip(batch, results, strict=True):
                if future.done():
                    continue
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)
