"""Queues and messages: the `QueueStore` half of `SqlStore`.

Every write to a message is one of the operations of `tidings.model.states.MessageOp`,
each a method here whose SQL guards the states it applies to (a compare-and-set on the
lease for in-flight messages, on `visible_at <= now` for visible ones).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tidings.errors import ConflictError, QueueNotFound
from tidings.model.messages import NewMessage, StoredMessage
from tidings.model.queues import MoveTask, QueueAttributes, QueueCounts, QueueRecord
from tidings.model.receipts import Receipt
from tidings.model.states import MOVE_TASKS, JobKeyState, MoveTaskStatus
from tidings.notify.base import SUBSCRIPTIONS_CHANNEL, queue_channel
from tidings.store import rows
from tidings.store.base import (
    JobAck,
    JobLease,
    ReceiveOutcome,
    ReceiveParams,
    Rejection,
    Reservation,
    StoredSend,
    VisibilityChange,
)
from tidings.store.driver import Conn
from tidings.store.sqlbase import FIFO_RECEIVE_LOCK, MAINTENANCE_LOCK, SqlBase, message_row


def _attributes_doc(attributes: QueueAttributes) -> str:
    return json.dumps(attributes.to_json(), sort_keys=True)


class SqlQueues(SqlBase):
    def get_or_create_secret(self, key: str, make: bytes) -> bytes:
        # Read first: once there (every open but the first), no write, so a command that
        # only reads can open a database this user may not write.
        found = self._one("get_meta", (key,))
        if found is not None:
            return bytes(found[0])
        with self.driver.tx() as conn:
            conn.execute(self.q["put_meta_if_absent"], (key, make))
            return bytes(conn.execute(self.q["get_meta"], (key,)).fetchone()[0])

    # queues -----------------------------------------------------------------------------

    def create_queue(self, name: str, attributes: QueueAttributes, now: int) -> QueueRecord:
        with self.driver.tx() as conn:
            row = conn.execute(self.q["insert_queue"], (
                name, attributes.fifo, _attributes_doc(attributes), now, now)).fetchone()
            if row is not None:
                return QueueRecord(row[0], name, attributes, now, now)
            existing = rows.queue_record(conn.execute(self.q["queue_by_name"],
                                                      (name,)).fetchone())
        if existing.attributes.merged(tags={}) != attributes.merged(tags={}):
            raise ConflictError(f"A queue named {name!r} already exists with different attributes")
        return existing

    def get_queue(self, name: str) -> QueueRecord:
        return rows.queue_record(self._found("queue_by_name", (name,), QueueNotFound, name))

    def get_queue_by_id(self, queue_id: int) -> QueueRecord:
        return rows.queue_record(
            self._found("queue_by_id", (queue_id,), QueueNotFound, str(queue_id)))

    def list_queues(self, prefix: str, after: str | None, limit: int) -> list[QueueRecord]:
        return [rows.queue_record(r) for r in self._all(
            "list_queues", (*rows.prefix_range(prefix), after or "", limit))]

    def update_queue(self, name: str, attributes: QueueAttributes, now: int) -> QueueRecord:
        with self.driver.tx() as conn:
            if conn.execute(self.q["update_queue"],
                            (_attributes_doc(attributes), now, name)).rowcount == 0:
                raise QueueNotFound(name)
            return rows.queue_record(conn.execute(self.q["queue_by_name"], (name,)).fetchone())

    def delete_queue(self, name: str) -> None:
        with self.driver.tx() as conn:
            row = conn.execute(self.q["queue_by_name"], (name,)).fetchone()
            if row is None:
                raise QueueNotFound(name)
            for query in ("delete_queue_messages", "delete_queue_dedup", "delete_queue_jobs",
                          "delete_queue_counts", "delete_queue"):
                conn.execute(self.q[query], (row[0],))
            # Its push subscription goes with it, in the same transaction: left behind, it
            # would be pushed by no one and listed by nothing (migration 0020 removes
            # those an older release left).
            sub = conn.execute(self.q["push_delete"], (row[0],)).fetchone()
            if sub is not None:
                conn.execute(self.q["push_delete_slots"], (sub[0],))
                conn.execute(self.q["push_delete_failures"], (sub[0],))
                self.driver.notify(conn, SUBSCRIPTIONS_CHANNEL)

    def purge_queue(self, queue_id: int, now: int) -> int:
        with self.driver.tx() as conn:
            deleted = conn.execute(self.q["delete_queue_messages"], (queue_id,)).rowcount
            conn.execute(self.q["delete_queue_counts"], (queue_id,))
            conn.execute(self.q["set_purged_at"], (now, queue_id))
        return int(deleted)

    def dead_letter_sources(self, dlq_name: str) -> list[QueueRecord]:
        return [rows.queue_record(r) for r in self._all("dead_letter_sources", (dlq_name,))]

    def queue_counts(self, queue_id: int, now: int) -> QueueCounts:
        with self.driver.read() as conn:
            total = conn.execute(self.q["queue_total"], (queue_id,)).fetchone()[0]
            in_flight, delayed = conn.execute(self.q["not_visible_counts"],
                                              (queue_id, now)).fetchone()
        return QueueCounts(max(int(total) - in_flight - delayed, 0), in_flight, delayed)

    # messages ---------------------------------------------------------------------------

    def send_messages(self, queue_id: int, messages: Sequence[NewMessage], *, fifo: bool,
                      now: int, connection: Any = None) -> list[StoredSend]:
        if connection is not None:
            with self.driver.borrow(connection) as conn:
                return self.write_messages(conn, queue_id, messages, fifo, now)
        if fifo:
            with self.driver.tx() as conn:
                return self.write_messages(conn, queue_id, messages, fifo, now)
        if messages:
            self.driver.send_standard(queue_id, [message_row(queue_id, m) for m in messages],
                                      queue_channel(queue_id))
        return [StoredSend(m.message_id, None, False) for m in messages]

    def receive_messages(self, params: ReceiveParams) -> ReceiveOutcome:
        p = params
        if not p.fifo and p.max_receive_count is None:
            # The common case is one statement: UPDATE … WHERE id IN (SELECT … LIMIT n)
            # RETURNING, atomic on its own.
            with self.driver.auto() as conn:
                found = conn.execute(self.q["receive_simple"], {
                    "until": p.now + p.visibility_ms, "token": p.lease_token, "now": p.now,
                    "queue": p.queue_id, "limit": p.max_messages}).fetchall()
            leased = [rows.stored_message(r, False) for r in found]
            leased.sort(key=lambda m: m.row_id)
            return ReceiveOutcome(leased, 0)
        with self.driver.tx() as conn:
            if p.fifo:
                self.driver.lock(conn, FIFO_RECEIVE_LOCK + p.queue_id)
            leased, dead = self._receive_in(conn, p)
        leased.sort(key=lambda m: m.row_id)
        return ReceiveOutcome(leased, dead)

    def _receive_in(self, conn: Conn, p: ReceiveParams) -> tuple[list[StoredMessage], int]:
        """Take candidates; those already at maxReceiveCount go to the DLQ instead. Loops
        only when some went to the DLQ: each pass removes them, so it ends."""
        leased: list[StoredMessage] = []
        dead = 0
        candidates = self.q["receive_candidates_fifo" if p.fifo else "receive_candidates"]
        while len(leased) < p.max_messages:
            want = p.max_messages - len(leased)
            found = conn.execute(candidates, {"queue": p.queue_id, "now": p.now,
                                              "limit": want}).fetchall()
            if not found:
                break
            poison = {row_id for row_id, count in found
                      if p.max_receive_count is not None and count >= p.max_receive_count}
            if poison and p.dead_letter_queue_id is not None:
                self._dead_letter(conn, p, p.dead_letter_queue_id, sorted(poison))
                dead += len(poison)
            else:
                poison = set()
            ids = [row_id for row_id, _ in found if row_id not in poison]
            if ids:
                returned = conn.execute(self.q["lease_messages"], (
                    p.now + p.visibility_ms, p.lease_token, p.now, self.driver.array(ids),
                    p.now)).fetchall()
                leased.extend(rows.stored_message(r, p.fifo) for r in returned)
            if len(found) < want or not poison:
                break
        return leased, dead

    def _dead_letter(self, conn: Conn, p: ReceiveParams, dlq_id: int, ids: list[int]) -> None:
        conn.execute(self.q["dead_letter_messages"], (
            dlq_id, p.now, p.dead_letter_retention_ms or 0, self.driver.array(ids)))
        self._add_count(conn, p.queue_id, -len(ids))
        self._add_count(conn, dlq_id, len(ids))
        self.driver.notify(conn, queue_channel(dlq_id))

    def delete_messages(self, queue_id: int, receipts: Sequence[Receipt]) -> list[bool]:
        gone = self.driver.delete_receipts(queue_id,
                                           [(r.row_id, r.lease_token) for r in receipts])
        return [(r.row_id, r.lease_token) in gone for r in receipts]

    def change_visibility(self, queue_id: int, changes: Sequence[VisibilityChange],
                          now: int) -> list[bool]:
        with self.driver.tx() as conn:
            done = self.driver.run_each(conn, "change_visibility", [
                (c.receipt.row_id, c.receipt.lease_token, c.visible_at, c.error, queue_id, now)
                for c in changes], key=2)
            if any(ok and c.visible_at <= now for ok, c in zip(done, changes, strict=True)):
                self.driver.notify(conn, queue_channel(queue_id))
        return done

    def complete_jobs(self, queue_id: int, acks: Sequence[JobAck], now: int) -> list[bool]:
        # Each handler ran to success, whether or not its lease still held: every key is
        # marked done, so a copy someone else received meanwhile is acknowledged unrun.
        gone = self.driver.finish_jobs(queue_id, [
            (a.receipt.row_id, a.receipt.lease_token, a.job_id) for a in acks], now)
        return [(a.receipt.row_id, a.receipt.lease_token) in gone for a in acks]

    def reserve_jobs(self, queue_id: int, leases: Sequence[JobLease], until: int,
                     now: int) -> list[Reservation]:
        answers = self.driver.reserve_job_keys(
            queue_id, [(lease.job_key, lease.token) for lease in leases], until, now)
        return [Reservation.RESERVED if reserved else
                Reservation.DONE if state == JobKeyState.DONE else Reservation.BUSY
                for reserved, state in answers]

    def extend_jobs(self, queue_id: int, leases: Sequence[JobLease], until: int) -> None:
        with self.driver.tx() as conn:
            self.driver.run_each(conn, "extend_job", [
                (lease.job_key, queue_id, lease.token, until) for lease in leases])

    def release_jobs(self, queue_id: int, leases: Sequence[JobLease]) -> None:
        with self.driver.tx() as conn:
            self.driver.run_each(conn, "release_job", [
                (lease.job_key, queue_id, lease.token) for lease in leases])

    def reject_messages(self, queue_id: int, rejections: Sequence[Rejection],
                        dead_letter_queue_id: int, dead_letter_retention_ms: int,
                        now: int) -> list[bool]:
        with self.driver.tx() as conn:
            moved = self.driver.run_each(conn, "reject_message", [
                (r.receipt.row_id, r.receipt.lease_token, queue_id, r.error,
                 dead_letter_queue_id, now, dead_letter_retention_ms) for r in rejections],
                key=2)
            if any(moved):
                self._add_count(conn, queue_id, -sum(moved))
                self._add_count(conn, dead_letter_queue_id, sum(moved))
                self.driver.notify(conn, queue_channel(dead_letter_queue_id))
        return moved

    def peek_messages(self, queue_id: int, after: tuple[int, int] | None,
                      limit: int) -> list[StoredMessage]:
        after_visible, after_id = after or (-(2**62), 0)
        return [rows.stored_message(r, False) for r in self._all("peek_messages", {
            "queue": queue_id, "after_visible": after_visible, "after_id": after_id,
            "limit": limit})]

    def cancel_message(self, queue_id: int, message_id: str, visible_at: int, now: int,
                       ) -> bool:
        with self.driver.tx() as conn:
            gone = conn.execute(self.q["cancel_message"],
                                (queue_id, visible_at, message_id, now)).fetchone()
            if gone is not None:
                self._add_count(conn, queue_id, -1)
        return gone is not None

    def next_visible_at(self, queue_id: int, now: int) -> int | None:
        row = self._one("next_visible_at", (queue_id, now))
        return None if row is None or row[0] is None else int(row[0])

    # maintenance ------------------------------------------------------------------------

    def expire_messages(self, now: int, limit: int) -> int:
        with self.driver.tx() as conn:
            if not self.driver.try_lock(conn, MAINTENANCE_LOCK):
                return 0  # another node is sweeping right now
            expired = conn.execute(self.q["expire_messages"], (now, limit)).fetchall()
            per_queue: dict[int, int] = {}
            for (queue_id,) in expired:
                per_queue[queue_id] = per_queue.get(queue_id, 0) + 1
            for queue_id, n in per_queue.items():
                self._add_count(conn, queue_id, -n)
            conn.execute(self.q["expire_dedup"], (now,))
        return len(expired)

    def forget_jobs(self, done_before: int, limit: int) -> int:
        with self.driver.tx() as conn:
            if not self.driver.try_lock(conn, MAINTENANCE_LOCK):
                return 0
            return sum(int(conn.execute(self.q[query], (done_before, limit)).rowcount)
                       for query in ("forget_done_jobs", "forget_lapsed_jobs"))

    def move_messages(self, source_queue_id: int, destination_queue_id: int | None,
                      limit: int, now: int) -> int:
        with self.driver.tx() as conn:
            found = conn.execute(self.q["movable_messages"], (source_queue_id, limit)).fetchall()
            return self._move_found(conn, source_queue_id, destination_queue_id, found, now)

    def move_selected_messages(self, source_queue_id: int, destination_queue_id: int | None,
                               row_ids: Sequence[int], now: int) -> int:
        with self.driver.tx() as conn:
            found = [row for row_id in row_ids for row in conn.execute(
                self.q["movable_message"], (source_queue_id, row_id)).fetchall()]
            return self._move_found(conn, source_queue_id, destination_queue_id, found, now)

    def _move_found(self, conn: Conn, source_queue_id: int, destination_queue_id: int | None,
                    found: Sequence[Any], now: int) -> int:
        """Move (row id, origin queue) rows inside the caller's transaction."""
        moved: dict[int, int] = {}
        exists: dict[int, bool] = {}
        for row_id, origin in found:
            target = destination_queue_id if destination_queue_id is not None else origin
            if target is None:
                continue  # never dead-lettered: no origin to return to; stays put
            if target not in exists:  # its source queue may have been deleted since
                exists[target] = conn.execute(self.q["queue_by_id"],
                                              (target,)).fetchone() is not None
            if not exists[target]:
                continue
            conn.execute(self.q["move_message"], (target, now, row_id))
            moved[target] = moved.get(target, 0) + 1
        for target, n in moved.items():
            self._add_count(conn, target, n)
            self.driver.notify(conn, queue_channel(target))
        if moved:
            self._add_count(conn, source_queue_id, -sum(moved.values()))
        return sum(moved.values())

    # message move tasks -----------------------------------------------------------------

    def create_move_task(self, task: MoveTask) -> None:
        with self.driver.auto() as conn:
            conn.execute(self.q["insert_move_task"], (
                task.handle, task.source_queue_id, task.destination_queue_id,
                task.max_per_second, task.status.value, task.moved, task.to_move,
                task.started_at, task.failure_reason))

    def list_move_tasks(self, source_queue_id: int, limit: int) -> list[MoveTask]:
        return [rows.move_task(r) for r in self._all("list_move_tasks", (source_queue_id, limit))]

    def active_move_tasks(self) -> list[MoveTask]:
        return [rows.move_task(r) for r in self._all("active_move_tasks")]

    def add_move_task_progress(self, handle: str, moved: int) -> None:
        with self.driver.auto() as conn:
            conn.execute(self.q["add_move_task_progress"], (moved, handle))

    def set_move_task_status(self, handle: str, current: MoveTaskStatus,
                             new: MoveTaskStatus, failure_reason: str | None = None) -> None:
        MOVE_TASKS.check(current, new)
        with self.driver.auto() as conn:
            changed = conn.execute(self.q["set_move_task_status"], (
                new.value, failure_reason, handle, current.value)).rowcount
        if not changed:
            raise ConflictError(f"message move task {handle} is no longer {current.value}")
