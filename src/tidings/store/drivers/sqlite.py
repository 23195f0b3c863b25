"""The embedded SQLite driver: one file, WAL, one writer, no server.

Opening the file (what may be made, the pragmas, durability) is `sqlite_open.py`'s job;
copying the WAL back into the file off the committing thread is `sqlite_checkpoint.py`'s;
the checks for damage are `sqlite_file.py`'s. This module holds the transactions and the
statements that differ from PostgreSQL's.

Damage: a node opens the file with `check="quick"` (or "full"), which reads all of it
with SQLite's `quick_check` (or `integrity_check`) before anything is written (the
migrations included), and refuses a file that fails with `StoreCorrupt`, naming the file
and what is wrong. Damage met later (a statement answering SQLITE_CORRUPT, "database disk
image is malformed") is latched: that call and every later one raise `StoreCorrupt`
without touching the file again, so each face answers 503 naming it, the loops back off
saying why (the readiness probe), and nothing is written into a file whose b-trees are no
longer trusted (a write there can spread the damage). Why the node stays up rather than
exiting: docs/operations.md, "A damaged database".

All access goes through one connection guarded by a lock: SQLite has one writer anyway,
and one connection keeps its page cache warm. Between processes (a web process sending
jobs next to `tidings serve`, the CLI) a lock file orders the writers
(`writer_lock.WriterLock`), with `busy_timeout` behind it. Write transactions are
`BEGIN IMMEDIATE`: they take the write lock up front, so two processes never deadlock
upgrading a read lock.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from types import TracebackType
from typing import Any

from tidings.errors import StoreCorrupt, StoreUnavailable, ValidationError
from tidings.store.driver import ConnectionLock, Row
from tidings.store.drivers import sqlite_file
from tidings.store.drivers.sqlite_checkpoint import Checkpointer
from tidings.store.drivers.sqlite_open import (
    TRANSIENT,
    check_options,
    connect,
    prepare_file,
    raise_if_unwritable,
    shown,
)
from tidings.store.drivers.writer_lock import WriterLock
from tidings.store.migrate import Create, migrate
from tidings.store.sqlfiles import queries

log = logging.getLogger("tidings.sqlite")


class SQLiteDriver:
    name = "sqlite"
    max_concurrency = 1
    single_writer = True

    def __init__(self, path: str, *, now: int, synchronous: str = "NORMAL",
                 cache_mb: int = 32, create: Create = Create.DATABASE,
                 check: str = "off") -> None:
        """`create`: what opening may make where nothing is (`Create`). `check`: "quick" or
        "full" runs SQLite's `quick_check` or `integrity_check` over the whole file before
        anything writes to it (what a node does at start, docs/operations.md); "off" opens
        it as it is."""
        check_options(synchronous, check)
        self.path = path
        # (absolute, for the start-up log: the default is relative to the working directory)
        self.url = f"sqlite:///{shown(path)}"
        self.queries = queries(self.name)
        if path != ":memory:":
            prepare_file(path, create)
        if path == ":memory:" or not os.path.exists(path):  # a new file: nothing to check
            check = "off"
        if check != "off":
            sqlite_file.read_ahead(path)  # before SQLite opens it (sqlite_file's rule)
        self._lock = threading.RLock()
        self._auto = _Autocommit(self, writes=True)
        self._read = _Autocommit(self, writes=False)
        self.inline_lock: ConnectionLock | None = self._lock
        self._writer = WriterLock(path)
        conn: sqlite3.Connection | None = None
        try:
            conn = self._conn = connect(path, synchronous=synchronous, cache_mb=cache_mb)
            if check != "off":
                self._check_file(full=check == "full")
            with self._lock:
                migrate(self, now, where=shown(path), create=create)
            self._checkpointer = None if path == ":memory:" else Checkpointer(path)
        except BaseException as exc:
            # Refused (a newer schema, no database, damage) or failed: nothing stays open.
            if conn is not None:
                conn.close()
            self._writer.close()
            if isinstance(exc, sqlite3.Error):
                if sqlite_file.corruption(exc):
                    raise StoreCorrupt(self._damaged(exc)) from exc
                raise_if_unwritable(path, exc)
                raise StoreUnavailable(f"cannot open SQLite database {shown(path)!r}: "
                                       f"{exc}") from exc
            raise

    #: Set by the first statement that met damage (the reason): every later call is
    #: refused with it. Never cleared: damage does not heal; a restore replaces the file.
    corrupt: str | None = None

    def _check_file(self, *, full: bool) -> None:
        started = time.monotonic()
        found = sqlite_file.problems(self._conn, full=full)
        took = time.monotonic() - started
        pragma = "integrity_check" if full else "quick_check"
        if found:
            raise StoreCorrupt(
                f"SQLite database {self.path!r} is damaged ({pragma}: "
                f"{sqlite_file.summary(found)}); restore a backup (docs/operations.md)")
        log.info("checked %s (%.0f MB, %s) in %.1f s: ok", self.path,
                 os.path.getsize(self.path) / 1e6, pragma, took)

    def _damaged(self, exc: sqlite3.Error) -> str:
        return (f"SQLite database {self.path!r} is damaged ({sqlite_file.corruption(exc)}:"
                f" {exc}); restore a backup (docs/operations.md)")

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock, self._transient_errors():
            if self.corrupt is not None:
                raise StoreCorrupt(self.corrupt)
            conn = self._conn
            if self._left_open and conn.in_transaction:  # a rollback failed earlier
                self._rollback(conn)
            writer = self._writer
            writer.acquire()
            try:
                conn.execute(self.queries["begin"])
                yield conn
                conn.execute(self.queries["commit"])
                if (cp := self._checkpointer) is not None and not cp.wrote.is_set():
                    cp.wrote.set()
            except BaseException:
                # A failed COMMIT (disk full) leaves the transaction open; a failed
                # statement may already have rolled it back (SQLite does on SQLITE_FULL).
                self._rollback(conn)
                raise
            finally:
                writer.release()

    def pipelined(self, conn: sqlite3.Connection) -> AbstractContextManager[None]:
        return nullcontext()  # in-process: no round trips to save

    def auto(self) -> AbstractContextManager[sqlite3.Connection]:
        # A single write statement starts its write transaction before it reads, so an
        # autocommit UPDATE … RETURNING is as safe here as inside BEGIN IMMEDIATE.
        return self._auto

    def read(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._read

    @contextmanager
    def borrow(self, connection: Any) -> Iterator[sqlite3.Connection]:
        raise ValidationError("connection", "sending in your own transaction needs "
                              "PostgreSQL: SQLite's one writer is tidings' own connection")
        yield self._conn  # never reached: makes this the context manager it is typed as

    def _rollback(self, conn: sqlite3.Connection) -> None:
        self._left_open = False
        if conn.in_transaction:
            try:
                conn.execute(self.queries["rollback"])
            except sqlite3.Error:
                self._left_open = True
                log.exception("SQLite rollback failed; retried before the next transaction")

    _left_open = False  # a failed rollback left a transaction open on the connection
    _checkpointer: Checkpointer | None = None

    @contextmanager
    def _transient_errors(self) -> Iterator[None]:
        """The disk is full, an I/O error, the file locked past busy_timeout: not the
        caller's fault and gone once space (or the lock) returns, so `StoreUnavailable`
        (HTTP 503, AWS ServiceUnavailable; the engine's loops back off and carry on).
        Nothing committed is touched: the failed transaction is rolled back whole."""
        try:
            yield
        except sqlite3.Error as exc:
            self._raise_if_transient(exc)
            raise

    def _raise_if_transient(self, exc: sqlite3.Error) -> None:
        """Also latches damage (`corrupt`): not transient, but not the caller's fault
        either, and the loops must not die of it; and names a read-only file or folder."""
        if sqlite_file.corruption(exc):
            if self.corrupt is None:
                self.corrupt = self._damaged(exc)
                log.critical("%s: this process refuses every call on it from now on",
                             self.corrupt)
            raise StoreCorrupt(self.corrupt) from exc
        raise_if_unwritable(self.path, exc)
        name = getattr(exc, "sqlite_errorname", "") or ""
        if name.startswith(TRANSIENT):
            raise StoreUnavailable(
                f"SQLite database {self.path!r} cannot be written now ({name}: {exc});"
                " retry later") from exc

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.close()
        with self._lock:
            self._conn.close()
            self._writer.close()

    @staticmethod
    def array(values: Sequence[Any]) -> str:
        return json.dumps(list(values))

    def insert_id(self, conn: sqlite3.Connection, query: str,
                  params: Sequence[Any]) -> int | None:
        # No RETURNING: SQLite builds its RETURNING rows in a table of their own before the
        # first comes back, ~5 us of a one-row create's ~40 (the Python API's `create`,
        # one commit per call). The count says whether the row went in; the connection's
        # last rowid is this statement's, since the caller holds the connection's lock.
        cur = conn.execute(self.queries[query], params)
        return cur.lastrowid if cur.rowcount > 0 else None

    def insert_ids(self, conn: sqlite3.Connection, query: str, rows: Sequence[Row],
                   ) -> list[int | None]:
        # A statement per row costs no round trip here, and the last rowid (not
        # RETURNING, see insert_id) says each row's id.
        sql = self.queries[query]
        out: list[int | None] = []
        for row in rows:
            cur = conn.execute(sql, row)
            out.append(cur.lastrowid if cur.rowcount > 0 else None)
        return out

    def run_each(self, conn: sqlite3.Connection, query: str, rows: Sequence[Row],
                 key: int = 1) -> list[bool]:
        # executemany is SQLite's fastest path, but its row count is a total: when every
        # row took effect (the usual case) that says it all; otherwise undo and redo the
        # rows one by one for their answers.
        if not rows:
            return []
        q = self.queries
        sql = q[query]
        conn.execute(q["savepoint"])
        if conn.executemany(sql, rows).rowcount == len(rows):
            conn.execute(q["release_savepoint"])
            return [True] * len(rows)
        conn.execute(q["rollback_to_savepoint"])
        conn.execute(q["release_savepoint"])
        return [conn.execute(sql, row).rowcount > 0 for row in rows]

    @staticmethod
    def count_shard() -> int:
        return 0  # one writer: nothing to spread

    def notify(self, conn: sqlite3.Connection, channel: str) -> None:
        """Nothing to do: one node per file, woken by its in-process notifier."""

    def lock(self, conn: sqlite3.Connection, key: int) -> None:
        """Nothing to do: `BEGIN IMMEDIATE` already serialises every write transaction."""

    def try_lock(self, conn: sqlite3.Connection, key: int) -> bool:
        return True

    def insert_messages(self, conn: sqlite3.Connection, rows: Sequence[Row]) -> None:
        conn.executemany(self.queries["insert_message"], rows)

    def send_standard(self, queue_id: int, rows: Sequence[Row], channel: str) -> None:
        with self.tx() as conn:
            conn.executemany(self.queries["insert_message"], rows)
            conn.execute(self.queries["add_count"], (queue_id, 0, len(rows)))

    def delete_receipts(self, queue_id: int, receipts: Sequence[tuple[int, int]],
                        ) -> set[tuple[int, int]]:
        with self.tx() as conn:
            done = self.run_each(conn, "delete_message",
                                 [(row_id, token, queue_id) for row_id, token in receipts], key=2)
            gone = {r for r, ok in zip(receipts, done, strict=True) if ok}
            if gone:
                conn.execute(self.queries["add_count"], (queue_id, 0, -len(gone)))
        return gone

    def finish_jobs(self, queue_id: int, acks: Sequence[tuple[int, int, str]], now: int,
                    ) -> set[tuple[int, int]]:
        # A group commit's deletes and done records as a statement per lease token (the
        # jobs of one receive share theirs) plus one, rather than two statements per job:
        # ~2.5 µs less per job (bench/consumers.py).
        q = self.queries
        keys = _json_texts([key for _, _, key in acks])
        if keys is None:
            return self._finish_jobs_each(queue_id, acks, now)
        by_token: dict[int, list[int]] = {}
        for row_id, token, _ in acks:
            by_token.setdefault(token, []).append(row_id)
        gone: set[tuple[int, int]] = set()
        with self.tx() as conn:
            for token, ids in by_token.items():
                gone.update((row_id, token) for row_id, in conn.execute(
                    q["delete_leased"], (_json_ints(ids), queue_id, token)))
            conn.execute(q["finish_job_keys"], (keys, queue_id, now))
            if gone:
                conn.execute(q["add_count"], (queue_id, 0, -len(gone)))
        return gone

    def _finish_jobs_each(self, queue_id: int, acks: Sequence[tuple[int, int, str]],
                          now: int) -> set[tuple[int, int]]:
        q = self.queries
        with self.tx() as conn:
            done = self.run_each(conn, "delete_message",
                                 [(row_id, token, queue_id) for row_id, token, _ in acks], key=2)
            self.run_each(conn, "finish_job", [(key, queue_id, now) for _, _, key in acks])
            gone = {(row_id, token) for (row_id, token, _), ok in zip(acks, done, strict=True)
                    if ok}
            if gone:
                conn.execute(q["add_count"], (queue_id, 0, -len(gone)))
        return gone

    def reserve_job_keys(self, queue_id: int, leases: Sequence[tuple[str, int]], until: int,
                         now: int) -> list[tuple[bool, str | None]]:
        # A statement per lease token (one, for the jobs of one receive) whose RETURNING
        # names the keys it took, rather than a statement per job.
        q = self.queries
        by_token: dict[int, list[str]] = {}
        for key, token in leases:
            by_token.setdefault(token, []).append(key)
        texts = [(token, _json_texts(keys)) for token, keys in by_token.items()]
        with self.tx() as conn:
            if any(text is None for _, text in texts):
                got = self.run_each(conn, "reserve_job", [
                    (key, queue_id, token, until, now) for key, token in leases])
            else:
                reserved: set[str] = set()
                for token, text in texts:
                    reserved.update(key for key, in conn.execute(
                        q["reserve_job_group"], (text, queue_id, token, until, now)))
                got = [key in reserved for key, _ in leases]
            taken = [key for (key, _), ok in zip(leases, got, strict=True) if not ok]
            states = self._key_states(conn, queue_id, taken) if taken else {}
        return [(ok, None if ok else states.get(key))
                for (key, _), ok in zip(leases, got, strict=True)]

    def _key_states(self, conn: sqlite3.Connection, queue_id: int, keys: list[str],
                    ) -> dict[str, str]:
        text = _json_texts(keys)
        if text is not None:
            return dict(conn.execute(self.queries["job_key_states"], (queue_id, text)))
        found = (conn.execute(self.queries["job_key_state"], (queue_id, key)).fetchone()
                 for key in keys)
        return {key: row[0] for key, row in zip(keys, found, strict=True) if row is not None}

    def insert_schedule_rows(self, conn: sqlite3.Connection, rows: Sequence[Row]) -> int:
        # Plain tuples: sqlite3 binds an exact tuple by index, a NamedTuple through the
        # generic sequence protocol (a million-row fan-out spent 50 % longer binding).
        return int(conn.executemany(self.queries["insert_schedule"], map(tuple, rows)).rowcount)


_texts = json.JSONEncoder(ensure_ascii=False, check_circular=False).encode


def _json_texts(values: list[str]) -> str | None:
    """Strings as a JSON array for json_each, or None when one holds a NUL (json_each
    cuts a text value at its first NUL: such keys go one statement each). Not ASCII-
    escaped: the text travels as UTF-8 and comes back out of json_each unchanged."""
    text = _texts(values)
    return None if "\\u0000" in text else text


def _json_ints(values: list[int]) -> str:
    return f"[{','.join(map(str, values))}]"


class _Autocommit:
    """What `SQLiteDriver.auto()` enters: the lock and the connection, transient errors
    made `StoreUnavailable`. A plain object rather than a generator context manager: a
    single-statement call (a create made one call at a time) spends ~3 µs less in it.
    `writes=False` (`SQLiteDriver.read`) leaves out the writer lock."""

    __slots__ = ("_driver", "_writes")

    def __init__(self, driver: SQLiteDriver, *, writes: bool) -> None:
        self._driver = driver
        self._writes = writes

    def __enter__(self) -> sqlite3.Connection:
        driver = self._driver
        if driver.corrupt is not None:
            raise StoreCorrupt(driver.corrupt)
        driver._lock.acquire()
        if self._writes:
            try:
                driver._writer.acquire()
            except BaseException:
                driver._lock.release()
                raise
        return driver._conn

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._writes:
            driver = self._driver
            driver._writer.release()
            if (cp := driver._checkpointer) is not None and not cp.wrote.is_set():
                cp.wrote.set()
        self._driver._lock.release()
        if isinstance(exc, sqlite3.Error):
            self._driver._raise_if_transient(exc)
