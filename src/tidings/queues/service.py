"""The queue service: SQS semantics over any store. Every interface calls this module.

`QueueService` is the door every face (the SQS and native APIs, the CLI, the console,
the Python API) comes through: it refuses tidings' own queues to all of them, keeps the
queue records, and hands resolved work to its collaborators, which trust their caller:
`Receiver` (receiving.py: long polls, receipts), `Redrive` (redrive.py: dead letters back
to work) and `QueueOps` (queue_ops.py: what the engine itself calls, the consumers' lease,
the group-committed receive, the sweeper's steps, sends to tidings' own queues).

Methods are synchronous (they run on the caller's thread, or on the bridge's pool from the
server), but for `receive_async`, the long poll that holds no thread while it waits.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol

from tidings.clock import Clock, to_ms
from tidings.errors import (
    InternalQueueAccess,
    PurgeInProgress,
    QueueNotFound,
    TidingsError,
    ValidationError,
)
from tidings.model.digests import MessageAttributeValue
from tidings.model.messages import (
    OutgoingMessage,
    ReceivedMessage,
    SendResult,
    StoredMessage,
    validate_batch_ids,
)
from tidings.model.paging import page_after, page_token
from tidings.model.queues import (
    INTERNAL_QUEUES,
    MAX_RETENTION_S,
    MoveTask,
    QueueAttributes,
    QueueCounts,
    QueueRecord,
    check_range,
    validate_queue_name,
    validate_tags,
)
from tidings.model.receipts import ReceiptSigner
from tidings.model.states import MessageState, message_state
from tidings.notify.base import SUBSCRIPTIONS_CHANNEL, Notifier, queue_channel
from tidings.queues.ops import QueueOps
from tidings.queues.receiving import (
    CROSS_PROCESS_POLL_S,
    Attempt,
    BatchFailure,
    Receiver,
)
from tidings.queues.redrive import Redrive
from tidings.store.base import LimitStore, QueueStore

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


def named_queue(store: QueueStore, name: str, field: str, what: str = "queue") -> QueueRecord:
    """The queue a setting names (a dead-letter queue, a target): a ValidationError on
    `field` when there is none, as the setting is what is wrong."""
    try:
        return store.get_queue(name)
    except QueueNotFound:
        raise ValidationError(field, f"{what} {name!r} does not exist") from None


class QueueServiceStore(QueueStore, LimitStore, Protocol):
    """What the queue service and the consumers over it ask of the store: the queues and
    messages, and the downstream limits a consumer holds a message back by (the message
    stays in its queue: `hold_back_messages`)."""


class QueueService:
    def __init__(self, store: QueueServiceStore, clock: Clock, notifier: Notifier,
                 signer: ReceiptSigner, *, arn_prefix: str = "arn:aws:sqs:us-east-1:000000000000",
                 fallback_poll_s: float = CROSS_PROCESS_POLL_S) -> None:
        """`fallback_poll_s`: how long a long poll waits before looking again when no
        notification reached it (`CROSS_PROCESS_POLL_S`)."""
        self.store = store
        self.clock = clock
        self.notifier = notifier
        self._moves = Redrive(store, clock, notifier)
        #: What the engine calls (`queue_ops.py`); it shares this service's record cache.
        self.ops = QueueOps(store, clock, notifier, signer, self._moves, arn_prefix=arn_prefix)
        self._receiver = Receiver(self.ops, fallback_poll_s=fallback_poll_s)

    def _refuse_internal(self, name: str, action: str) -> None:
        """The engine's own queues are read-only to every face (SQS, native API, CLI,
        console, Python API); the engine reaches them through `QueueOps.ensure_internal`
        and `enqueue_internal`, and its consumers lease their messages through `QueueOps`."""
        if name in INTERNAL_QUEUES:
            raise InternalQueueAccess(name, action)

    def get_queue_cached(self, name: str) -> QueueRecord:
        """The queue's record, at most a second old (`QueueOps.get_queue_cached`)."""
        return self.ops.get_queue_cached(name)

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
        self.ops.forget(name)
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
        self.ops.forget(name)
        self.notifier.notify(queue_channel(record.id))
        # its push subscription went with it: this process's pushers read them again
        self.notifier.notify(SUBSCRIPTIONS_CHANNEL)

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
            None if p.source_queue_id is None else self.ops.source_arn(p.source_queue_id))
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
        record = self.ops.get_queue_cached(queue)
        return self.store.cancel_message(record.id, message_id, visible_at,
                                         self.clock.now_ms())

    def send_batch(self, queue: str, messages: Sequence[OutgoingMessage], *,
                   max_delay_s: int | None = None,
                   ) -> tuple[list[SendResult], list[BatchFailure]]:
        """Send up to 10 messages; invalid entries fail alone (as SQS's per-entry results).

        `max_delay_s`: the SQS API caps delays at 15 minutes; the native API passes the
        queue's retention period instead, so a message can wait days.
        """
        # Entry ids only tell the per-entry results apart: numbered when none is given.
        if messages and all(m.entry_id is None for m in messages):
            messages = [replace(m, entry_id=str(i)) for i, m in enumerate(messages)]
        validate_batch_ids([m.entry_id for m in messages])
        outcome = self.send_group(queue, messages, max_delay_s=max_delay_s,
                                  max_total_bytes=True)
        results, failures = [], []
        for m, r in zip(messages, outcome, strict=True):
            if isinstance(r, SendResult):
                results.append(r)
            elif not isinstance(r, ValidationError):
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
        return self.ops.send(self.ops.get_queue_cached(queue), messages, max_delay_s=max_delay_s,
                             max_total_bytes=max_total_bytes, connection=connection)

    # receiving and acknowledging (receiving.py) ----------------------------------------------

    def receive(self, queue: str, max_messages: int = 1, *, wait_s: int | None = None,
                visibility_s: int | None = None) -> list[ReceivedMessage]:
        """Receive, long polling up to `wait_s` seconds on this thread."""
        self._refuse_internal(queue, "received from")
        return self._receiver.receive(queue, max_messages, wait_s, visibility_s)

    async def receive_async(self, bridge: Any, queue: str, max_messages: int = 1, *,
                            wait_s: int | None = None, visibility_s: int | None = None,
                            attempt: Attempt | None = None) -> list[ReceivedMessage]:
        """Receive, long polling up to `wait_s` seconds without holding a thread; each
        look is `attempt(record, n, visibility)`, by default a store call of its own."""
        self._refuse_internal(queue, "received from")
        return await self._receiver.receive_async(bridge, queue, max_messages, wait_s=wait_s,
                                                  visibility_s=visibility_s, attempt=attempt)

    def replay_receive(self, queue: str, attempt_id: str,
                       visibility_s: int | None) -> list[ReceivedMessage] | None:
        """A FIFO receive retried with the same attempt id gets the same messages again;
        None when there is nothing to replay (`receive_attempts.py`)."""
        self._refuse_internal(queue, "received from")
        return self._receiver.replay_receive(queue, attempt_id, visibility_s)

    def remember_receive(self, queue: str, attempt_id: str,
                         messages: list[ReceivedMessage]) -> None:
        self._receiver.remember_receive(queue, attempt_id, messages)

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
        return self._receiver.delete_group(queue, handles)

    def delete_batch(self, queue: str, entries: Sequence[tuple[str, str]],
                     ) -> tuple[list[str], list[BatchFailure]]:
        validate_batch_ids([e[0] for e in entries])
        self._refuse_internal(queue, "deleted from")
        return self._receiver.delete_batch(queue, entries)

    def change_visibility(self, queue: str, receipt_handle: str, timeout_s: int,
                          *, error: str | None = None) -> None:
        self._refuse_internal(queue, "changed")
        self._receiver.change_visibility(queue, [("0", receipt_handle, timeout_s)],
                                         error=error, single=True)

    def change_visibility_batch(self, queue: str, entries: Sequence[tuple[str, str, int]], *,
                                error: str | None = None,
                                ) -> tuple[list[str], list[BatchFailure]]:
        validate_batch_ids([e[0] for e in entries])
        self._refuse_internal(queue, "changed")
        return self._receiver.change_visibility(queue, entries, error=error, single=False)

    # dead letters back to work (redrive.py) -------------------------------------------------

    def redrive(self, dlq: str, destination: str | None = None, *, limit: int | None = None,
                chunk: int = 1000) -> int:
        """Move messages out of a DLQ now: to `destination`, or each to its source queue."""
        self._refuse_moves(dlq, destination)
        return self._moves.redrive(dlq, destination, limit=limit, chunk=chunk)

    def redrive_selected(self, dlq: str, row_ids: Sequence[int],
                         destination: str | None = None) -> int:
        """Move the chosen messages of a DLQ (by the row ids a peek shows) back to their
        source queues, or to `destination`; ids no longer in the DLQ are skipped."""
        self._refuse_moves(dlq, destination)
        return self._moves.redrive_selected(dlq, row_ids, destination)

    def start_move_task(self, dlq: str, destination: str | None = None,
                        max_per_second: int | None = None) -> str:
        self._refuse_moves(dlq, destination)
        return self._moves.start_move_task(dlq, destination, max_per_second)

    def list_move_tasks(self, dlq: str, limit: int = 1) -> list[MoveTask]:
        return self._moves.list_move_tasks(dlq, limit)

    def cancel_move_task(self, handle: str) -> MoveTask:
        return self._moves.cancel_move_task(handle)

    def queue_names(self, tasks: Sequence[MoveTask]) -> dict[int, str]:
        """The names of the queues that move tasks name by id (deleted ones left out)."""
        return self._moves.queue_names(tasks)

    def _refuse_moves(self, dlq: str, destination: str | None) -> None:
        self._refuse_internal(dlq, "redriven")
        if destination:
            self._refuse_internal(destination, "sent to")


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
