"""Group commit for the server: concurrent SendMessage, ReceiveMessage and DeleteMessage
requests of one queue share one transaction (`tidings.runtime.batching`).

A receive of a standard queue joins the receives waiting at the same moment: one
statement leases messages for all of them, handed out in arrival order. FIFO receives do
not group: one receive must take a group's in-flight batch whole.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from tidings.errors import BatchError, TooManyLongPolls, ValidationError
from tidings.model.messages import (
    OutgoingMessage,
    ReceivedMessage,
    SendResult,
    validate_batch_ids,
)
from tidings.model.queues import MAX_MESSAGE_BYTES, QueueRecord
from tidings.queues.service import BatchFailure, QueueService
from tidings.runtime.batching import Batcher
from tidings.runtime.bridge import Bridge

#: Receives grouped in one lease at most (10 messages each: one statement of up to 250).
RECEIVE_GROUP = 25

class Coalescer:
    """One per server process, beside its bridge: the composition root makes it once and
    hands it to every endpoint that sends or deletes, so their requests share groups."""

    def __init__(self, queues: QueueService, bridge: Bridge, *,
                 max_long_polls: int | None = None) -> None:
        """`max_long_polls` caps the receives that may wait at once (each holds a
        connection and a task); one more is refused with `TooManyLongPolls`."""
        self.queues = queues
        self.bridge = bridge
        self.max_long_polls = max_long_polls
        self.long_polls = 0
        self._sends: Batcher[tuple[str, int | None], OutgoingMessage, SendResult] = Batcher(
            bridge, lambda key, msgs: queues.send_group(key[0], msgs, max_delay_s=key[1]),
            short=True)
        self._deletes: Batcher[str, str, bool] = Batcher(bridge, queues.delete_group,
                                                         short=True)
        self._receives: Batcher[tuple[int, int | None], tuple[QueueRecord, int],
                                list[ReceivedMessage]] = Batcher(
            bridge, self._receive_group, max_batch=RECEIVE_GROUP, short=True)

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

    async def receive(self, queue: str, max_messages: int = 1, *, wait_s: int | None = None,
                      visibility_s: int | None = None) -> list[ReceivedMessage]:
        """`QueueService.receive_async`, each look shared with concurrent receives.

        A receive that may wait (`wait_s` above 0, or None: the queue's default) takes one
        of the `max_long_polls` slots for its whole duration."""
        may_wait = wait_s is None or wait_s > 0
        if may_wait and self.max_long_polls is not None:
            if self.long_polls >= self.max_long_polls:
                raise TooManyLongPolls(f"{self.long_polls} long-poll receives are waiting "
                                       "on this node (TIDINGS_MAX_LONG_POLLS); retry shortly")
            self.long_polls += 1
        try:
            return await self.queues.receive_async(self.bridge, queue, max_messages,
                                                   wait_s=wait_s, visibility_s=visibility_s,
                                                   attempt=self._look)
        finally:
            if may_wait and self.max_long_polls is not None:
                self.long_polls -= 1

    async def _look(self, record: QueueRecord, n: int, visibility_s: int | None,
                    ) -> list[ReceivedMessage]:
        if record.attributes.fifo:
            got: list[ReceivedMessage] = await self.bridge.run_short(
                self.queues.ops.receive_step, record, n, visibility_s)
            return got
        return await self._receives.submit((record.id, visibility_s), (record, n))

    def _receive_group(self, key: tuple[int, int | None],
                       wants: Sequence[tuple[QueueRecord, int]]) -> list[list[ReceivedMessage]]:
        """One lease for the group, handed out in arrival order (store thread)."""
        got = self.queues.ops.receive_step(wants[0][0], sum(n for _, n in wants), key[1])
        out, at = [], 0
        for _, n in wants:
            out.append(got[at:at + n])
            at += n
        return out
