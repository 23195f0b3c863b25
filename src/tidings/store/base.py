"""The store contract: the one `Protocol` every backend satisfies (through `SqlStore`).

Methods are named after the transitions they perform and take `now` from the caller (the
engine's injected clock); the store never reads the wall clock. The contract is
synchronous: SQLite's driver is, psycopg 3 offers it too, and one flavour avoids twin
methods. The async server bridges with a small thread pool sized by `max_concurrency`
(1 for SQLite, which has one writer anyway).

Invariants every backend keeps (`tests/conformance` checks them on both):
- every write that depends on a state is a compare-and-set: a message's on its lease
  (`visible_at`, `lease_token`), a firing's on (claim token, occurrence), a stored status
  on the status it was read with (`tidings.model.states`), so a stale receipt, a lost
  claim or a lost race never changes what someone else now holds;
- a multi-row call is one transaction: all of it happens or none of it;
- instants are integer UTC epoch milliseconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple, Protocol

from tidings.model.audit import AuditEntry, EmailIdentity
from tidings.model.campaigns import CampaignRecord, Step
from tidings.model.email import Delivery, StoredTemplate, Suppression, SuppressionReason
from tidings.model.messages import NewMessage, StoredMessage
from tidings.model.nodes import NodeRecord, TakenCount
from tidings.model.queues import MoveTask, QueueAttributes, QueueCounts, QueueRecord
from tidings.model.receipts import Receipt
from tidings.model.schedules import (
    Schedule,
    ScheduleGroup,
    ScheduleKey,
    ScheduleRow,
    ScheduleSpec,
)
from tidings.model.states import CampaignStatus, DeliveryState, MoveTaskStatus
from tidings.store.driver import ConnectionLock
from tidings.store.migrate import SchemaStatus

# queues ------------------------------------------------------------------------------------


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

    url: str
    max_concurrency: int
    #: `Driver.inline_lock`: set where one connection serves every call (SQLite).
    inline_lock: ConnectionLock | None

    def close(self) -> None: ...

    def ping(self) -> None:
        """A read that touches no table: raises StoreUnavailable if the database does not
        answer (the readiness probe)."""
        ...

    def get_or_create_secret(self, key: str, make: bytes) -> bytes:
        """Return the stored secret `key`, storing `make` first if there is none (atomic);
        a secret already there is read without writing."""
        ...

    def schema_status(self) -> SchemaStatus:
        """The database's migrations against this release's, read now (a running node
        looks for a newer node having migrated it: `engine/schema_guard.py`)."""
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


# schedules ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class NewSchedule:
    spec: ScheduleSpec
    next_fire_at: int | None
    due_at: int | None


@dataclass(frozen=True)
class TargetMessage:
    """A message a firing writes, in the firing's own transaction."""

    queue_id: int
    fifo: bool
    message: NewMessage


@dataclass(frozen=True)
class Firing:
    """The outcome of one claimed schedule: what to write, applied only if the claim holds."""

    schedule_id: int
    claim_token: int
    occurrence: int  # the next_fire_at that was claimed (compare-and-set)
    next_fire_at: int | None
    due_at: int | None
    delete: bool
    fired: bool  # False when the occurrence was skipped (older than its maximum event age)
    messages: Sequence[TargetMessage] = ()
    # What to record in the firing history with the firing (None: nothing now; a webhook's,
    # function's or email's outcome is recorded by its delivery when final).
    outcome: FiringOutcome | None = None


class FiringOutcome(NamedTuple):
    """One row of a schedule's firing history (the console's "last firings")."""

    schedule_id: int
    occurrence: int  # the scheduled instant, epoch ms
    at: int  # when the outcome became final
    outcome: str  # see `engine.firing_log.Outcome`
    attempts: int
    detail: str | None


