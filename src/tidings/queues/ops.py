"""What the engine calls on queues, below the door of `QueueService` (queues/service.py).

`QueueService` is what every face calls, and it refuses tidings' own queues to all of
them. The engine's loops work on queue records it has already resolved: the consumers'
batched lease (`Jobs`), the server's group-committed receive (`Coalescer`), the sweeper's
expiry and move-task steps, and the engine's sends to its own queues. Those steps live
here, on an object the facade holds and shares its state with (the queue record cache,
the source-queue names), so they are public methods of a small object rather than
underscored methods of the facade called from outside it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

from tidings.clock import Clock
from tidings.errors import BatchError, QueueNotFound, TidingsError, ValidationError
from tidings.model.digests import MessageAttributeValue, md5_of_attributes
from tidings.model.messages import (
    NewMessage,
    OutgoingMessage,
    ReceivedMessage,
    SendResult,
    StoredMessage,
    decode_attributes,
    prepare,
)
from tidings.model.queues import MAX_MESSAGE_BYTES, MAX_SQS_DELAY_S, QueueAttributes, QueueRecord
from tidings.model.receipts import ReceiptSigner
from tidings.notify.base import Notifier, queue_channel
from tidings.queues.redrive import Redrive
from tidings.runtime import metrics
from tidings.store.base import QueueStore, ReceiveParams

#: How old a cached queue record may be (see `get_queue_cached`).
QUEUE_CACHE_S = 1.0
#: Lease tokens need only differ between receives (the receipt carrying one is signed), so a
#: seeded PRNG serves, without a system call per receive.
_tokens = random.Random()
#: Where a message carries the failure a consumer recorded (the names the scheduler uses
#: on the events it dead-letters), so an SQS client reading a DLQ sees why.
ERROR_CODE, ERROR_MESSAGE = "ERROR_CODE", "ERROR_MESSAGE"


class QueueOps:
    """Queue steps over resolved records; no name is refused here (the facade does that
    for every face, and the engine is entitled to its own queues)."""

    def __init__(self, store: QueueStore, clock: Clock, notifier: Notifier, signer: ReceiptSigner,
                 moves: Redrive, *, arn_prefix: str) -> None:
        self.store = store
        self.clock = clock
        self.notifier = notifier
        self.signer = signer
        self.moves = moves
        self.arn_prefix = arn_prefix
        self._cache: dict[str, tuple[float, QueueRecord]] = {}
        self._names: dict[int, str | None] = {}  # queue id → name, for DLQ sources

    # queue records ----------------------------------------------------------------------------

    def fresh(self, name: str) -> QueueRecord | None:
        """The cached record if it is fresh enough to use without a store read."""
        hit = self._cache.get(name)
        if hit is not None and time.monotonic() - hit[0] < QUEUE_CACHE_S:
            return hit[1]
        return None

    def get_queue_cached(self, name: str) -> QueueRecord:
        """The queue's record, at most `QUEUE_CACHE_S` old. SQS itself documents that
        attribute changes take up to 60 s to propagate; changes made through this process's
        `QueueService` are seen at once (it calls `forget`)."""
        hit = self.fresh(name)
        if hit is not None:
            return hit
        record = self.store.get_queue(name)
        self._cache[name] = (time.monotonic(), record)
        return record

    def forget(self, name: str) -> None:
        """Drop a cached record: the queue was changed or deleted."""
        self._cache.pop(name, None)

    def queue_arn(self, name: str) -> str:
        """How every API names a queue where SQS gives an ARN (e.g. a DLQ's source)."""
        return f"{self.arn_prefix}:{name}"

    def source_arn(self, queue_id: int) -> str | None:
        """The ARN of a queue by id, None once it is deleted. Queue ids are never reused,
        so a name found is kept; a missing one is not, in case of a lookup race."""
        if queue_id not in self._names:
            try:
                self._names[queue_id] = self.store.get_queue_by_id(queue_id).name
            except QueueNotFound:
                return None
        name = self._names[queue_id]
        return None if name is None else self.queue_arn(name)

    # receiving --------------------------------------------------------------------------------

    def lease(self, record: QueueRecord, max_messages: int, visibility_s: int | None,
              now: int | None = None) -> list[StoredMessage]:
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

    def receive_step(self, record: QueueRecord, max_messages: int,
                     visibility_s: int | None) -> list[ReceivedMessage]:
        """One look of a receive: a lease, as messages with signed receipt handles."""
        now = self.clock.now_ms()
        return [self._received(record, m, now)
                for m in self.lease(record, max_messages, visibility_s, now)]

    def _received(self, record: QueueRecord, m: StoredMessage, now: int) -> ReceivedMessage:
        assert m.lease_token is not None and m.first_received_at is not None  # just leased
        source = None if m.source_queue_id is None else self.source_arn(m.source_queue_id)
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

    # sending ----------------------------------------------------------------------------------

    def send(self, record: QueueRecord, messages: Sequence[OutgoingMessage], *,
             max_delay_s: int | None = None, max_total_bytes: bool | None = None,
             connection: Any = None) -> list[SendResult | TidingsError]:
        """Send any number of messages in one transaction, each validated on its own: the
        result list holds a SendResult or the error of each."""
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

    # tidings' own queues (`internal_queues`), which `QueueService` refuses to clients ------

    def ensure_internal(self, name: str, **attributes: Any) -> QueueRecord:
        """Create one of the engine's own queues if it is missing."""
        try:
            return self.store.get_queue(name)
        except QueueNotFound:
            attrs = QueueAttributes.build(fifo=False, **attributes)
            return self.store.create_queue(name, attrs, self.clock.now_ms())

    def enqueue_internal(self, name: str, body: str) -> SendResult:
        """The engine's send to one of its own queues (an email accepted by the API, a
        delivery moved to the email queue)."""
        outcome = self.send(self.get_queue_cached(name), [OutgoingMessage(body)])[0]
        if isinstance(outcome, TidingsError):
            raise outcome
        return outcome

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

    # maintenance (the sweeper; time travel runs it at each stop) -------------------------------

    def sweep(self, job_memory_s: int, limit: int = 5000) -> int:
        """Delete messages past retention and idempotency records past their memory."""
        now = self.clock.now_ms()
        gone = self.store.expire_messages(now, limit)
        self.store.forget_jobs(now - job_memory_s * 1000, limit)
        return gone

    def advance_move_tasks(self, elapsed_s: float) -> int:
        """One step of every running message move task (`Redrive.advance`)."""
        return self.moves.advance(elapsed_s)


def with_error(attributes: dict[str, MessageAttributeValue], error: str,
               ) -> tuple[dict[str, MessageAttributeValue], str | None]:
    """The message's attributes plus its recorded failure (`Code: message`), and their
    digest; attributes the sender set under those names are left as they are."""
    code, sep, text = error.partition(": ")
    extra = {ERROR_CODE: code if sep else "Error", ERROR_MESSAGE: text if sep else error}
    merged = {**{k: MessageAttributeValue("String", v) for k, v in extra.items()},
              **attributes}
    return merged, md5_of_attributes(merged)
