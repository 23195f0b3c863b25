"""The consumers' side of queues, in batches: what `Consumer` asks of the store.

Kept off `QueueService` (whose methods are what users and the APIs call): a consumer
receives many messages at once, reserves their job keys in one transaction, acknowledges
finished jobs in group commits, releases failures with their error, rejects poison
messages to the dead-letter queue and extends the leases of what it still holds. Each call
is one store transaction for the whole batch.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from tidings.errors import QueueNotFound
from tidings.model.messages import StoredMessage
from tidings.model.queues import QueueRecord
from tidings.model.receipts import Receipt
from tidings.queues.service import QueueService
from tidings.store.base import (
    JobAck,
    JobLease,
    Rejection,
    Reservation,
    VisibilityChange,
)
from tidings.store.contract.limits import HeldBack

_tokens = random.Random()
#: A consumer takes at most this many messages in one receive (SQS's own API caps at 10;
#: a consumer fills its free slots and prefetch buffer in one transaction).
MAX_BATCH = 1000


class Held(NamedTuple):
    """A received message and the receipt that proves the hold on it (consumers never
    need a signed receipt handle: the receipt stays in this process). A tuple: one is
    made per job."""

    message: StoredMessage
    receipt: Receipt


@dataclass(frozen=True)
class Failure:
    held: Held
    job_key: str | None  # its reservation to release, if it had one
    delay_s: int
    error: str


class Jobs:
    def __init__(self, queues: QueueService) -> None:
        self.queues = queues
        self.store = queues.store
        self.clock = queues.clock

    def receive(self, record: QueueRecord, max_messages: int) -> list[Held]:
        """Up to `max_messages` (any number up to MAX_BATCH) in one transaction."""
        got = self.queues.ops.lease(record, min(max_messages, MAX_BATCH), None)
        queue_id = record.id
        return [Held(m, m.receipt(queue_id)) for m in got]

    def next_visible_in(self, record: QueueRecord) -> float | None:
        """Seconds until the queue's next delayed (or leased) message becomes visible,
        None when there is none: an empty queue's poller sleeps no longer, so a job sent
        for later starts at its instant, not at the next poll (no notification comes
        when a delay ends)."""
        now = self.clock.now_ms()
        nxt = self.store.next_visible_at(record.id, now)
        return None if nxt is None else max((nxt - now) / 1000, 0.001)

    def lease_until(self, record: QueueRecord) -> int:
        return self.clock.now_ms() + record.attributes.visibility_timeout_s * 1000

    def reserve(self, record: QueueRecord, keys: Sequence[tuple[str, Held]],
                ) -> list[Reservation]:
        """Reserve distinct job keys for as long as the messages' visibility timeout; the
        lease token of each is its message's (a fresh one per receive)."""
        return self.store.reserve_jobs(
            record.id, [JobLease(key, held.receipt.lease_token) for key, held in keys],
            self.lease_until(record), self.clock.now_ms())

    def complete(self, queue_id: int, acks: Sequence[tuple[Held, str]]) -> list[bool]:
        """Delete the messages and mark their keys done, one transaction."""
        return self.store.complete_jobs(queue_id, [JobAck(h.receipt, key) for h, key in acks],
                                        self.clock.now_ms())

    def acknowledge(self, queue_id: int, held: Sequence[Held]) -> list[bool]:
        """Delete messages whose job needs no run (a duplicate of a finished job)."""
        return self.store.delete_messages(queue_id, [h.receipt for h in held])

    def fail(self, queue_id: int, failures: Sequence[Failure]) -> None:
        """Give the keys back and make the messages visible again after their backoff,
        each with its error recorded."""
        now = self.clock.now_ms()
        leases = [JobLease(f.job_key, f.held.receipt.lease_token)
                  for f in failures if f.job_key is not None]
        if leases:
            self.store.release_jobs(queue_id, leases)
        self.store.change_visibility(queue_id, [
            VisibilityChange(f.held.receipt, now + f.delay_s * 1000, f.error[:4000])
            for f in failures], now)

    def release(self, queue_id: int, items: Sequence[tuple[Held, str | None]]) -> None:
        """Shutdown: back to the queue at once, with the keys given back."""
        self.fail(queue_id, [Failure(h, key, 0, "") for h, key in items])

    def extend(self, record: QueueRecord, items: Sequence[tuple[Held, str | None]],
               slots: Sequence[tuple[str, str]] = ()) -> None:
        """The heartbeat: a fresh visibility timeout for messages, their keys and the
        concurrency slots they hold."""
        now = self.clock.now_ms()
        until = self.lease_until(record)
        self.store.change_visibility(record.id, [VisibilityChange(h.receipt, until)
                                                 for h, _ in items], now)
        leases = [JobLease(key, h.receipt.lease_token) for h, key in items if key is not None]
        if leases:
            self.store.extend_jobs(record.id, leases, until)
        if slots:
            self.store.extend_limit_slots(slots, until)

    def hold_back(self, queue_id: int, items: Sequence[tuple[Held, str | None, int, str | None]],
                  slots: Sequence[tuple[str, str]] = ()) -> list[bool]:
        """Jobs a limit (or RetryAfter) held back: their keys and concurrency slots given
        back, their messages visible again at each one's instant, the receive not counted."""
        leases = [JobLease(key, h.receipt.lease_token) for h, key, _, _ in items
                  if key is not None]
        if leases:
            self.store.release_jobs(queue_id, leases)
        if slots:
            self.store.release_limit_slots(slots)
        return self.store.hold_back_messages(queue_id, [
            HeldBack(h.receipt, at, error) for h, _, at, error in items], self.clock.now_ms())

    def release_slots(self, slots: Sequence[tuple[str, str]]) -> None:
        """Concurrency slots of jobs that ended (their outcome written or not: a slot not
        given back runs out with its lease)."""
        if slots:
            self.store.release_limit_slots(slots)

    def dead_letter_queue(self, record: QueueRecord) -> QueueRecord | None:
        policy = record.attributes.redrive_policy
        if policy is None:
            return None
        try:
            return self.queues.get_queue_cached(policy.dead_letter_queue)
        except QueueNotFound:
            return None

    def reject(self, record: QueueRecord, dlq: QueueRecord,
               items: Sequence[tuple[Held, str]]) -> list[bool]:
        """Poison messages to the DLQ now, each with its reason."""
        moved = self.store.reject_messages(
            record.id, [Rejection(h.receipt, error[:4000]) for h, error in items], dlq.id,
            dlq.attributes.retention_s * 1000, self.clock.now_ms())
        return moved

    @staticmethod
    def token() -> int:
        return _tokens.getrandbits(62)
