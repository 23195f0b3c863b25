"""Receiving and acknowledging: SQS's receive (long polling in a thread or on the loop),
FIFO receive-attempt replays, delete and change-visibility, single and batched.

A mixin of `QueueService` (engine/queues.py), which holds the queue records and the
sending side; split off to keep each module to one job.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tidings.clock import Clock
from tidings.engine.receive_attempts import ReceiveAttempts
from tidings.errors import MessageNotInflight, QueueNotFound, TidingsError, ValidationError
from tidings.model.digests import MessageAttributeValue, md5_of_attributes
from tidings.model.messages import (
    ReceivedMessage,
    StoredMessage,
    decode_attributes,
    validate_batch_ids,
)
from tidings.model.queues import MAX_VISIBILITY_S, MAX_WAIT_S, QueueRecord, check_range
from tidings.model.receipts import ReceiptSigner
from tidings.notify.base import Notifier, queue_channel
from tidings.store.base import ReceiveParams, Store, VisibilityChange

#: How long a long poll waits before looking again when no notification can reach it
#: (a sender in another process on SQLite). In-process sends wake it at once.
CROSS_PROCESS_POLL_S = 0.5
#: Lease tokens need only differ between receives (the receipt carrying one is signed), so a
#: seeded PRNG serves, without a system call per receive.
_tokens = random.Random()

#: One look for messages during a long poll: (queue, how many, visibility) → messages.
Attempt = Callable[[QueueRecord, int, int | None], Awaitable[list[ReceivedMessage]]]
#: How old a cached queue record may be (see `get_queue_cached`).
QUEUE_CACHE_S = 1.0


@dataclass(frozen=True)
class BatchFailure:
    entry_id: str
    code: str
    message: str
    sender_fault: bool = True


class Receiving:
    """What `QueueService` needs from its other half: the attributes below."""


    store: Store
    clock: Clock
    notifier: Notifier
    signer: ReceiptSigner
    fallback_poll_s: float
    attempts: ReceiveAttempts
    _names: dict[int, str | None]
    _queue_cache: dict[str, tuple[float, QueueRecord]]
    arn_prefix: str

    def _refuse_internal(self, name: str, action: str) -> None: ...

    def queue_arn(self, name: str) -> str:
        """How every API names a queue where SQS gives an ARN (e.g. a DLQ's source)."""
        return f"{self.arn_prefix}:{name}"

    # queue records --------------------------------------------------------------------------------

    def _fresh(self, name: str) -> QueueRecord | None:
        """The cached record if it is fresh enough to use without a store read."""
        hit = self._queue_cache.get(name)
        if hit is not None and time.monotonic() - hit[0] < QUEUE_CACHE_S:
            return hit[1]
        return None

    def get_queue_cached(self, name: str) -> QueueRecord:
        """The queue's record, at most `QUEUE_CACHE_S` old. SQS itself documents that
        attribute changes take up to 60 s to propagate; changes made through this service
        are seen at once (the cache entry is dropped)."""
        hit = self._fresh(name)
        if hit is not None:
            return hit
        record = self.store.get_queue(name)
        self._queue_cache[name] = (time.monotonic(), record)
        return record

    # receiving -------------------------------------------------------------------------------

    def _receive_step(self, record: QueueRecord, max_messages: int,
                      visibility_s: int | None) -> list[ReceivedMessage]:
        now = self.clock.now_ms()
        return [self._received(record, m, now)
                for m in self._lease(record, max_messages, visibility_s, now)]

    def _lease(self, record: QueueRecord, max_messages: int,
               visibility_s: int | None, now: int | None = None) -> list[StoredMessage]:
        """One receive transaction: lease up to `max_messages`, or move to the DLQ those
        at the queue's maxReceiveCount."""
        attrs = record.attributes
        now = self.clock.now_ms() if now is None else now
        dlq_id, max_rc, dlq_ret = None, None, None
        if attrs.redrive_policy is not None:
            try:
                dlq = self.get_queue_cached(attrs.redrive_policy.dead_letter_queue)
                dlq_id, max_rc = dlq.id, attrs.redrive_policy.max_receive_count
                dlq_ret = dlq.attributes.retention_s * 1000
            except QueueNotFound:
                pass  # DLQ deleted: SQS keeps redelivering; so do we
        vt = attrs.visibility_timeout_s if visibility_s is None else visibility_s
        outcome = self.store.receive_messages(ReceiveParams(
            queue_id=record.id, max_messages=max_messages, visibility_ms=vt * 1000, now=now,
            lease_token=_tokens.getrandbits(62), fifo=attrs.fifo, dead_letter_queue_id=dlq_id,
            max_receive_count=max_rc, dead_letter_retention_ms=dlq_ret))
        if outcome.dead_lettered and dlq_id is not None:
            self.notifier.notify(queue_channel(dlq_id))
        return outcome.messages

    def _source_name(self, queue_id: int) -> str | None:
        """A queue's name by id (queue ids are never reused, so the answer keeps)."""
        if queue_id not in self._names:
            try:
                self._names[queue_id] = self.store.get_queue_by_id(queue_id).name
            except QueueNotFound:
                return None  # deleted: not remembered, in case of a lookup race
        return self._names[queue_id]

    def _source_arn(self, queue_id: int) -> str | None:
        name = self._source_name(queue_id)
        return None if name is None else self.queue_arn(name)

    def _received(self, record: QueueRecord, m: StoredMessage, now: int) -> ReceivedMessage:
        assert m.lease_token is not None and m.first_received_at is not None  # just leased
        source = None if m.source_queue_id is None else self._source_arn(m.source_queue_id)
        attributes, md5_attributes = decode_attributes(m.attributes_json), m.md5_attributes
        if m.last_error:
            attributes, md5_attributes = with_error(attributes, m.last_error)
        return ReceivedMessage(
            message_id=m.message_id,
            receipt_handle=self.signer.sign(record.id, m.row_id, m.lease_token, now),
            body=m.body, md5_body=m.md5_body, attributes=attributes,
            md5_attributes=md5_attributes, receive_count=m.receive_count,
            first_received_at=m.first_received_at, sent_at=m.sent_at, group_id=m.group_id,
            deduplication_id=m.deduplication_id,
            sequence_number=None if m.sequence_number is None else f"{m.sequence_number:020d}",
            dead_letter_source=source, last_error=m.last_error, scheduled_at=m.scheduled_at)

    def _receive_args(self, queue: str, max_messages: int, wait_s: int | None,
                      visibility_s: int | None) -> tuple[QueueRecord, int, int | None, float]:
        self._refuse_internal(queue, "received from")
        check_range("MaxNumberOfMessages", max_messages, 1, 10)
        if visibility_s is not None:
            check_range("VisibilityTimeout", visibility_s, 0, MAX_VISIBILITY_S, " seconds")
        record = self.get_queue_cached(queue)
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

    def receive(self, queue: str, max_messages: int = 1, *, wait_s: int | None = None,
                visibility_s: int | None = None) -> list[ReceivedMessage]:
        """Receive, long polling up to `wait_s` seconds (thread flavour)."""
        record, n, vt, wait = self._receive_args(queue, max_messages, wait_s, visibility_s)
        channel = queue_channel(record.id)
        deadline = time.monotonic() + wait
        while True:
            seen = self.notifier.version(channel)
            got = self._receive_step(record, n, vt)
            if got or time.monotonic() >= deadline:
                return got
            self.notifier.wait_sync(channel, seen, self._pause(record, deadline))

    async def receive_async(self, bridge: Any, queue: str, max_messages: int = 1, *,
                            wait_s: int | None = None, visibility_s: int | None = None,
                            attempt: Attempt | None = None) -> list[ReceivedMessage]:
        """Receive, long polling up to `wait_s` seconds without holding a thread. Each
        look is `attempt(record, n, visibility)`: by default its own store call; the
        server's group commit passes one that shares a transaction with other receives."""
        if self._fresh(queue) is not None:  # validated here: no hop to the store thread
            record, n, vt, wait = self._receive_args(queue, max_messages, wait_s, visibility_s)
        else:
            record, n, vt, wait = await bridge.run(
                self._receive_args, queue, max_messages, wait_s, visibility_s)
        if attempt is None:
            async def attempt(r: QueueRecord, k: int, v: int | None) -> list[ReceivedMessage]:
                got: list[ReceivedMessage] = await bridge.run(self._receive_step, r, k, v)
                return got

        channel = queue_channel(record.id)
        deadline = time.monotonic() + wait
        while True:
            seen = self.notifier.version(channel)
            got = await attempt(record, n, vt)
            if got or time.monotonic() >= deadline:
                return got
            pause = await bridge.run(self._pause, record, deadline)
            await self.notifier.wait(channel, seen, pause)

    def replay_receive(self, queue: str, attempt_id: str,
                       visibility_s: int | None) -> list[ReceivedMessage] | None:
        """The messages an earlier receive of this FIFO queue with `attempt_id` returned,
        their visibility reset; None when there is none to replay (a fresh receive then).
        `receive_attempts.py` says why."""
        self._refuse_internal(queue, "received from")
        record = self.get_queue_cached(queue)
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
        record = self.get_queue_cached(queue)
        if record.attributes.fifo and messages:
            self.attempts.remember(record.id, attempt_id, self.clock.now_ms(), messages)

    # acknowledging ---------------------------------------------------------------------------

    def delete(self, queue: str, receipt_handle: str) -> bool:
        """Delete by receipt; a stale handle succeeds without deleting (SQS's documented
        behaviour: the message is now someone else's). Returns whether a row went."""
        result = self.delete_group(queue, [receipt_handle])[0]
        if isinstance(result, TidingsError):
            raise result
        return result

    def delete_group(self, queue: str, handles: Sequence[str]) -> list[bool | TidingsError]:
        """Delete many receipts in one transaction, each checked on its own."""
        self._refuse_internal(queue, "deleted from")
        record = self.get_queue_cached(queue)
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
        validate_batch_ids([e[0] for e in entries])
        self._refuse_internal(queue, "deleted from")
        record = self.get_queue_cached(queue)
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

    def change_visibility(self, queue: str, receipt_handle: str, timeout_s: int,
                          *, error: str | None = None) -> None:
        ok, failures = self.change_visibility_batch(queue, [("0", receipt_handle, timeout_s)],
                                                    error=error, _single=True)
        if failures:
            raise MessageNotInflight(failures[0].message)

    def change_visibility_batch(self, queue: str, entries: Sequence[tuple[str, str, int]], *,
                                error: str | None = None, _single: bool = False,
                                ) -> tuple[list[str], list[BatchFailure]]:
        if not _single:
            validate_batch_ids([e[0] for e in entries])
        self._refuse_internal(queue, "changed")
        record = self.get_queue_cached(queue)
        now = self.clock.now_ms()
        changes, ids, failures = [], [], []
        for entry_id, handle, timeout_s in entries:
            check_range("VisibilityTimeout", timeout_s, 0, MAX_VISIBILITY_S, " seconds")
            receipt = self.signer.open(handle, record.id) if _single else None
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
                if _single:
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
        return ok, failures


#: Where a message carries the failure a consumer recorded (the names the scheduler uses
#: on the events it dead-letters), so an SQS client reading a DLQ sees why.
ERROR_CODE, ERROR_MESSAGE = "ERROR_CODE", "ERROR_MESSAGE"


def _beyond_visibility_limit(received_at: int | None, now: int, timeout_s: int) -> bool:
    """SQS: a message stays invisible at most 12 hours counted from the ReceiveMessage that
    leased it; extending does not restart the count. A handle older than the receive
    instant it carries cannot be checked and is let through."""
    if received_at is None:
        return False
    return now + timeout_s * 1000 - received_at > MAX_VISIBILITY_S * 1000


def with_error(attributes: dict[str, MessageAttributeValue], error: str,
               ) -> tuple[dict[str, MessageAttributeValue], str | None]:
    """The message's attributes plus its recorded failure (`Code: message`), and their
    digest; attributes the sender set under those names are left as they are."""
    code, sep, text = error.partition(": ")
    extra = {ERROR_CODE: code if sep else "Error", ERROR_MESSAGE: text if sep else error}
    merged = {**{k: MessageAttributeValue("String", v) for k, v in extra.items()},
              **attributes}
    return merged, md5_of_attributes(merged)
