"""The queue service: SQS semantics over any store. Every interface calls this module.

Methods are synchronous (they run on the caller's thread, or on the bridge's pool from the
server); the two waits that matter, long polling, have a thread flavour (`receive`) and an
async flavour (`receive_async`) sharing one step function, so neither busy-polls.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, replace
from datetime import datetime
from typing import Any

from tidings.clock import Clock, to_ms
from tidings.engine import metrics
from tidings.engine.receive_attempts import ReceiveAttempts
from tidings.engine.receiving import (
    CROSS_PROCESS_POLL_S,
    BatchFailure,
    Receiving,
)
from tidings.engine.redrive import Redrive
from tidings.errors import (
    BatchError,
    InternalQueueAccess,
    PurgeInProgress,
    QueueNotFound,
    TidingsError,
    ValidationError,
)
from tidings.model.digests import MessageAttributeValue
from tidings.model.messages import (
    NewMessage,
    OutgoingMessage,
    SendResult,
    StoredMessage,
    prepare,
    validate_batch_ids,
)
from tidings.model.paging import page_after, page_token
from tidings.model.queues import (
    INTERNAL_QUEUES,
    MAX_MESSAGE_BYTES,
    MAX_RETENTION_S,
    MAX_SQS_DELAY_S,
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
    Store,
)

PURGE_INTERVAL_MS = 60_000


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

    @property
    def internal(self) -> bool:
        """One of the engine's own queues: shown, never changed by a client."""
        return self.record.name in INTERNAL_QUEUES


def named_queue(store: Store, name: str, field: str, what: str = "queue") -> QueueRecord:
    """The queue a setting names (a dead-letter queue, a target): a ValidationError on
    `field` when there is none, as the setting is what is wrong."""
    try:
        return store.get_queue(name)
    except QueueNotFound:
        raise ValidationError(field, f"{what} {name!r} does not exist") from None


