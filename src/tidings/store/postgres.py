"""The PostgreSQL store: many tidings nodes share one database and split the work.

psycopg 3 with a connection pool (psycopg_pool): the maintained driver, with COPY, server
-side binding and a pool that reconnects by itself after a server restart. Receives and
claims use `FOR UPDATE SKIP LOCKED`, so nodes take disjoint rows instead of queueing on
each other's locks; every write transaction that makes something receivable or due also
issues `pg_notify('tidings', channel)`, which the `PostgresNotifier` of every node turns
into a local wake-up (a lost notification only costs the 0.5-1 s fallback poll).

A server that cannot be reached raises `StoreUnavailable`; the engine's loops log it,
back off and retry, so a PostgreSQL restart pauses a node rather than killing it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from tidings.errors import ConflictError, QueueNotFound, StoreUnavailable
from tidings.model.messages import NewMessage, encode_attributes
from tidings.model.queues import FIFO_DEDUP_WINDOW_MS, QueueAttributes
from tidings.model.receipts import Receipt
from tidings.model.states import MoveTaskStatus
from tidings.notify.base import queue_channel
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
from tidings.store.migrate import migrate_postgres
from tidings.store.postgres_campaigns import PostgresCampaigns
from tidings.store.postgres_email import PostgresEmail
from tidings.store.postgres_schedules import PostgresSchedules
from tidings.store.sqlfiles import queries

Q = queries("postgres")
COUNT_SHARDS = 8


class PostgresStore(PostgresSchedules, PostgresEmail, PostgresCampaigns):
    def __init__(self, url: str, *, now: int, pool_size: int = 8) -> None:
        self.url = url
        self.max_concurrency = pool_size
        try:
            self._pool = ConnectionPool(url, min_size=1, max_size=pool_size, open=True,
                                        timeout=30.0, kwargs={"autocommit": True},
                                        name="tidings")
            self._pool.wait(timeout=30.0)
            with self._pool.connection() as conn:
                migrate_postgres(conn, now)
        except (psycopg.OperationalError, psycopg.errors.Error) as exc:
            raise StoreUnavailable(f"cannot use PostgreSQL at {_safe(url)}: {exc}") from exc
        except TimeoutError as exc:
            raise StoreUnavailable(f"cannot reach PostgreSQL at {_safe(url)}") from exc

    # plumbing -------------------------------------------------------------------------------

    @contextmanager
    def _tx(self) -> Iterator[psycopg.Connection[Any]]:
        try:
            with self._pool.connection() as conn, conn.transaction():
                yield conn
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"PostgreSQL is unavailable: {exc}") from exc
        except TimeoutError as exc:  # no connection could be had from the pool in time
            raise StoreUnavailable("PostgreSQL is unavailable: no connection") from exc

    @contextmanager
    def _auto(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection whose statements each commit on their own: one round trip for a
        read, or for a write that is a single statement."""
        try:
            with self._pool.connection() as conn:
                yield conn
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"PostgreSQL is unavailable: {exc}") from exc
        except TimeoutError as exc:
            raise StoreUnavailable("PostgreSQL is unavailable: no connection") from exc

    def _one(self, sql: str, args: Sequence[Any] = ()) -> Any:
        with self._auto() as conn:
            return conn.execute(sql, args).fetchone()

    def _all(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        with self._auto() as conn:
            return conn.execute(sql, args).fetchall()

    @staticmethod
    def _notify(conn: psycopg.Connection[Any], channel: str) -> None:
        conn.execute(Q["notify"], (channel,))

    @staticmethod
    def _add_count(conn: psycopg.Connection[Any], queue_id: int, n: int) -> None:
        conn.execute(Q["add_count"], (queue_id, random.randrange(COUNT_SHARDS), n))

    def close(self) -> None:
        self._pool.close()

    def get_or_create_secret(self, key: str, make: bytes) -> bytes:
        with self._tx() as conn:
            conn.execute(Q["put_meta_if_absent"], (key, make))
            row = conn.execute(Q["get_meta"], (key,)).fetchone()
        assert row is not None
        return bytes(row[0])

    # queues -----------------------------------------------------------------------------------

    @staticmethod
    def _queue(row: Sequence[Any]) -> QueueRecord:
        return QueueRecord(id=row[0], name=row[1],
                           attributes=QueueAttributes.from_json(json.loads(row[2])),
                           created_at=row[3], modified_at=row[4], purged_at=row[5])

    def create_queue(self, name: str, attributes: QueueAttributes, now: int) -> QueueRecord:
        doc = json.dumps(attributes.to_json(), sort_keys=True)
        with self._tx() as conn:
            row = conn.execute(Q["insert_queue"], (name, attributes.fifo, doc, now, now)).fetchone()
            if row is not None:
                return QueueRecord(row[0], name, attributes, now, now)
            existing = self._queue(_first(conn.execute(Q["queue_columns"] + " WHERE name = %s",
                                                       (name,))))
        if existing.attributes.merged(tags={}) != attributes.merged(tags={}):
            raise ConflictError(f"A queue named {name!r} already exists with different attributes")
        return existing

    def get_queue(self, name: str) -> QueueRecord:
        row = self._one(Q["queue_columns"] + " WHERE name = %s", (name,))
        if row is None:
            raise QueueNotFound(name)
        return self._queue(row)

    def get_queue_by_id(self, queue_id: int) -> QueueRecord:
        row = self._one(Q["queue_columns"] + " WHERE id = %s", (queue_id,))
        if row is None:
            raise QueueNotFound(str(queue_id))
        return self._queue(row)

    def list_queues(self, prefix: str, after: str | None, limit: int) -> list[QueueRecord]:
        rows = self._all(Q["queue_columns"] + ' WHERE starts_with(name, %s) AND name COLLATE "C"'
                         ' > %s ORDER BY name COLLATE "C" LIMIT %s', (prefix, after or "", limit))
        return [self._queue(r) for r in rows]

    def update_queue(self, name: str, attributes: QueueAttributes, now: int) -> QueueRecord:
        doc = json.dumps(attributes.to_json(), sort_keys=True)
        with self._tx() as conn:
            if conn.execute(Q["update_queue"], (doc, now, name)).rowcount == 0:
                raise QueueNotFound(name)
            row = _first(conn.execute(Q["queue_columns"] + " WHERE name = %s", (name,)))
        return self._queue(row)

    def delete_queue(self, name: str) -> None:
        with self._tx() as conn:
            row = conn.execute("SELECT id FROM queues WHERE name = %s", (name,)).fetchone()
            if row is None:
                raise QueueNotFound(name)
            for query in ("delete_queue_messages", "delete_queue_dedup", "delete_queue_jobs",
                          "delete_queue_counts", "delete_queue"):
                conn.execute(Q[query], (row[0],))

    def purge_queue(self, queue_id: int, now: int) -> int:
        with self._tx() as conn:
            deleted = conn.execute(Q["delete_queue_messages"], (queue_id,)).rowcount
            conn.execute(Q["delete_queue_counts"], (queue_id,))
            conn.execute(Q["purge_queue"], (now, queue_id))
        return int(deleted)

    def dead_letter_sources(self, dlq_name: str) -> list[QueueRecord]:
        rows = self._all(Q["queue_columns"] + " WHERE (attributes::jsonb -> 'redrive_policy' ->>"
                         " 'dead_letter_queue') = %s ORDER BY name", (dlq_name,))
        return [self._queue(r) for r in rows]

    def queue_counts(self, queue_id: int, now: int) -> QueueCounts:
        with self._tx() as conn:
            total = _first(conn.execute(Q["queue_total"], (queue_id,)))[0]
            in_flight, delayed = _first(conn.execute(Q["not_visible_counts"], (queue_id, now)))
        return QueueCounts(max(int(total) - in_flight - delayed, 0), in_flight, delayed)

    # messages -----------------------------------------------------------------------------------

    def send_messages(self, queue_id: int, messages: Sequence[NewMessage], *, fifo: bool,
                      now: int) -> list[StoredSend]:
        if fifo or not messages:
            with self._tx() as conn:
                return self._write_messages(conn, queue_id, messages, fifo, now)
        # Standard queues: one statement (insert, count, notify) that commits on its own:
        # one round trip and one WAL flush per send, whatever the batch size.
        cols: list[list[Any]] = [[] for _ in range(9)]
        for m in messages:
            for i, value in enumerate((m.message_id, m.body, m.md5_body,
                                       encode_attributes(m.attributes), m.md5_attributes,
                                       m.visible_at, m.sent_at, m.expires_at, m.group_id)):
                cols[i].append(value)
        with self._auto() as conn:
            conn.execute(Q["send_messages"], (queue_id, *cols, queue_id,
                                              random.randrange(COUNT_SHARDS),
                                              queue_channel(queue_id)))
        return [StoredSend(m.message_id, None, False) for m in messages]

    def _write_messages(self, conn: psycopg.Connection[Any], queue_id: int,
                        messages: Sequence[NewMessage], fifo: bool, now: int) -> list[StoredSend]:
        if not messages:
            return []
        out: list[StoredSend] = []
        if not fifo:
            rows = [(queue_id, m.message_id, m.body, m.md5_body, encode_attributes(m.attributes),
                     m.md5_attributes, m.visible_at, m.sent_at, m.expires_at, m.group_id,
                     m.deduplication_id) for m in messages]
            with conn.cursor() as cur:
                if len(rows) >= 50:  # COPY: the bulk path for firings of many schedules
                    with cur.copy(Q["copy_messages"]) as copy:
                        for row in rows:
                            copy.write_row(row)
                else:
                    cur.executemany(Q["insert_message"].replace(" RETURNING id", ""), rows)
            out = [StoredSend(m.message_id, None, False) for m in messages]
            stored = len(messages)
        else:
            stored = 0
            for m in messages:
                if m.deduplication_id is not None:
                    dup = conn.execute(Q["find_dedup"],
                                       (queue_id, m.deduplication_id, now)).fetchone()
                    if dup is not None:
                        out.append(StoredSend(dup[0], dup[1], True))
                        continue
                seq = _first(conn.execute(Q["insert_message"], (
                    queue_id, m.message_id, m.body, m.md5_body, encode_attributes(m.attributes),
                    m.md5_attributes, m.visible_at, m.sent_at, m.expires_at, m.group_id,
                    m.deduplication_id)))[0]
                stored += 1
                if m.deduplication_id is not None:
                    conn.execute(Q["put_dedup"], (queue_id, m.deduplication_id, m.message_id,
                                                  seq, now + FIFO_DEDUP_WINDOW_MS))
                out.append(StoredSend(m.message_id, seq, False))
        if stored:
            self._add_count(conn, queue_id, stored)
            self._notify(conn, queue_channel(queue_id))
        return out

    def receive_messages(self, params: ReceiveParams) -> ReceiveOutcome:
        p = params
        if not p.fifo and p.max_receive_count is None:
            with self._auto() as conn:
                rows = conn.execute(Q["receive_simple"], (
                    p.now + p.visibility_ms, p.lease_token, p.now, p.queue_id, p.now, p.now,
                    p.max_messages)).fetchall()
            return ReceiveOutcome(sorted((self._stored(r, False) for r in rows),
                                         key=lambda m: m.row_id), 0)
        leased: list[StoredMessage] = []
        dead = 0
        with self._tx() as conn:
            if p.fifo:
                conn.execute(Q["lock_fifo_queue"], (p.queue_id % 2**31,))
            while len(leased) < p.max_messages:
                want = p.max_messages - len(leased)
                if p.fifo:
                    rows = conn.execute(Q["receive_candidates_fifo"],
                                        (p.queue_id, p.now, p.now, p.now, want)).fetchall()
                else:
                    rows = conn.execute(Q["receive_candidates"],
                                        (p.queue_id, p.now, p.now, want)).fetchall()
                if not rows:
                    break
                exhausted = len(rows) < want
                poison = {r[0] for r in rows
                          if p.max_receive_count is not None and r[1] >= p.max_receive_count}
                if poison and p.dead_letter_queue_id is not None:
                    conn.execute(Q["dead_letter_messages"],
                                 (p.dead_letter_queue_id, p.now, p.dead_letter_retention_ms or 0,
                                  sorted(poison)))
                    self._add_count(conn, p.queue_id, -len(poison))
                    self._add_count(conn, p.dead_letter_queue_id, len(poison))
                    self._notify(conn, queue_channel(p.dead_letter_queue_id))
                    dead += len(poison)
                    rows = [r for r in rows if r[0] not in poison]
                else:
                    poison = set()
                if rows:
                    returned = conn.execute(Q["lease_messages"], (
                        p.now + p.visibility_ms, p.lease_token, p.now, [r[0] for r in rows],
                        p.now)).fetchall()
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
            sequence_number=r[0] if fifo else None, source_queue_id=r[12], last_error=r[13])

    def delete_messages(self, queue_id: int, receipts: Sequence[Receipt]) -> list[bool]:
        with self._auto() as conn:
            gone = {r[0] for r in conn.execute(Q["delete_messages"], (
                [rc.row_id for rc in receipts], [rc.lease_token for rc in receipts], queue_id,
                queue_id, random.randrange(COUNT_SHARDS))).fetchall()}
        return [rc.row_id in gone for rc in receipts]

    def change_visibility(self, queue_id: int, changes: Sequence[VisibilityChange],
                          now: int) -> list[bool]:
        with self._tx() as conn:
            out = [conn.execute(Q["change_visibility"], (
                c.visible_at, c.error, c.receipt.row_id, queue_id, c.receipt.lease_token, now,
            )).rowcount > 0 for c in changes]
            if any(ok and c.visible_at <= now for ok, c in zip(out, changes, strict=True)):
                self._notify(conn, queue_channel(queue_id))
        return out

    def complete_jobs(self, queue_id: int, acks: Sequence[JobAck], now: int) -> list[bool]:
        out = []
        with self._tx() as conn:
            for ack in acks:
                deleted = conn.execute(Q["delete_message"], (
                    ack.receipt.row_id, queue_id, ack.receipt.lease_token)).rowcount > 0
                if deleted:
                    conn.execute(Q["put_job_result"], (queue_id, ack.job_id, now))
                out.append(deleted)
            if any(out):
                self._add_count(conn, queue_id, -sum(out))
        return out

    def jobs_done(self, queue_id: int, job_ids: Sequence[str]) -> set[str]:
        return {r[0] for r in self._all(Q["job_done"], (queue_id, list(job_ids)))}

    def next_visible_at(self, queue_id: int, now: int) -> int | None:
        row = self._one(Q["next_visible_at"], (queue_id, now))
        return None if row is None or row[0] is None else int(row[0])

    # maintenance -----------------------------------------------------------------------------

    def expire_messages(self, now: int, limit: int) -> int:
        with self._tx() as conn:
            if not _first(conn.execute(Q["try_maintenance_lock"]))[0]:
                return 0  # another node is sweeping right now
            rows = conn.execute(Q["expire_messages"], (now, limit)).fetchall()
            per_queue: dict[int, int] = {}
            for (queue_id,) in rows:
                per_queue[queue_id] = per_queue.get(queue_id, 0) + 1
            for queue_id, n in per_queue.items():
                self._add_count(conn, queue_id, -n)
            conn.execute(Q["expire_dedup"], (now,))
        return len(rows)

    def forget_jobs(self, done_before: int, limit: int) -> int:
        with self._tx() as conn:
            if not _first(conn.execute(Q["try_maintenance_lock"]))[0]:
                return 0
            return int(conn.execute(Q["forget_jobs"], (done_before, limit)).rowcount)

    def move_messages(self, source_queue_id: int, destination_queue_id: int | None, limit: int,
                      now: int) -> int:
        with self._tx() as conn:
            rows = conn.execute(Q["movable_messages"], (source_queue_id, limit)).fetchall()
            moved: dict[int, int] = {}
            for row_id, origin in rows:
                target = destination_queue_id if destination_queue_id is not None else origin
                if target is None:
                    continue
                if conn.execute("SELECT 1 FROM queues WHERE id = %s", (target,)).fetchone() is None:
                    continue
                conn.execute(Q["move_message"], (target, now, row_id))
                moved[target] = moved.get(target, 0) + 1
            for target, n in moved.items():
                self._add_count(conn, target, n)
                self._notify(conn, queue_channel(target))
            if moved:
                self._add_count(conn, source_queue_id, -sum(moved.values()))
        return sum(moved.values())

    @staticmethod
    def _task(r: Sequence[Any]) -> MoveTask:
        return MoveTask(r[0], r[1], r[2], r[3], MoveTaskStatus(r[4]), r[5], r[6], r[7], r[8])

    def create_move_task(self, task: MoveTask) -> None:
        with self._tx() as conn:
            conn.execute(Q["insert_move_task"], (
                task.handle, task.source_queue_id, task.destination_queue_id, task.max_per_second,
                task.status.value, task.moved, task.to_move, task.started_at,
                task.failure_reason))

    def list_move_tasks(self, source_queue_id: int, limit: int) -> list[MoveTask]:
        return [self._task(r) for r in self._all(Q["list_move_tasks"], (source_queue_id, limit))]

    def running_move_tasks(self) -> list[MoveTask]:
        return [self._task(r) for r in self._all(Q["running_move_tasks"])]

    def update_move_task(self, handle: str, *, moved: int, status: MoveTaskStatus,
                         failure_reason: str | None = None) -> bool:
        with self._tx() as conn:
            return bool(conn.execute(Q["update_move_task"], (
                moved, status.value, failure_reason, handle)).rowcount)


def _first(cur: psycopg.Cursor[Any]) -> Any:
    row = cur.fetchone()
    assert row is not None, "the statement always returns a row"
    return row


def _safe(url: str) -> str:
    """The URL without its password, for messages."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url
