"""Group commit for the server: concurrent single SendMessage / DeleteMessage requests
share one transaction.

Each request waits for its own result, exactly as if it had its own transaction, but a
commit (the expensive part: WAL writes on SQLite, a round trip and an fsync on
PostgreSQL) is paid once per group. While one group is being written, the next one
gathers; under no load a group is a single request and nothing waits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from tidings.engine.bridge import Bridge
from tidings.engine.queues import BatchFailure, QueueService
from tidings.errors import BatchError, TidingsError, ValidationError
from tidings.model.messages import OutgoingMessage, SendResult, validate_batch_ids
from tidings.model.queues import MAX_MESSAGE_BYTES

K = TypeVar("K")
T = TypeVar("T")
R = TypeVar("R")


class _Group(Generic[K, T, R]):
    def __init__(self, bridge: Bridge,
                 write: Callable[[K, Sequence[T]], Sequence[R | TidingsError]]) -> None:
        self.bridge = bridge
        self.write = write
        self.pending: dict[K, list[tuple[T, asyncio.Future[R]]]] = {}
        self.flushing = False

    async def submit(self, key: K, item: T) -> R:
        fut: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self.pending.setdefault(key, []).append((item, fut))
        if not self.flushing:
            self.flushing = True
            asyncio.get_running_loop().create_task(self._flush())
        return await fut

    async def _flush(self) -> None:
        try:
            while self.pending:
                batch, self.pending = self.pending, {}
                for key, items in batch.items():
                    try:
                        results = await self.bridge.run(self.write, key, [i for i, _ in items])
                    except Exception as exc:  # noqa: BLE001 - the whole group failed alike
                        results = [exc] * len(items)  # type: ignore[list-item]
                    for (_, fut), result in zip(items, results, strict=True):
                        if fut.done():
                            continue
                        if isinstance(result, BaseException):
                            fut.set_exception(result)
                        else:
                            fut.set_result(result)
        finally:
            self.flushing = False


class Coalescer:
    """One per server process, beside its bridge: the composition root makes it once and
    hands it to every endpoint that sends or deletes, so their requests share groups."""

    def __init__(self, queues: QueueService, bridge: Bridge) -> None:
        self._sends: _Group[tuple[str, int | None], OutgoingMessage, SendResult] = _Group(
            bridge, lambda key, msgs: queues.send_group(key[0], msgs, max_delay_s=key[1]))
        self._deletes: _Group[str, str, bool] = _Group(bridge, queues.delete_group)

    async def send(self, queue: str, message: OutgoingMessage, *,
                   max_delay_s: int | None = None) -> SendResult:
        return await self._sends.submit((queue, max_delay_s), message)

    async def send_batch(self, queue: str, messages: Sequence[OutgoingMessage], *,
                         max_delay_s: int | None = None,
                         ) -> tuple[list[SendResult], list[BatchFailure]]:
        """SendMessageBatch through the group commit: same answers as
        `QueueService.send_batch`, but concurrent batches share a transaction."""
        validate_batch_ids([m.entry_id for m in messages])
        if sum(len(m.body.encode()) for m in messages) > MAX_MESSAGE_BYTES:
            raise BatchError("BatchRequestTooLong",
                             f"Batch requests cannot be longer than {MAX_MESSAGE_BYTES} bytes")
        outcome = await asyncio.gather(
            *(self._sends.submit((queue, max_delay_s), m) for m in messages),
            return_exceptions=True)
        results, failures = [], []
        for m, r in zip(messages, outcome, strict=True):
            if isinstance(r, SendResult):
                results.append(r)
            elif isinstance(r, ValidationError):
                failures.append(BatchFailure(m.entry_id or "", "InvalidParameterValue", str(r)))
            else:
                raise r  # the queue is missing, the store is down: the request fails
        return results, failures

    async def delete(self, queue: str, receipt_handle: str) -> bool:
        return await self._deletes.submit(queue, receipt_handle)