@dataclass(eq=False)
class QueueService(Receiving, Redrive):
    store: Store
    clock: Clock
    notifier: Notifier
    signer: ReceiptSigner
    _: KW_ONLY
    arn_prefix: str = "arn:aws:sqs:us-east-1:000000000000"
    fallback_poll_s: float = CROSS_PROCESS_POLL_S

    def __post_init__(self) -> None:
        self._queue_cache: dict[str, tuple[float, QueueRecord]] = {}
        self._names: dict[int, str | None] = {}  # queue id → name, for DLQ sources
        self.attempts = ReceiveAttempts()

    def _refuse_internal(self, name: str, action: str) -> None:
        """The engine's own queues are read-only to every face (SQS, native API, CLI,
        console, Python API); the engine reaches them through `ensure_internal` and
        `enqueue_internal`, and its consumers lease their messages below this service."""
        if name in INTERNAL_QUEUES:
            raise InternalQueueAccess(name, action)

    def ensure_internal(self, name: str, **attributes: Any) -> QueueRecord:
        """Create one of the engine's own queues if it is missing (`internal_queues`)."""
        try:
            return self.store.get_queue(name)
        except QueueNotFound:
            attrs = QueueAttributes.build(fifo=False, **attributes)
            return self.store.create_queue(name, attrs, self.clock.now_ms())

    def enqueue_internal(self, name: str, body: str) -> SendResult:
        """The engine's send to one of its own queues (an email accepted by the API, a
        delivery moved to the email queue), which `send` refuses to clients."""
        outcome = self._send_group(self.get_queue_cached(name), [OutgoingMessage(body)])[0]
        if isinstance(outcome, TidingsError):
            raise outcome
        return outcome

    def create_queue(self, name: str, **attributes: Any) -> QueueRecord:
        self._refuse_internal(name, "created")
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
                    next_token: str | None = None, include_internal: bool = False,
                    ) -> tuple[list[QueueRecord], str | None]:
        """Queues by name; the engine's own only with `include_internal` (what `tidings
        queue list --all` and the console show)."""
        limit = check_range("MaxResults", limit, 1, 1000)
        after = page_after(next_token)
        if include_internal:
            records = self.store.list_queues(prefix, after, limit + 1)
        else:  # read past the hidden ones, so a page is still full when more follow
            records = [r for r in self.store.list_queues(prefix, after,
                                                         limit + 1 + len(INTERNAL_QUEUES))
                       if r.name not in INTERNAL_QUEUES][:limit + 1]
        more = len(records) > limit
        records = records[:limit]
        return records, (page_token(records[-1].name) if more and records else None)

    def update_queue(self, name: str, **changes: Any) -> QueueRecord:
        self._refuse_internal(name, "changed")
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
        if policy.dead_letter_queue in INTERNAL_QUEUES:
            raise ValidationError("RedrivePolicy.deadLetterTargetArn",
                                  f"queue {policy.dead_letter_queue!r} is tidings' own and "
                                  "cannot be a dead-letter queue")
        if policy.dead_letter_queue == name:
            raise ValidationError("RedrivePolicy.deadLetterTargetArn",
                                  "a queue cannot be its own dead-letter queue")
        dlq = named_queue(self.store, policy.dead_letter_queue,
                          "RedrivePolicy.deadLetterTargetArn", "dead-letter queue")
        allow = dlq.attributes.redrive_allow_policy
        if allow is not None and not allow.allows(name):
            raise ValidationError("RedrivePolicy.deadLetterTargetArn",
                                  f"queue {dlq.name!r}'s RedriveAllowPolicy does not allow {name!r}"
                                  " as a source")

    def tag_queue(self, name: str, tags: Mapping[str, str]) -> None:
        self._refuse_internal(name, "tagged")
        record = self.store.get_queue(name)
        merged = {**record.attributes.tags, **tags}
        validate_tags(merged)
        self.store.update_queue(name, record.attributes.merged(tags=merged), self.clock.now_ms())

    def untag_queue(self, name: str, keys: Sequence[str]) -> None:
        self._refuse_internal(name, "untagged")
        record = self.store.get_queue(name)
        tags = {k: v for k, v in record.attributes.tags.items() if k not in set(keys)}
        self.store.update_queue(name, record.attributes.merged(tags=tags), self.clock.now_ms())

    def delete_queue(self, name: str) -> None:
        self._refuse_internal(name, "deleted")
        record = self.store.get_queue(name)
        self.store.delete_queue(name)
        self._queue_cache.pop(name, None)
        self.notifier.notify(queue_channel(record.id))

    def purge_queue(self, name: str) -> int:
        self._refuse_internal(name, "purged")
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
        if (key := page_after(next_token)) is not None:
            visible, _, row = key.partition(":")
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
        return views, (page_token(f"{last.visible_at}:{last.row_id}") if last else None)

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
        self._refuse_internal(queue, "changed")
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
        self._refuse_internal(queue, "sent to")
        return self._send_group(self.get_queue_cached(queue), messages,
                                max_delay_s=max_delay_s, max_total_bytes=max_total_bytes,
                                connection=connection)

    def _send_group(self, record: QueueRecord, messages: Sequence[OutgoingMessage], *,
                    max_delay_s: int | None = None, max_total_bytes: bool | None = None,
                    connection: Any = None) -> list[SendResult | TidingsError]:
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

    # maintenance -----------------------------------------------------------------------------

    def _sweep(self, job_memory_s: int, limit: int = 5000) -> int:
        """Delete messages past retention and idempotency records past their memory."""
        now = self.clock.now_ms()
        gone = self.store.expire_messages(now, limit)
        self.store.forget_jobs(now - job_memory_s * 1000, limit)
        return gone


def json_body(body: Any) -> str:
    """A message body: a string as it is, anything else as its JSON text."""
    if isinstance(body, str):
        return body
    try:
        return json.dumps(body, ensure_ascii=False)
    except (TypeError, ValueError):
        raise ValidationError("MessageBody", "must be a string or a JSON-serialisable value, "
                              f"not {type(body).__name__}") from None


__all__ = ["QueueService", "BatchFailure", "QueueInfo", "MAX_RETENTION_S"]