class ScheduleStore(Protocol):
    """Schedules and schedule groups."""

    def create_group(self, name: str, tags: dict[str, str], now: int,
                     client_token: str | None = None) -> bool:
        """False when the name is taken (the token is kept for a retried create)."""
    def get_group(self, name: str) -> ScheduleGroup: ...
    def list_groups(self, prefix: str, after: str | None, limit: int) -> list[ScheduleGroup]: ...
    def delete_group(self, name: str) -> int:
        """Delete the group and every schedule in it; returns how many schedules went."""
        ...

    def tag_group(self, name: str, tags: dict[str, str], now: int) -> None: ...

    def insert_schedules(self, rows: Sequence[NewSchedule], now: int) -> list[bool]:
        """Insert many schedules in one transaction; False where (group, name) exists."""
        ...

    def create_schedule(self, row: NewSchedule, now: int, connection: Any = None,
                        ) -> Schedule | None:
        """Insert one schedule and return it as stored, in one statement; None when its
        group does not exist or the name is taken (the caller tells which). Returning the
        row (instead of reading it back) also serves a one-shot due now, which a
        dispatcher may fire and delete a moment later. `connection`: as for
        `send_messages`."""
        ...

    def insert_schedule_rows(self, rows: Sequence[ScheduleRow],
                             campaign: str | None = None) -> int:
        """The fastest bulk path, for rows valid by construction (fan-out); existing
        (group, name) pairs are skipped. Returns how many rows went in, and adds that to
        the campaign's count of created schedules in the same transaction (so a crash
        cannot separate the two). One transaction."""
        ...

    def get_schedule(self, group: str, name: str) -> Schedule: ...
    def list_schedules(self, group: str | None, prefix: str, state: str | None,
                       after: tuple[str, str] | None, limit: int) -> list[Schedule]: ...
    def replace_schedule(self, row: NewSchedule, now: int) -> Schedule: ...
    def delete_schedule(self, group: str, name: str) -> None: ...
    def next_due_at(self) -> int | None: ...
    def warm_due(self, start: int, until: int, limit: int) -> tuple[int, int | None]:
        """Read what firing the schedules due in [start, until) will read and update (at
        most `limit`, earliest first), so that it is in memory when they come due: how
        many rows were read and the last one's due instant. Changes nothing."""
        ...
    def claim_due_schedules(self, now: int, limit: int, claim_ms: int,
                            token: int) -> list[Schedule]:
        """Take up to `limit` schedules due at `now`, earliest first, for `claim_ms`:
        marked with `token` (due again at `now + claim_ms`), so no other caller takes
        them meanwhile. Inside a `firing_pass` they are not marked: read (SQLite) or
        locked in the pass's transaction (PostgreSQL). A pass that fails wrote nothing,
        and its rows are due at once; such a claim is completed in the same pass (with
        `token`) or not at all (outside it the rows carry no mark, and the completion
        refuses)."""
        ...

    def firing_pass(self) -> AbstractContextManager[None]:
        """Around a pass's claim, planning and completion, on this thread. On a
        single-writer database (SQLite) its claim is a read (see `claim_due_schedules`)
        and no transaction is open while the pass plans. Where many nodes write
        (PostgreSQL) the pass is one transaction: its claim locks the rows (other nodes
        skip them), its completion commits, and a node stalled for the claim's `claim_ms`
        loses it to the server's idle limit, as it would lose an expired claim."""
        ...

    def complete_firings(self, firings: Sequence[Firing], now: int) -> list[bool]:
        """Advance or delete each claimed schedule and write its messages, all in one
        transaction; a firing whose claim no longer holds writes nothing (False). The
        compare-and-set is on (claim token, occurrence); for the rows its own pass read
        unmarked (same token), on (modified_at, occurrence): a row updated, paused or
        fired since it was read refuses."""
        ...

    def count_schedules(self) -> int: ...
    def record_firings(self, outcomes: Sequence[FiringOutcome]) -> None:
        """Add rows to the firing history, in one statement."""
        ...

    def recent_firings(self, schedule_id: int, since: int,
                       limit: int) -> list[FiringOutcome]:
        """The schedule's last `limit` outcomes recorded at or after `since`, newest first."""
        ...

    def trim_firings(self, before: int, limit: int) -> int:
        """Delete up to `limit` of the oldest history rows recorded before `before`;
        returns how many went."""
        ...

    def disabled_schedules(self, group: str, after: str, limit: int,
                           ) -> list[tuple[str, int | None, int | None]]:
        """A page of the group's disabled schedules by name: (name, next_fire_at,
        flexible window minutes)."""
        ...

    def schedule_state_counts(self, group: str) -> dict[str, int]: ...
    def firing_counts(self, start_ms: int, end_ms: int, bucket_ms: int, *,
                      by_occurrence: bool = False) -> list[tuple[int, str, int]]:
        """(bucket start, target kind, count) of enabled schedules due in [start, end):
        by due_at (after flexible offsets) or, with `by_occurrence`, by next_fire_at."""
        ...


