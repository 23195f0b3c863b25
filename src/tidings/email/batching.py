"""Group commit for the email target's store calls.

Many deliveries run at once (the consumer's concurrency). Each needs a read before it
sends (template, suppression, its log row) and a write after (the outcome). Done one by
one, those are two hops to the store thread and one transaction per email, which costs
more than the SMTP transaction itself. A `Batcher` gathers the calls that arrive while
the previous batch runs and hands them to the store thread together: one hop, one
transaction, for everything waiting. A caller still waits for its own result, so a
delivery is acknowledged only after its outcome is durable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from tidings.engine.bridge import Bridge

Req = TypeVar("Req")
Res = TypeVar("Res")


class Batcher(Generic[Req, Res]):
    """`fn` gets a list of requests and returns, for each, a result or an exception."""

    def __init__(self, bridge: Bridge,
                 fn: Callable[[Sequence[Req]], Sequence[Res | BaseException]],
                 max_batch: int = 500) -> None:
        self.bridge = bridge
        self.fn = fn
        self.max_batch = max_batch
        self._pending: list[tuple[Req, asyncio.Future[Res]]] = []
        self._worker: asyncio.Task[None] | None = None

    async def submit(self, request: Req) -> Res:
        future: asyncio.Future[Res] = asyncio.get_running_loop().create_future()
        self._pending.append((request, future))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._pending:
            batch = self._pending[: self.max_batch]
            del self._pending[: len(batch)]
            try:
                results = await self.bridge.run(self.fn, [r for r, _ in batch])
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
