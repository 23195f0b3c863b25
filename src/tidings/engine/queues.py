"""The queue service: SQS semantics over any store. Every interface calls this module.

Methods are synchronous (they run on the caller's thread, or on the bridge's pool from the
server); the two waits that matter, long polling, have a thread flavour (`receive`) and an
async flavour (`receive_async`) sharing one step function, so neither busy-polls.
"""

from __future__ import annotations

import base64
import json
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from tidings.clock import Clock, to_ms
from tidings.engine import metrics
from tidings.engine.receive_attempts import ReceiveAttempts
from tidings.engine.redrive import Redrive
from tidings.errors import (
    BatchError,
    MessageNotInflight,
    PurgeInProgress,
    QueueNotFound,
    TidingsError,
    ValidationError,
)
from tidings.model.digests import MessageAttributeValue, md5_of_attributes
from tidings.model.messages import (
    NewMessage,
    OutgoingMessage,
    ReceivedMessage,
    SendResult,
    StoredMessage,
    decode_attributes,
    prepare,
    validate_batch_ids,
)
from tidings.model.queues import (
    MAX_MESSAGE_BYTES,
    MAX_RETENTION_S,
    MAX_SQS_DELAY_S,
    MAX_VISIBILITY_S,
    MAX_WAIT_S,
    QueueAttributes,
    QueueCounts,
    QueueRecord,
    check_range,
    validate_queue_name,
    validate_tags,
)
from tidings.model.receipts import ReceiptSigner
from tidings.model.states import MessageState, message_state
from tidings.notify.base import Notifier, queue_channel
from tidings.store.base import (
    ReceiveParams,
    Store,
    VisibilityChange,
)

#: How long a long poll waits before looking again when no notification can reach it
#: (a sender in another process on SQLite). In-process sends wake it at once.
CROSS_PROCESS_POLL_S = 0.5
#: Lease tokens need only differ between receives (the receipt carrying one is signed), so a
#: seeded PRNG serves, without a system call per receive.
_tokens = random.Random()
PURGE_INTERVAL_MS = 60_000
QUEUE_CACHE_S = 1.0


#: One look for messages during a long poll: (queue, how many, visibility) → messages.
Attempt = Callable[[QueueRecord, int, int | None], Awaitable[list[ReceivedMessage]]]


@dataclass(frozen=True)
class BatchFailure:
    entry_id: str
    code: str
    message: str
    sender_fault: bool = True


@dataclass(frozen=True)
class MessageView:
    """A peeked message with its state now and, in a DLQ, the ARN of where it came from."""

    message: StoredMessage
    state: MessageState
    dead_letter_source: str | None


@dataclass(frozen=True)
class QueueInfo:
    record: QueueRecord
    counts: QueueCounts

    @property
    def name(self) -> str:
        return self.record.name