# email -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeliveryQuery:
    """Filters of the delivery log (None: any)."""

    message_id: str | None = None
    recipient: str | None = None  # normalised address
    schedule_prefix: str | None = None  # "campaign/" for a campaign's deliveries
    state: DeliveryState | None = None
    created_from: int | None = None
    created_until: int | None = None  # exclusive


class EmailStore(Protocol):
    """Templates, the suppression list and the delivery log (`tidings.email`)."""

    def create_template(self, template: StoredTemplate) -> None:
        """Insert; `ConflictError` when the name is taken."""
        ...

    def update_template(self, name: str, subject: str, html: str | None, text: str | None,
                        now: int) -> StoredTemplate: ...
    def get_template(self, name: str) -> StoredTemplate: ...
    def list_templates(self, after: str | None, limit: int) -> list[StoredTemplate]: ...
    def delete_template(self, name: str) -> None: ...

    def add_suppressions(self, addresses: Sequence[str], reason: SuppressionReason,
                         now: int) -> int:
        """Add normalised addresses (existing entries keep their reason); returns how many
        were new."""
        ...

    def remove_suppression(self, address: str) -> bool: ...
    def suppressed_among(self, addresses: Sequence[str]) -> dict[str, Suppression]: ...
    def list_suppressions(self, reason: SuppressionReason | None, after: str | None,
                          limit: int) -> list[Suppression]: ...

    def insert_delivery(self, delivery: Delivery) -> bool:
        """False when a delivery with this id exists (left untouched)."""
        ...

    def record_deliveries(self, deliveries: Sequence[Delivery]) -> list[bool]:
        """Insert each, or move the existing row if it is still QUEUED (compare-and-set:
        False where it was already final); one transaction."""
        ...

    def update_delivery(self, delivery_id: str, current: DeliveryState, new: DeliveryState,
                        detail: str | None, attempts: int, now: int) -> bool:
        """Compare-and-set from `current`; False when it is missing or no longer `current`."""
        ...

    def get_delivery(self, delivery_id: str) -> Delivery | None: ...
    def get_deliveries(self, delivery_ids: Sequence[str]) -> dict[str, Delivery]: ...
    def list_deliveries(self, recipient: str | None, state: DeliveryState | None,
                        before: int | None, limit: int) -> list[Delivery]:
        """Newest first; `before` is the `seq` of the previous page's last row."""
        ...

    def resend_deliveries(self, resends: Sequence[tuple[Delivery, NewMessage]],
                          queue_id: int, now: int) -> list[bool]:
        """Put each delivery back to QUEUED (compare-and-set from the state it was read
        in) and, for those that won, write its new job message to the queue; one
        transaction, so a delivery is resent once per resend and never lost between the
        two."""
        ...

    def find_deliveries(self, query: DeliveryQuery, after: int, limit: int,
                        ) -> list[Delivery]:
        """Deliveries matching every given filter, oldest first, after the `seq` `after`."""
        ...

    def delivery_state_counts(self, schedule_prefix: str) -> dict[str, int]:
        """Delivery-log rows whose `schedule` starts with the prefix, by state."""
        ...


# campaigns ---------------------------------------------------------------------------------


