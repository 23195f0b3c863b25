"""Receiving and acknowledging: SQS's receive (long polling in a thread or on the loop),
FIFO receive-attempt replays, delete and change-visibility, single and batched.

A collaborator of `QueueService` (queues/service.py), which refuses tidings' own queues
before it calls in here; the leases themselves are `QueueOps` steps.

One long-poll loop serves both flavours. It is a coroutine over two primitives, a look
and a wait: the server awaits it with looks through the bridge (or the group commit) and
the notifier's async wait; the Python API and the CLI run it on the caller's thread with
a look that calls the store at once and the notifier's thread wait (`wait_sync`). Those
never suspend, so the coroutine finishes in one `send` (`run_inline`): no event loop.
The notifier keeps both waits because each flavour needs its own: a thread blocks on a
condition, a task on a future; either built on the other would cost a thread per waiting
long poll on the server, or an event loop per receive of the Python API.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from tidings.errors import MessageNotInflight, TidingsError, ValidationError
from tidings.model.messages import ReceivedMessage
from tidings.model.queues import MAX_VISIBILITY_S, MAX_WAIT_S, QueueRecord, check_range
from tidings.notify.base import queue_channel
from tidings.queues.ops import QueueOps
from tidings.queues.receive_attempts import ReceiveAttempts
from tidings.store.base import VisibilityChange

#: How long a long poll waits before looking again when no notification can reach it
#: (a sender in another process on SQLite). In-process sends wake it at once.
CROSS_PROCESS_POLL_S = 0.5

#: One look for messages during a long poll: (queue, how many, visibility) → messages.
Attempt = Callable[[QueueRecord, int, int | None], Awaitable[list[ReceivedMessage]]]
#: One wait of a long poll: (queue, channel, version seen, deadline) → when it may look again.
Wait = Callable[[QueueRecord, str, int, float], Awaitable[None]]
T = TypeVar("T")


@dataclass(frozen=True)
class BatchFailure:
    entry_id: str
    code: str
    message: str
    sender_fault: bool = True


class Receiver:
    def __init__(self, ops: QueueOps, *, fallback_poll_s: float = CROSS_PROCESS_POLL_S) -> None:
        self.ops = ops
        self.store, self.clock, self.notifier = ops.store, ops.clock, ops.notifier
        self.signer = ops.signer
        self.fallback_poll_s = fallback_poll_s
        self.attempts = ReceiveAttempts()

    # receiving -------------------------------------------------------------------------------

    def _receive_args(self, queue: str, max_messages: int, wait_s: int | None,
                      visibility_s: int | None) -> tuple[QueueRecord, int, int | None, float]:
        check_range("MaxNumberOfMessages", max_messages, 1, 10)
        if visibility_s is not None:
            check_range("VisibilityTimeout", visibility_s, 0, MAX_VISIBILITY_S, " seconds")
        record = self.ops.get_queue_cached(queue)
        wait = record.attributes.receive_wait_s if wait_s is None else wait_s
        check_range("WaitTimeSeconds", wait, 0, MAX_WAIT_S, " seconds")
        return record, max_messages, visibility_s, float(wait)

    def _pause(self, record: QueueRecord, deadline: float) -> float:
        """How long to wait before looking again: until the deadline, the next delayed or
        leased message becoming visible, or the cross-process poll, whichever is first."""
        left = deadline - time.monotonic()
        nxt = self.store.next_visible_at(record.id, self.clock.now_ms())
        if nxt is not None:
            left = min(left, max((nxt - self.clock.now_ms()) / 1000, 0.001))
        return max(min(left, self.fallback_poll_s), 0.0)

    async def _long_poll(self, record: QueueRecord, n: int, vt: int | None, wait_s: float,
                         look: Attempt, wait: Wait) -> list[ReceivedMessage]:
        """Look; if nothing came and time is left, wait to be told of a send (or for the
        pause), and look again. The version is read before the look, so a send between
        the look and the wait is not missed."""
        channel = queue_channel(record.id)
        deadline = time.monotonic() + wait_s
        while True:
            seen = self.notifier.version(channel)
            got = await look(record, n, vt)
            if got or time.monotonic() >= deadline:
                return got
            await wait(record, channel, seen, deadline)

    def receive(self, queue: str, max_messages: int, wait_s: int | None,
                visibility_s: int | None) -> list[ReceivedMessage]:
        """Receive, long polling up to `wait_s` seconds on this thread."""
        record, n, vt, wait = self._receive_args(queue, max_messages, wait_s, visibility_s)
        return run_inline(self._long_poll(record, n, vt, wait, self._look_here,
                                          self._wait_here))

    async def _look_here(self, record: QueueRecord, n: int,
                         visibility_s: int | None) -> list[ReceivedMessage]:
        return self.ops.receive_step(record, n, visibility_s)

    async def _wait_here(self, record: QueueRecord, channel: str, seen: int,
                         deadline: float) -> None:
        self.notifier.wait_sync(channel, seen, self._pause(record, deadline))

    async def receive_async(self, bridge: Any, queue: str, max_messages: int = 1, *,
                            wait_s: int | None = None, visibility_s: int | None = None,
                            attempt: Attempt | None = None) -> list[ReceivedMessage]:
        """Receive, long polling up to `wait_s` seconds without holding a thread. Each
        look is `attempt(record, n, visibility)`: by default its own store call; the
        server's group commit passes one that shares a transaction with other receives."""
        if self.ops.fresh(queue) is not None:  # validated here: no hop to the store thread
            record, n, vt, wait = self._receive_args(queue, max_messages, wait_s, visibility_s)
        else:
            record, n, vt, wait = await bridge.run(
                self._receive_args, queue, max_messages, wait_s, visibility_s)
        if attempt is None:
            async def attempt(r: QueueRecord, k: int, v: int | None) -> list[ReceivedMessage]:
                got: list[ReceivedMessage] = await bridge.run(self.ops.receive_step, r, k, v)
                return got

        async def wait_on_loop(r: QueueRecord, channel: str, seen: int, deadline: float,
                               ) -> None:
            await self.notifier.wait(channel, seen, await bridge.run(self._pause, r, deadline))

        return await self._long_poll(record, n, vt, wait, attempt, wait_on_loop)

    def replay_receive(self, queue: str, attempt_id: str,
                       visibility_s: int | None) -> list[ReceivedMessage] | None:
        """The messages an earlier receive of this FIFO queue with `attempt_id` returned,
        their visibility reset; None when there is none to replay (a fresh receive then).
        `receive_attempts.py` says why."""
        record = self.ops.get_queue_cached(queue)
        if not record.attributes.fifo:
            return None  # SQS: the attempt id applies only to FIFO queues
        now = self.clock.now_ms()
        got = self.attempts.recall(record.id, attempt_id, now)
        if not got:
            return None
        vt = record.attributes.visibility_timeout_s if visibility_s is None else visibility_s
        changes = [VisibilityChange(self.signer.open(m.receipt_handle, record.id),
                                    now + vt * 1000) for m in got]
        if not all(self.store.change_visibility(record.id, changes, now)):
            self.attempts.forget(record.id, attempt_id)  # one was deleted or left flight
            return None
        return got

    def remember_receive(self, queue: str, attempt_id: str,
                         messages: list[ReceivedMessage]) -> None:
        record = self.ops.get_queue_cached(queue)
        if record.attributes.fifo and messages:
            self.attempts.remember(record.id, attempt_id, self.clock.now_ms(), messages)

    # acknowledging ---------------------------------------------------------------------------

    def delete_group(self, queue: str, handles: Sequence[str]) -> list[bool | TidingsError]:
        """Delete many receipts in one transaction, each checked on its own."""
        record = self.ops.get_queue_cached(queue)
        out: list[bool | TidingsError] = []
        receipts, slots = [], []
        for i, handle in enumerate(handles):
            try:
                receipts.append(self.signer.open(handle, record.id))
                slots.append(i)
                out.append(False)
            except TidingsError as exc:
                out.append(exc)
        if receipts:
            for i, deleted in zip(slots, self.store.delete_messages(record.id, receipts),
                                  strict=True):
                out[i] = deleted
        return out

    def delete_batch(self, queue: str, entries: Sequence[tuple[str, str]],
                     ) -> tuple[list[str], list[BatchFailure]]:
        record = self.ops.get_queue_cached(queue)
        ok, failures, receipts = [], [], []
        for entry_id, handle in entries:
            try:
                receipts.append((entry_id, self.signer.open(handle, record.id)))
            except TidingsError as exc:
                failures.append(BatchFailure(entry_id, "ReceiptHandleIsInvalid", exc.message))
        if receipts:
            self.store.delete_messages(record.id, [r for _, r in receipts])
            ok = [e for e, _ in receipts]
        return ok, failures

    def change_visibility(self, queue: str, entries: Sequence[tuple[str, str, int]], *,
                          error: str | None, single: bool,
                          ) -> tuple[list[str], list[BatchFailure]]:
        """ChangeMessageVisibility(Batch). `single`: a bad handle or timeout raises, as
        the one-message call answers, instead of failing its entry."""
        record = self.ops.get_queue_cached(queue)
        now = self.clock.now_ms()
        changes, ids, failures = [], [], []
        for entry_id, handle, timeout_s in entries:
            check_range("VisibilityTimeout", timeout_s, 0, MAX_VISIBILITY_S, " seconds")
            receipt = self.signer.open(handle, record.id) if single else None
            if receipt is None:
                try:
                    receipt = self.signer.open(handle, record.id)
                except TidingsError as exc:
                    failures.append(BatchFailure(entry_id, "ReceiptHandleIsInvalid", exc.message))
                    continue
            if _beyond_visibility_limit(receipt.received_at, now, timeout_s):
                rule = (f"Value {timeout_s} for parameter VisibilityTimeout is invalid. Reason:"
                        f" Total VisibilityTimeout for the message is beyond the limit"
                        f" [{MAX_VISIBILITY_S} seconds]")
                if single:
                    raise ValidationError("VisibilityTimeout", rule)
                failures.append(BatchFailure(entry_id, "InvalidParameterValue", rule))
                continue
            changes.append(VisibilityChange(receipt, now + timeout_s * 1000, error))
            ids.append(entry_id)
        done = self.store.change_visibility(record.id, changes, now) if changes else []
        ok = []
        for entry_id, applied in zip(ids, done, strict=True):
            if applied:
                ok.append(entry_id)
            else:
                failures.append(BatchFailure(entry_id, "MessageNotInflight",
                                             "The message is not in flight (its visibility "
                                             "timeout ran out or it was received again)."))
        if any(c.visible_at <= now for c, d in zip(changes, done, strict=True) if d):
            self.notifier.notify(queue_channel(record.id))
        if single and failures:
            raise MessageNotInflight(failures[0].message)
        return ok, failures


def run_inline(coroutine: Coroutine[Any, Any, T]) -> T:
    """The result of a coroutine that never suspends (everything it awaits returns without
    waiting on a future), run on this thread without an event loop."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    coroutine.close()
    raise RuntimeError("a coroutine run inline tried to suspend")


def _beyond_visibility_limit(received_at: int | None, now: int, timeout_s: int) -> bool:
    """SQS: a message stays invisible at most 12 hours counted from the ReceiveMessage that
    leased it; extending does not restart the count. A handle older than the receive
    instant it carries cannot be checked and is let through."""
    if received_at is None:
        return False
    return now + timeout_s * 1000 - received_at > MAX_VISIBILITY_S * 1000