class QueueService(Redrive):
    def __init__(self, store: Store, clock: Clock, notifier: Notifier, signer: ReceiptSigner,
                 *, arn_prefix: str = "arn:aws:sqs:us-east-1:000000000000",
                 fallback_poll_s: float = CROSS_PROCESS_POLL_S) -> None:
        self.store = store
        self.clock = clock
        self.notifier = notifier
        self.signer = signer
        self.arn_prefix = arn_prefix
        self.fallback_poll_s = fallback_poll_s
        self._queue_cache: dict[str, tuple[float, QueueRecord]] = {}
        self._names: dict[int, str | None] = {}  # queue id → name, for DLQ sources
        self.attempts = ReceiveAttempts()

    def queue_arn(self, name: str) -> str:
        """How every API names a queue where SQS gives an ARN (e.g. a DLQ's source)."""
        return f"{self.arn_prefix}:{name}"

    # queues --------------------------------------------------------------------------------

    def create_queue(self, name: str, **attributes: Any) -> QueueRecord:
        fifo = validate_queue_name(name)
        if attributes.pop("fifo", fifo) != fifo:
            raise ValidationError("FifoQueue", "a FIFO queue's name must end with .fifo")
        attrs = QueueAttributes.build(fifo=fifo, **attributes)
        self._check_redrive(name, attrs)
        return self.store.create_queue(name, attrs, self.clock.now_ms())

    def get_queue(self, name: str) -> QueueRecord:
        return self.store.get_queue(name)

    def describe(self, name: str) -> QueueInfo:
        return self.describe_record(self.store.get_queue(name))

    def describe_record(self, record: QueueRecord) -> QueueInfo:
        """Counts for a record already in hand (a listing), without fetching it again."""
        return QueueInfo(record, self.store.queue_counts(record.id, self.clock.now_ms()))

    def list_queues(self, prefix: str = "", *, limit: int = 1000,
                    next_token: str | None = None) -> tuple[list[QueueRecord], str | None]:
        limit = check_range("MaxResults", limit, 1, 1000)
        after = _decode_token(next_token) if next_token else None
        records = self.store.list_queues(prefix, after, limit + 1)
        more = len(records) > limit
        records = records[:limit]
        return records, (_encode_token(records[-1].name) if more and records else None)

    def update_queue(self, name: str, **changes: Any) -> QueueRecord:
        record = self.store.get_queue(name)
        if "fifo" in changes and changes.pop("fifo") != record.attributes.fifo:
            raise ValidationError("FifoQueue", "cannot be changed after the queue is created")
        attrs = record.attributes.merged(**changes)
        self._check_redrive(name, attrs)
        updated = self.store.update_queue(name, attrs, self.clock.now_ms())
        self._queue_cache.pop(name, None)
        self.notifier.notify(queue_channel(record.id))  # waiters re-read wait/visibility
        return updated

    def _check_redrive(self, name: str, attrs: QueueAttributes) -> None:
        policy = attrs.redrive_policy
        if policy is None:
            return
        if policy.dead_letter_queue == name:
            raise ValidationError("RedrivePolicy.deadLetterTargetArn",
                                  "a queue cannot be its own dead-letter queue")
        try:
            dlq = self.store.get_queue(policy.dead_letter_queue)
        except QueueNotFound:
            raise ValidationError("RedrivePolicy.deadLetterTargetArn",
                                  f"dead-letter queue {policy.dead_letter_queue!r} does not exist")\
                from None
        allow = dlq.attributes.redrive_allow_policy
        if allow is not None and not allow.allows(name):
            raise ValidationError("RedrivePolicy.deadLetterTargetArn",
                                  f"queue {dlq.name!r}'s RedriveAllowPolicy does not allow {name!r}"
                                  " as a source")

    def tag_queue(self, name: str, tags: Mapping[str, str]) -> None:
        record = self.store.get_queue(name)
        merged = {**record.attributes.tags, **tags}
        validate_tags(merged)
        self.store.update_queue(name, record.attributes.merged(tags=merged), self.clock.now_ms())

    def untag_queue(self, name: str, keys: Sequence[str]) -> None:
        record = self.store.get_queue(name)
        tags = {k: v for k, v in record.attributes.tags.items() if k not in set(keys)}
        self.store.update_queue(name, record.attributes.merged(tags=tags), self.clock.now_ms())

    def delete_queue(self, name: str) -> None:
        record = self.store.get_queue(name)
        self.store.delete_queue(name)
        self._queue_cache.pop(name, None)
        self.notifier.notify(queue_channel(record.id))

    def purge_queue(self, name: str) -> int:
        record = self.store.get_queue(name)
        now = self.clock.now_ms()
        if record.purged_at is not None and now - record.purged_at < PURGE_INTERVAL_MS:
            raise PurgeInProgress(
                f"Only one PurgeQueue operation on {name} is allowed every 60 seconds.")
        return self.store.purge_queue(record.id, now)

    def dead_letter_sources(self, name: str) -> list[QueueRecord]:
        self.store.get_queue(name)
        return self.store.dead_letter_sources(name)

    def peek(self, name: str, *, limit: int = 10, next_token: str | None = None,
             ) -> tuple[list[MessageView], str | None]:
        """Messages in the order receives would take them, read without receiving them:
        no lease, no receive counted (what SQS lacks and an operator of a DLQ needs)."""
        check_range("MaxResults", limit, 1, 1000)
        record = self.store.get_queue(name)
        after = None
        if next_token:
            visible, _, row = _decode_token(next_token).partition(":")
            if not (visible.lstrip("-").isdigit() and row.isdigit()):
                raise ValidationError("NextToken", "is not a token this API returned")
            after = (int(visible), int(row))
        rows = self.store.peek_messages(record.id, after, limit + 1)
        now = self.clock.now_ms()
        views = [MessageView(
            p, message_state(visible_at=p.visible_at, leased=p.lease_token is not None, now=now),
            None if p.source_queue_id is None else self._source_arn(p.source_queue_id))
            for p in rows[:limit]]
        more = len(rows) > limit
        last = rows[limit - 1] if more else None
        return views, (_encode_token(f"{last.visible_at}:{last.row_id}") if last else None)

    # sending ---------------------------------------------------------------------------------

    def send(self, queue: str, body: Any, *, delay_s: int | None = None,
             attributes: Mapping[str, MessageAttributeValue] | None = None,
             group_id: str | None = None, deduplication_id: str | None = None,
             max_delay_s: int | None = None, deliver_at: datetime | None = None,
             connection: Any = None) -> SendResult:
        """Send one message; `deliver_at` (an aware datetime, to the millisecond) makes it
        receivable from that instant, up to the queue's retention period ahead. A body
        that is not a string is sent as its JSON text (as the HTTP API takes an object).
        `connection`: the application's own PostgreSQL connection, whose transaction the
        message then commits or rolls back with."""
        at_ms = None if deliver_at is None else to_ms(deliver_at, "deliver_at")
        if at_ms is not None and max_delay_s is None:
            max_delay_s = MAX_RETENTION_S
        msg = OutgoingMessage(json_body(body), delay_s, attributes or {}, group_id,
                              deduplication_id, deliver_at=at_ms)
        outcome = self.send_group(queue, [msg], max_delay_s=max_delay_s, connection=connection)
        if isinstance(outcome[0], TidingsError):
            raise outcome[0]
        return outcome[0]

    def cancel(self, queue: str, message_id: str, visible_at: int) -> bool:
        """Withdraw a delayed message before it becomes visible (what a task handle's
        `cancel()` does); False if it is already visible, received or gone."""
        record = self.get_queue_cached(queue)
        return self.store.cancel_message(record.id, message_id, visible_at,
                                         self.clock.now_ms())

    def send_batch(self, queue: str, messages: Sequence[OutgoingMessage], *,
                   max_delay_s: int | None = None, _single: bool = False,
                   ) -> tuple[list[SendResult], list[BatchFailure]]:
        """Send up to 10 messages; invalid entries fail alone (as SQS's per-entry results).

        `max_delay_s`: the SQS API caps delays at 15 minutes; the native API passes the
        queue's retention period instead, so a message can wait days.
        """
        if not _single:
            # Entry ids only tell the per-entry results apart: numbered when none is given.
            if messages and all(m.entry_id is None for m in messages):
                messages = [replace(m, entry_id=str(i)) for i, m in enumerate(messages)]
            validate_batch_ids([m.entry_id for m in messages])
        outcome = self.send_group(queue, messages, max_delay_s=max_delay_s,
                                  max_total_bytes=None if _single else True)
        results, failures = [], []
        for m, r in zip(messages, outcome, strict=True):
            if isinstance(r, SendResult):
                results.append(r)
            elif _single or not isinstance(r, ValidationError):
                raise r
            else:
                failures.append(BatchFailure(m.entry_id or "", "InvalidParameterValue", str(r)))
        return results, failures

    def send_group(self, queue: str, messages: Sequence[OutgoingMessage], *,
                   max_delay_s: int | None = None, max_total_bytes: bool | None = None,
                   connection: Any = None) -> list[SendResult | TidingsError]:
        """Send any number of messages in one transaction, each validated on its own: the
        result list holds a SendResult or the error of each. The group commit of concurrent
        single sends (`Coalescer`) and batches both land here."""
        record = self.get_queue_cached(queue)
        attrs = record.attributes
        now = self.clock.now_ms()
        cap = MAX_SQS_DELAY_S if max_delay_s is None else min(max_delay_s, attrs.retention_s)
        out: list[SendResult | TidingsError] = []
        prepared, slots = [], []
        for i, m in enumerate(messages):
            try:
                prepared.append(prepare(
                    m, now=now, fifo=attrs.fifo,
                    content_based_dedup=attrs.content_based_deduplication,
                    default_delay_s=attrs.delay_s, max_delay_s=cap,
                    max_bytes=attrs.max_message_bytes, retention_s=attrs.retention_s))
                slots.append(i)
                out.append(ValidationError("MessageBody", "not sent"))  # replaced below
            except ValidationError as exc:
                out.append(exc)
        if not prepared:
            return out
        # SQS caps a batch's total payload at the service maximum (1 MiB), whatever the
        # queue's own MaximumMessageSize, which applies to each message.
        total = sum(len(p.body.encode()) for p in prepared)
        if max_total_bytes and total > MAX_MESSAGE_BYTES:
            raise BatchError("BatchRequestTooLong", "Batch requests cannot be longer than"
                             f" {MAX_MESSAGE_BYTES} bytes")
        stored = self.store.send_messages(record.id, prepared, fifo=attrs.fifo, now=now,
                                          connection=connection)
        metrics.SENT.inc(len(prepared))
        self.notifier.notify(queue_channel(record.id))
        for i, p, st in zip(slots, prepared, stored, strict=True):
            out[i] = SendResult(
                messages[i].entry_id, st.message_id, p.md5_body, p.md5_attributes,
                None if st.sequence_number is None else f"{st.sequence_number:020d}",
                st.duplicate)
        return out

    def new_message(self, record: QueueRecord, body: str, *, now: int,
                    group_id: str | None = None, deduplication_id: str | None = None,
                    attributes: Mapping[str, MessageAttributeValue] | None = None,
                    scheduled_at: int | None = None) -> NewMessage:
        """A message the engine itself writes (a firing, a resend) in a transaction of its
        own making: validated against the queue as a send would be, visible at once."""
        a = record.attributes
        return prepare(
            OutgoingMessage(body, 0 if not a.fifo else None, attributes or {},
                            group_id if a.fifo else None, deduplication_id if a.fifo else None),
            now=now, fifo=a.fifo, content_based_dedup=a.content_based_deduplication,
            default_delay_s=0 if not a.fifo else a.delay_s, max_delay_s=0 if not a.fifo else 900,
            max_bytes=a.max_message_bytes, retention_s=a.retention_s, scheduled_at=scheduled_at)

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

    # maintenance -----------------------------------------------------------------------------

    def _sweep(self, job_memory_s: int, limit: int = 5000) -> int:
        """Delete messages past retention and idempotency records past their memory."""
        now = self.clock.now_ms()
        gone = self.store.expire_messages(now, limit)
        self.store.forget_jobs(now - job_memory_s * 1000, limit)
        return gone


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


def json_body(body: Any) -> str:
    """A message body: a string as it is, anything else as its JSON text."""
    if isinstance(body, str):
        return body
    try:
        return json.dumps(body, ensure_ascii=False)
    except (TypeError, ValueError):
        raise ValidationError("MessageBody", "must be a string or a JSON-serialisable value, "
                              f"not {type(body).__name__}") from None


def _encode_token(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode()).decode()


def _decode_token(token: str) -> str:
    try:
        return base64.urlsafe_b64decode(token.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        raise ValidationError("NextToken", "is not a token this API returned") from None


__all__ = ["QueueService", "BatchFailure", "QueueInfo", "MAX_RETENTION_S"]