class CampaignStore(Protocol):
    """Campaign records, and the changes of status that act on the campaign's schedules in
    the same transaction (so a pause, a resume and a cancel cannot interleave)."""

    def create_campaign(self, record: CampaignRecord) -> bool:
        """Insert; False when a campaign of that name exists (left untouched)."""
        ...

    def get_campaign(self, name: str) -> CampaignRecord: ...
    def list_campaigns(self, after: str | None, limit: int) -> list[CampaignRecord]: ...
    def update_campaign_steps(self, name: str, steps: Sequence[Step], now: int) -> None: ...
    def add_campaign_progress(self, name: str, rows_read: int, row_errors: int, created: int,
                              now: int) -> None:
        """Rows read and row errors keep their maximum (a re-run reads the rows again);
        schedules created add up."""
        ...

    def set_campaign_status(self, name: str, current: CampaignStatus, new: CampaignStatus,
                            now: int) -> int:
        """Compare-and-set the status (`ConflictError` when it is no longer `current`) and,
        in the same transaction, disable the group's schedules (PAUSED) or delete them
        and count them as cancelled (CANCELLED); returns how many schedules changed."""
        ...

    def enable_campaign_schedules(self, name: str, dues: Sequence[tuple[str, int | None]],
                                  now: int) -> int:
        """Enable the named disabled schedules with their new due_at, only while the
        campaign is ACTIVE (`ConflictError` otherwise); returns how many."""
        ...

    def cancel_campaign_schedules(self, name: str, schedule_names: Sequence[str],
                                  now: int) -> int:
        """Delete the named schedules and count them as cancelled; returns how many."""
        ...

    def campaign_step_cancelled(self, name: str) -> dict[str, int]:
        """How many schedules of each step were cancelled (counted as they were deleted,
        by a campaign's cancel or a recipient's); a step with none is absent."""
        ...


class NodeStore(Protocol):
    """Heartbeats of the nodes and the counts the console shows (`tidings.engine.nodes`)."""

    def put_node(self, node: NodeRecord) -> None:
        """Insert or refresh the node's row (its `seen_at` and `activity`)."""
        ...

    def list_nodes(self, seen_since: int) -> list[NodeRecord]: ...
    def forget_nodes(self, seen_before: int) -> int: ...
    def put_console_count(self, name: str, value: str, taken_at: int) -> None: ...
    def console_counts(self) -> dict[str, TakenCount]: ...
    def count_pending_schedules(self) -> int:
        """Enabled schedules with an occurrence to come: a walk of the due index."""
        ...

    def count_due_between(self, start_ms: int, end_ms: int) -> int: ...
    def delivery_counts_since(self, since_ms: int) -> dict[str, int]:
        """Deliveries created since the instant, by state."""
        ...

    def schedules_by_due(self, start_ms: int, end_ms: int, after: tuple[int, int] | None,
                         limit: int) -> list[Schedule]:
        """Enabled schedules due in [start, end), by (due_at, id) after `after`."""
        ...

    def schedule_keys(self, group: str | None, prefix: str, after: tuple[str, str] | None,
                      limit: int) -> list[ScheduleKey]:
        """`list_schedules`' walk, reading only what a filter needs of each row."""
        ...

    def due_schedule_keys(self, start_ms: int, end_ms: int, after: tuple[int, int] | None,
                          limit: int) -> list[ScheduleKey]:
        """`schedules_by_due`' walk, reading only what a filter needs of each row."""
        ...

    def schedule_state_counts_by_prefix(self, group: str, prefix: str) -> dict[str, int]:
        """The group's schedules whose name starts with `prefix` (a campaign step), by state."""
        ...

    def group_firing_counts(self, group: str, start_ms: int, end_ms: int,
                            bucket_ms: int) -> list[tuple[int, int]]:
        """(bucket start, count) of the group's enabled schedules due in [start, end)."""
        ...


# security ----------------------------------------------------------------------------------


class SecurityStore(Protocol):
    """The audit log (append-only) and the verified email identities."""

    def record_audit(self, at: int, actor: str, face: str, action: str,
                     resource: str) -> None: ...
    def list_audit(self, actor: str | None, before: int | None,
                   limit: int) -> list[AuditEntry]:
        """Newest first; `before` is the `seq` of the previous page's last entry."""
        ...

    def add_email_identity(self, identity: str, now: int) -> bool:
        """False when it was there already."""
        ...

    def delete_email_identity(self, identity: str) -> bool: ...
    def list_email_identities(self) -> list[EmailIdentity]: ...


class Store(QueueStore, ScheduleStore, EmailStore, CampaignStore, NodeStore, SecurityStore,
            Protocol):
    """Everything a backend stores: the one contract `open_store` returns."""
