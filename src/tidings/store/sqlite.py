"""The embedded SQLite store: one file, WAL, one writer, no server.

Durability: WAL with `synchronous=NORMAL`. A committed transaction survives the process
being killed (-9) at any point, because the WAL is in the OS page cache before COMMIT
returns; only a power loss or kernel crash can lose the last few commits. Users who need
that too set `TIDINGS_SQLITE_SYNCHRONOUS=FULL` (an fsync per commit).

All access goes through one connection guarded by a lock: SQLite has one writer anyway,
and one connection keeps its page cache warm. Writers in other processes (the CLI next to
`tidings serve`) wait on `busy_timeout`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tidings.errors import ConflictError, QueueNotFound, StoreUnavailable
from tidings.model.messages import NewMessage, encode_attributes
from tidings.model.queues import FIFO_DEDUP_WINDOW_MS, QueueAttributes
from tidings.model.receipts import Receipt
from tidings.model.states import MoveTaskStatus
from tidings.store.base import (
    JobAck,
    MoveTask,
    QueueCounts,
    QueueRecord,
    ReceiveOutcome,
    ReceiveParams,
    StoredMessage,
    StoredSend,
    VisibilityChange,
)
from tidings.store.migrate import migrate_sqlite
from tidings.store.sqlfiles import queries
from tidings.store.sqlite_campaigns import SQLiteCampaigns
from tidings.store.sqlite_email import SQLiteEmail
from tidings.store.sqlite_schedules import SQLiteSchedules

Q = queries("sqlite")


def _ids(ids: Sequence[int]) -> str:
    return json.dumps(list(ids))


class SQLiteStore(SQLiteSchedules, SQLiteEmail, SQLiteCampaigns):
    max_concurrency = 1

    def __init__(self, path: str, *, now: int, synchronous: str | None = None) -> None:
        self.path = path
        self.url = f"sqlite:///{path}"
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        try:
            self._conn = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, timeout=30.0
            )
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open SQLite database {path!r}: {exc}") from exc
        sync = (synchronous or os.environ.get("TIDINGS_SQLITE_SYNCHRONOUS", "NORMAL")).upper()
        if sync not in ("NORMAL", "FULL", "EXTRA"):
            sync = "NORMAL"
        for pragma in (
            "PRAGMA journal_mode=WAL",
            f"PRAGMA synchronous={sync}",
            "PRAGMA busy_timeout=30000",
            "PRAGMA cache_size=-32000",  # 32 MB: bounded, so RSS does not follow queue depth
            "PRAGMA temp_store=MEMORY",
        ):
            self._conn.execute(pragma)
        with self._lock:
            migrate_sqlite(self._conn, now)

    # plumbing -------------------------------------------------------------------------------

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One IMMEDIATE transaction: takes the write lock up front, so no upgrade deadlock."""
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _one(self, sql: str, args: Sequence[Any] = ()) -> Any:
        with self._lock:
            return self._conn.execute(sql, args).fetchone()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def get_or_create_secret(self, key: str, make: bytes) -> bytes:
        with self._tx() as conn:
            conn.execute(Q["put_meta_if_absent"], (key, make))
            row = conn.execute(Q["get_meta"], (key,)).fetchone()
        return bytes(row[0])

    # queues -----------------------------------------------------------------------------------

    @staticmethod
    def _queue(row: Sequence[Any]) -> QueueRecord:
        return QueueRecord(
            id=row[0],
            name=row[1],
            attributes=QueueAttributes.from_json(json.loads(row[2])),
            created_at=row[3],
            modified_at=row[4],
            purged_at=row[5],
        )

    def create_queue(self, name: str, attributes: QueueAttributes, now: int) -> QueueRecord:
        doc = json.dumps(attributes.to_json(), sort_keys=True)
        with self._tx() as conn:
            row = conn.execute(Q["queue_columns"] + " WHERE name = ?", (name,)).fetchone()
            if row is not None:
                existing = self._queue(row)
                if existing.attributes.merged(tags={}) != attributes.merged(tags={}):
                    raise ConflictError(
                        f"A queue named {name!r} already exists with different attributes"
                    )
                return existing
            queue_id = conn.execute(
                Q["insert_queue"], (name, int(attributes.fifo), doc, now, now)
            ).fetchone()[0]
        return QueueRecord(queue_id, name, attributes, now, now)

    def get_queue(self, name: str) -> QueueRecord:
        row = self._one(Q["queue_columns"] + " WHERE name = ?", (name,))
        if row is None:
            raise QueueNotFound(name)
        return self._queue(row)

    def get_queue_by_id(self, queue_id: int) -> QueueRecord:
        row = self._one(Q["queue_columns"] + " WHERE id = ?", (queue_id,))
        if row is None:
            raise QueueNotFound(str(queue_id))
        return self._queue(row)

    def list_queues(self, prefix: str, after: str | None, limit: int) -> list[QueueRecord]:
        # Prefix match by range (name >= prefix AND name < prefix + U+10FFFF) rather than
        # LIKE, whose wildcards a queue name may not contain but a prefix could.
        sql = (Q["queue_columns"]
               + " WHERE name >= ? AND name < ? AND name > ? ORDER BY name LIMIT ?")
        with self._lock:
            rows = self._conn.execute(
                sql, (prefix, prefix + "\U0010ffff", after or "", limit)
            ).fetchall()
        return [self._queue(r) for r in rows]

    def update_queue(self, name: str, attributes: QueueAttributes, now: int) -> QueueRecord:
        doc = json.dumps(attributes.to_json(), sort_keys=True)
        with self._tx() as conn:
            if conn.execute(Q["update_queue"], (doc, now, name)).rowcount == 0:
                raise QueueNotFound(name)
            row = conn.execute(Q["queue_columns"] + " WHERE name = ?", (name,)).fetchone()
        return self._queue(row)

    def delete_queue(self, name: str) -> None:
        with self._tx() as conn:
            row = conn.execute("SELECT id FROM queues WHERE name = ?", (name,)).fetchone()
            if row is None:
                raise QueueNotFound(name)
            for query in ("delete_queue_messages", "delete_queue_dedup", "delete_queue_jobs",
                          "delete_queue"):
                conn.execute(Q[query], (row[0],))

    def purge_queue(self, queue_id: int, now: int) -> int:
        with self._tx() as conn:
            deleted = conn.execute(Q["delete_queue_messages"], (queue_id,)).rowcount
            conn.execute(Q["purge_queue"], (now, queue_id))
        return int(deleted)

    def dead_letter_sources(self, dlq_name: str) -> list[QueueRecord]:
        with self._lock:
            rows = self._conn.execute(
                Q["queue_columns"]
                + " WHERE json_extract(attributes, '$.redrive_policy.dead_letter_queue') = ?"
                " ORDER BY name",
                (dlq_name,),
            ).fetchall()
        return [self._queue(r) for r in rows]

    def queue_counts(self, queue_id: int, now: int) -> QueueCounts:
        with self._lock:
            total_row = self._conn.execute(Q["queue_total"], (queue_id,)).fetchone()
            in_flight, delayed = self._conn.execute(
                Q["not_visible_counts"], (queue_id, now)
            ).fetchone()
        total = total_row[0] if total_row else 0
        return QueueCounts(max(total - in_flight - delayed, 0), in_flight, delayed)

    # messages -----------------------------------------------------------------------------------

    def send_messages(
        self, queue_id: int, messages: Sequence[NewMessage], *, fifo: bool, now: int
    ) -> list[StoredSend]:
        with self._tx() as conn:
            return self._write_messages(conn, queue_id, messages, fifo, now)

    @staticmethod
    def _write_messages(conn: sqlite3.Connection, queue_id: int,
                        messages: Sequence[NewMessage], fifo: bool, now: int) -> list[StoredSend]:
        """Insert inside the caller's transaction (sends, and firings of schedules)."""
        if not fifo:  # no dedup lookups: one executemany
            conn.executemany(Q["insert_message"], [
                (queue_id, m.message_id, m.body, m.md5_body, encode_attributes(m.attributes),
                 m.md5_attributes, m.visible_at, m.sent_at, m.expires_at, m.group_id,
                 m.deduplication_id) for m in messages])
            conn.execute(Q["add_count"], (len(messages), queue_id))
            return [StoredSend(m.message_id, None, False) for m in messages]
        out: list[StoredSend] = []
        stored = 0
        for m in messages:
            if m.deduplication_id is not None:
                dup = conn.execute(Q["find_dedup"], (queue_id, m.deduplication_id, now)).fetchone()
                if dup is not None:
                    out.append(StoredSend(dup[0], dup[1], True))
                    continue
            cur = conn.execute(
                Q["insert_message"],
                (queue_id, m.message_id, m.body, m.md5_body, encode_attributes(m.attributes),
                 m.md5_attributes, m.visible_at, m.sent_at, m.expires_at, m.group_id,
                 m.deduplication_id),
            )
            stored += 1
            seq = cur.lastrowid
            if m.deduplication_id is not None:
                conn.execute(Q["put_dedup"], (queue_id, m.deduplication_id, m.message_id, seq,
                                              now + FIFO_DEDUP_WINDOW_MS))
            out.append(StoredSend(m.message_id, seq, False))
        if stored:
            conn.execute(Q["add_count"], (stored, queue_id))
        return out

    def receive_messages(self, params: ReceiveParams) -> ReceiveOutcome:
        p = params
        leased: list[StoredMessage] = []
        dead = 0
        with self._tx() as conn:
            # Loop only when some candidates went to the DLQ instead: each pass removes
            # them from the queue, so it ends.
            while len(leased) < p.max_messages:
                want = p.max_messages - len(leased)
                if p.fifo:
                    rows = conn.execute(
                        Q["receive_candidates_fifo"], (p.queue_id, p.now, p.now, p.now, want)
                    ).fetchall()
                else:
                    rows = conn.execute(
                        Q["receive_candidates"], (p.queue_id, p.now, p.now, want)
                    ).fetchall()
                if not rows:
                    break
                exhausted = len(rows) < want
                poison = {
                    r[0] for r in rows
                    if p.max_receive_count is not None and r[1] >= p.max_receive_count
                }
                if poison and p.dead_letter_queue_id is not None:
                    conn.execute(
                        Q["dead_letter_messages"],
                        (p.dead_letter_queue_id, p.now, p.dead_letter_retention_ms or 0,
                         _ids(sorted(poison))),
                    )
                    conn.execute(Q["add_count"], (-len(poison), p.queue_id))
                    conn.execute(Q["add_count"], (len(poison), p.dead_letter_queue_id))
                    dead += len(poison)
                    rows = [r for r in rows if r[0] not in poison]
                else:
                    poison = set()
                if rows:
                    returned = conn.execute(
                        Q["lease_messages"],
                        (p.now + p.visibility_ms, p.lease_token, p.now,
                         _ids([r[0] for r in rows]), p.now),
                    ).fetchall()
                    leased.extend(self._stored(r, p.fifo) for r in returned)
                if exhausted or not poison:
                    break
        leased.sort(key=lambda m: m.row_id)
        return ReceiveOutcome(leased, dead)

    @staticmethod
    def _stored(r: Sequence[Any], fifo: bool) -> StoredMessage:
        return StoredMessage(
            row_id=r[0], lease_token=r[1], message_id=r[2], body=r[3], md5_body=r[4],
            attributes_json=r[5], md5_attributes=r[6], receive_count=r[7],
            first_received_at=r[8], sent_at=r[9], group_id=r[10], deduplication_id=r[11],
            sequence_number=r[0] if fifo else None, source_queue_id=r[12], last_error=r[13],
        )

    def delete_messages(self, queue_id: int, receipts: Sequence[Receipt]) -> list[bool]:
        out = []
        with self._tx() as conn:
            for rc in receipts:
                cur = conn.execute(Q["delete_message"], (rc.row_id, queue_id, rc.lease_token))
                out.append(cur.rowcount > 0)
            if any(out):
                conn.execute(Q["add_count"], (-sum(out), queue_id))
        return out

    def change_visibility(
        self, queue_id: int, changes: Sequence[VisibilityChange], now: int
    ) -> list[bool]:
        with self._tx() as conn:
            return [
                conn.execute(
                    Q["change_visibility"],
                    (c.visible_at, c.error, c.receipt.row_id, queue_id, c.receipt.lease_token, now),
                ).rowcount > 0
                for c in changes
            ]

    def complete_jobs(self, queue_id: int, acks: Sequence[JobAck], now: int) -> list[bool]:
        out = []
        with self._tx() as conn:
            for ack in acks:
                deleted = conn.execute(
                    Q["delete_message"], (ack.receipt.row_id, queue_id, ack.receipt.lease_token)
                ).rowcount > 0
                if deleted:
                    conn.execute(Q["put_job_result"], (queue_id, ack.job_id, now))
                out.append(deleted)
            if any(out):
                conn.execute(Q["add_count"], (-sum(out), queue_id))
        return out

    def jobs_done(self, queue_id: int, job_ids: Sequence[str]) -> set[str]:
        with self._lock:
            rows = self._conn.execute(Q["job_done"], (queue_id, json.dumps(list(job_ids))))
            return {r[0] for r in rows}

    def next_visible_at(self, queue_id: int, now: int) -> int | None:
        row = self._one(Q["next_visible_at"], (queue_id, now))
        return None if row is None or row[0] is None else int(row[0])

    # maintenance -----------------------------------------------------------------------------

    def expire_messages(self, now: int, limit: int) -> int:
        with self._tx() as conn:
            rows = conn.execute(Q["expired_messages"], (now, limit)).fetchall()
            if rows:
                conn.execute(Q["delete_by_ids"], (_ids([r[0] for r in rows]),))
                per_queue: dict[int, int] = {}
                for _, queue_id in rows:
                    per_queue[queue_id] = per_queue.get(queue_id, 0) + 1
                for queue_id, n in per_queue.items():
                    conn.execute(Q["add_count"], (-n, queue_id))
            conn.execute(Q["expire_dedup"], (now,))
        return len(rows)

    def forget_jobs(self, done_before: int, limit: int) -> int:
        with self._tx() as conn:
            return int(conn.execute(Q["forget_jobs"], (done_before, limit)).rowcount)

    def move_messages(
        self, source_queue_id: int, destination_queue_id: int | None, limit: int, now: int
    ) -> int:
        with self._tx() as conn:
            rows = conn.execute(Q["movable_messages"], (source_queue_id, limit)).fetchall()
            moved: dict[int, int] = {}
            for row_id, origin in rows:
                target = destination_queue_id if destination_queue_id is not None else origin
                if target is None:
                    continue  # never dead-lettered: no origin to return to; stays put
                exists = conn.execute("SELECT 1 FROM queues WHERE id = ?", (target,)).fetchone()
                if exists is None:
                    continue  # its source queue was deleted since
                conn.execute(Q["move_message"], (target, now, row_id))
                moved[target] = moved.get(target, 0) + 1
            for target, n in moved.items():
                conn.execute(Q["add_count"], (n, target))
            if moved:
                conn.execute(Q["add_count"], (-sum(moved.values()), source_queue_id))
        return sum(moved.values())

    @staticmethod
    def _task(r: Sequence[Any]) -> MoveTask:
        return MoveTask(r[0], r[1], r[2], r[3], MoveTaskStatus(r[4]), r[5], r[6], r[7], r[8])

    def create_move_task(self, task: MoveTask) -> None:
        with self._tx() as conn:
            conn.execute(
                Q["insert_move_task"],
                (task.handle, task.source_queue_id, task.destination_queue_id, task.max_per_second,
                 task.status.value, task.moved, task.to_move, task.started_at, task.failure_reason),
            )

    def list_move_tasks(self, source_queue_id: int, limit: int) -> list[MoveTask]:
        with self._lock:
            rows = self._conn.execute(Q["list_move_tasks"], (source_queue_id, limit)).fetchall()
        return [self._task(r) for r in rows]

    def running_move_tasks(self) -> list[MoveTask]:
        with self._lock:
            rows = self._conn.execute(Q["running_move_tasks"]).fetchall()
        return [self._task(r) for r in rows]

    def update_move_task(
        self, handle: str, *, moved: int, status: MoveTaskStatus, failure_reason: str | None = None
    ) -> bool:
        with self._tx() as conn:
            return bool(
                conn.execute(
                    Q["update_move_task"], (moved, status.value, failure_reason, handle)
                ).rowcount
            )
