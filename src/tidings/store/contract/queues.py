"""Queues and messages: what `queues.service` and the consumers ask of the store."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple, Protocol

from tidings.model.messages import NewMessage, StoredMessage
from tidings.model.queues import MoveTask, QueueAttributes, QueueCounts, QueueRecord
from tidings.model.receipts import Receipt
from tidings.model.states import MoveTaskStatus


@dataclass(frozen=True)
class StoredSend:
    message_id: str
    sequence_number: int | None
    duplicate: bool


@dataclass(frozen=True)
class ReceiveParams:
    queue_id: int
    max_messages: int
    visibility_ms: int
    now: int
    lease_token: int
    fifo: bool
    dead_letter_queue_id: int | None = None
    max_receive_count: int | None = None
    dead_letter_retention_ms: int | None = None


@dataclass(frozen=True)
class ReceiveOutcome:
    messages: list[StoredMessage]
    dead_lettered: int  # moved to the DLQ by this receive (maxReceiveCount exceeded)


@dataclass(frozen=True)
class VisibilityChange:
    receipt: Receipt
    visible_at: int
    error: str | None = None  # recorded on the message (a consumer's failure reason)


class JobAck(NamedTuple):
    """A finished job's acknowledgement: its message's receipt and its job key. A tuple,
    like JobLease: a consumer makes one per job."""

    receipt: Receipt
    job_id: str


class JobLease(NamedTuple):
    """A consumer's hold on a job key while its handler runs: the receipt's lease token."""

    job_key: str
    token: int


class Reservation(StrEnum):
    RESERVED = "reserved"  # this consumer holds the key: run the handler
    DONE = "done"  # the job already ran to success: acknowledge the duplicate
    BUSY = "busy"  # another consumer holds the key and its lease: wait for it


@dataclass(frozen=True)
class Rejection:
    receipt: Receipt
    error: str  # recorded on the message, which a DLQ reader sees


class QueueStore(Protocol):
    """Durable state of queues and messages."""

    def get_or_create_secret(self, key: str, make: bytes) -> bytes:
        """Return the stored secret `key`, storing `make` first if there is none (atomic);
        a secret already there is read without writing."""
        ...

    def create_queue(self, name: str, attributes: QueueAttributes, now: int) -> QueueRecord:
        """Create, or return the existing queue when its attributes are the same (as SQS);
        a queue of that name with other attributes raises `ConflictError`."""
        ...

    def get_queue(self, name: str) -> QueueRecord: ...
    def get_queue_by_id(self, queue_id: int) -> QueueRecord: ...
    def list_queues(self, prefix: str, after: str | None, limit: int) -> list[QueueRecord]: ...
    def update_queue(self, name: str, attributes: QueueAttributes, now: int) -> QueueRecord: ...
    def delete_queue(self, name: str) -> None:
        """Delete the queue and every message in it."""
        ...

    def purge_queue(self, queue_id: int, now: int) -> int: ...
    def dead_letter_sources(self, dlq_name: str) -> list[QueueRecord]: ...
    def queue_counts(self, queue_id: int, now: int) -> QueueCounts: ...

    def send_messages(self, queue_id: int, messages: Sequence[NewMessage], *, fifo: bool,
                      now: int, connection: Any = None) -> list[StoredSend]:
        """Insert all messages in one transaction; FIFO duplicates within the window are
        acknowledged with the original's id and not stored again. With `connection` (an
        application's own database connection, PostgreSQL only) the rows are written in
        that connection's transaction: committed or rolled back with it."""
        ...

    def cancel_message(self, queue_id: int, message_id: str, visible_at: int, now: int,
                       ) -> bool:
        """Delete a delayed message (never received, not visible before `visible_at`,
        which locates it) if it is still delayed at `now`; whether it was."""
        ...

    def receive_messages(self, params: ReceiveParams) -> ReceiveOutcome:
        """Lease up to `max_messages` visible messages: new lease token, `visible_at` =
        now + visibility, receive count + 1. Messages that already reached
        `max_receive_count` go to the DLQ in the same transaction instead. FIFO: only
        from groups with nothing in flight, in order."""
        ...

    def delete_messages(self, queue_id: int, receipts: Sequence[Receipt]) -> list[bool]:
        """Delete by receipt; False where the lease token no longer matches (stale)."""
        ...

    def change_visibility(self, queue_id: int, changes: Sequence[VisibilityChange],
                          now: int) -> list[bool]:
        """Move the lease end of in-flight messages; False where not in flight or stale."""
        ...

    def complete_jobs(self, queue_id: int, acks: Sequence[JobAck], now: int) -> list[bool]:
        """Delete the messages (False where the receipt is stale) and mark every ack's job
        key DONE (its handler ran to success, whoever holds the message now), in one
        transaction, so a crash cannot separate the acknowledgement from the record."""
        ...

    def reserve_jobs(self, queue_id: int, leases: Sequence[JobLease], until: int,
                     now: int) -> list[Reservation]:
        """Reserve each job key until `until`: RESERVED when it had no row or its holder's
        lease ran out, DONE when it ran to success, BUSY when held. One transaction; the
        keys must be distinct."""
        ...

    def extend_jobs(self, queue_id: int, leases: Sequence[JobLease], until: int) -> None:
        """The heartbeat: move the lease end of keys still held with these tokens."""
        ...

    def release_jobs(self, queue_id: int, leases: Sequence[JobLease]) -> None:
        """Give keys back after a failure (only those still held with these tokens)."""
        ...

    def reject_messages(self, queue_id: int, rejections: Sequence[Rejection],
                        dead_letter_queue_id: int, dead_letter_retention_ms: int,
                        now: int) -> list[bool]:
        """Move in-flight messages to the DLQ at once with their error (compare-and-set on
        the receipt's lease: False where stale)."""
        ...

    def peek_messages(self, queue_id: int, after: tuple[int, int] | None,
                      limit: int) -> list[StoredMessage]:
        """Messages in the order a receive would take them (visible_at, then row id),
        keyset-paged after (visible_at, row id); reading changes nothing."""
        ...

    def next_visible_at(self, queue_id: int, now: int) -> int | None:
        """The earliest instant after `now` at which a message of the queue becomes visible."""
        ...

    def expire_messages(self, now: int, limit: int) -> int:
        """Delete up to `limit` messages past their queue's retention period."""
        ...

    def forget_jobs(self, done_before: int, limit: int) -> int:
        """Forget up to `limit` job keys done before `done_before`, and reservations whose
        lease ran out before it (their consumer died)."""
        ...

    def reclaim_space(self) -> bool:
        """Make the space of deleted rows reusable where the database does not by itself
        (PostgreSQL with autovacuum off); True if it had to. Safe on several nodes."""
        ...

    def move_messages(self, source_queue_id: int, destination_queue_id: int | None,
                      limit: int, now: int) -> int:
        """Move up to `limit` messages out of a DLQ (oldest first), made visible at once
        with a fresh receive count; to their original queue when destination is None."""
        ...

    def move_selected_messages(self, source_queue_id: int, destination_queue_id: int | None,
                               row_ids: Sequence[int], now: int) -> int:
        """`move_messages` for the given messages of the source queue only (ids not in it
        are skipped): an operator's selection in a dead-letter queue."""
        ...

    def create_move_task(self, task: MoveTask) -> None: ...
    def list_move_tasks(self, source_queue_id: int, limit: int) -> list[MoveTask]: ...
    def active_move_tasks(self) -> list[MoveTask]:
        """The RUNNING tasks: those the sweeper still advances."""
        ...

    def add_move_task_progress(self, handle: str, moved: int) -> None: ...
    def set_move_task_status(self, handle: str, current: MoveTaskStatus,
                             new: MoveTaskStatus, failure_reason: str | None = None) -> None:
        """Compare-and-set; `ConflictError` when the task is no longer `current`."""
        ...
