"""The PostgreSQL driver: many tidings nodes share one database and split the work.

psycopg 3 with a connection pool (psycopg_pool): the maintained driver, with COPY,
server-side binding and a pool that reconnects by itself after a server restart. Receives
and claims use `FOR UPDATE SKIP LOCKED` (in the SQL), so nodes take disjoint rows instead
of queueing on each other's locks; every write that makes something receivable or due
also issues `pg_notify(<the schema's channel>, channel)`, which the `PostgresNotifier` of
every node turns into a local wake-up (a lost notification only costs the fallback poll).

A server that cannot be reached raises `StoreUnavailable`; the engine's loops log it,
back off and retry, so a PostgreSQL restart pauses a node rather than killing it.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg_pool import ConnectionPool

from tidings.errors import StoreUnavailable, ValidationError
from tidings.store.driver import ConnectionLock, Row
from tidings.store.migrate import Create, migrate
from tidings.store.sqlfiles import queries

#: Rows of `queue_counts` per queue: every node's sends and deletes add to a random one,
#: so they do not queue up behind one hot row lock.
COUNT_SHARDS = 8
#: At this many rows, COPY beats a pipelined executemany (a firing batch's messages).
COPY_FROM = 50
_SCHEDULE_TYPES = ["text", "text", "text", "text", "text", "int8", "int8", "int4", "text",
                   "text", "text", "text", "int8", "int8", "int8", "int8"]
PgConn = psycopg.Connection[Any]


class PostgresDriver:
    name = "postgres"
    #: Many nodes write at once: a pass's claim is marked (and committed) at once, so no
    #: other node's dispatcher takes the same rows while this one plans them.
    single_writer = False

    def __init__(self, url: str, *, now: int, pool_size: int = 8,
                 create: Create = Create.DATABASE) -> None:
        self.url = url
        self.max_concurrency = pool_size
        # A pool: every call may wait on the network, so none runs on the caller's thread.
        self.inline_lock: ConnectionLock | None = None
        self.queries = queries(self.name)
        self._home: tuple[str, str] | None = None  # (schema, database) of tidings' tables
        try:
            self._pool = ConnectionPool(url, min_size=1, max_size=pool_size, open=True,
                                        timeout=30.0, kwargs={"autocommit": True},
                                        name="tidings")
            self._pool.wait(timeout=30.0)
            migrate(self, now, where=f"PostgreSQL at {safe_url(url)}", create=create)
        except BaseException as exc:
            # Refused (a newer schema, no database) or failed: no connection stays open.
            if hasattr(self, "_pool"):
                self._pool.close()
            if isinstance(exc, psycopg.Error):
                raise StoreUnavailable(f"cannot use PostgreSQL at {safe_url(url)}: {exc}") from exc
            if isinstance(exc, TimeoutError):
                raise StoreUnavailable(f"cannot reach PostgreSQL at {safe_url(url)}") from exc
            raise

    @contextmanager
    def tx(self) -> Iterator[PgConn]:
        with self._connection() as conn, conn.transaction():
            yield conn

    def pipelined(self, conn: PgConn) -> AbstractContextManager[Any]:
        return conn.pipeline()

    @contextmanager
    def auto(self) -> Iterator[PgConn]:
        with self._connection() as conn:
            yield conn

    def read(self) -> AbstractContextManager[PgConn]:
        return self.auto()  # (nothing to leave out: PostgreSQL has no writer lock)

    @contextmanager
    def _connection(self) -> Iterator[PgConn]:
        try:
            with self._pool.connection() as conn:
                yield conn
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"PostgreSQL is unavailable: {exc}") from exc
        except psycopg.errors.ReadOnlySqlTransaction as exc:
            # A standby (after a failover the pool may still hold a connection to the old
            # primary, now read-only) or default_transaction_read_only: not the request's
            # fault, and over once the connection reaches a primary.
            raise StoreUnavailable(f"PostgreSQL is read-only: {exc}") from exc
        except psycopg.DataError as exc:
            # SQLSTATE class 22: a value PostgreSQL cannot hold (a NUL character in text, a
            # number out of range). Input that got past validation: a 400, not a 500; the
            # transaction has rolled back, so nothing of the request is stored.
            reason = exc.diag.message_primary or str(exc)
            raise ValidationError("value", f"cannot be stored: {reason}") from exc
        except TimeoutError as exc:  # no connection could be had from the pool in time
            raise StoreUnavailable("PostgreSQL is unavailable: no connection") from exc

    def close(self) -> None:
        self._pool.close()

    @contextmanager
    def borrow(self, connection: Any) -> Iterator[PgConn]:
        # The application's transaction (the outbox problem): tidings' rows go in with
        # the application's own, in a savepoint of its transaction. Its search_path is
        # pointed at tidings' schema for that savepoint only (set_config(..., true) is
        # undone by a rollback, and put back by hand after success).
        if not isinstance(connection, psycopg.Connection):
            raise ValidationError("connection", "must be a psycopg 3 connection (or a "
                                  "SQLAlchemy session or connection using psycopg) to the "
                                  "database tidings uses")
        if self._home is None:
            with self.auto() as own:
                row = own.execute(self.queries["current_schema"]).fetchone()
                assert row is not None
                self._home = (str(row[0]), str(row[1]))
        schema, database = self._home
        try:
            # Run first: on a connection that is not autocommit this opens the implicit
            # transaction, so the block below is a savepoint of it, never its own commit.
            found = connection.execute(self.queries["current_schema"]).fetchone()
            assert found is not None
            theirs, path = found[1], found[2]
            if theirs != database:
                raise ValidationError("connection", f"is connected to database {theirs!r}; "
                                      f"tidings' tables are in {database!r}")
            with connection.transaction():
                connection.execute(self.queries["set_search_path"], (_ident(schema),))
                yield connection
                connection.execute(self.queries["set_search_path"], (path,))
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"PostgreSQL is unavailable: {exc}") from exc

    @staticmethod
    def array(values: Sequence[Any]) -> list[Any]:
        return list(values)

    def insert_id(self, conn: PgConn, query: str, params: Sequence[Any]) -> int | None:
        row = conn.execute(self.queries[query], params).fetchone()
        return None if row is None else int(row[0])

    def insert_ids(self, conn: PgConn, query: str, rows: Sequence[Row]) -> list[int | None]:
        # One statement for the batch (a round trip per row was most of a group commit's
        # time); a key twice in `rows` went in once, for its first row.
        if not rows:
            return []
        columns = [list(col) for col in zip(*rows, strict=True)]
        ids = dict(conn.execute(self.queries[query], columns).fetchall())
        return [ids.pop(row[0], None) for row in rows]

    def run_each(self, conn: PgConn, query: str, rows: Sequence[Row], key: int = 1,
                 ) -> list[bool]:
        # The statement takes each column as an array (unnest) and returns the keys of
        # the rows it changed: one round trip for the whole batch.
        if not rows:
            return []
        columns = [list(col) for col in zip(*rows, strict=True)]
        changed = {tuple(r) for r in conn.execute(self.queries[query], columns).fetchall()}
        return [tuple(row[:key]) in changed for row in rows]

    @staticmethod
    def count_shard() -> int:
        return random.randrange(COUNT_SHARDS)

    def notify(self, conn: PgConn, channel: str) -> None:
        conn.execute(self.queries["notify"], (channel,))

    def lock(self, conn: PgConn, key: int) -> None:
        conn.execute(self.queries["lock"], (key,))

    def try_lock(self, conn: PgConn, key: int) -> bool:
        row = conn.execute(self.queries["try_lock"], (key,)).fetchone()
        return bool(row and row[0])

    def insert_messages(self, conn: PgConn, rows: Sequence[Row]) -> None:
        if conn.pgconn.pipeline_status:  # a firing pass's pipelined completion: one statement
            columns = [list(col) for col in zip(*rows, strict=True)]
            conn.execute(self.queries["insert_messages_unnest"], (rows[0][0], *columns[1:]))
            return
        with conn.cursor() as cur:
            if len(rows) >= COPY_FROM:
                with cur.copy(self.queries["copy_messages"]) as copy:
                    for row in rows:
                        copy.write_row(row)
            else:
                cur.executemany(self.queries["insert_message"], rows)

    def send_standard(self, queue_id: int, rows: Sequence[Row], channel: str) -> None:
        # One statement (insert, count, notify) committing on its own: one round trip and
        # one WAL flush per send, whatever the batch size. The rows' first column is the
        # queue id, bound once instead.
        columns = [list(col) for col in zip(*rows, strict=True)][1:10]
        with self.auto() as conn:
            conn.execute(self.queries["send_messages"],
                         (queue_id, *columns, queue_id, self.count_shard(), channel))

    def delete_receipts(self, queue_id: int, receipts: Sequence[tuple[int, int]],
                        ) -> set[tuple[int, int]]:
        with self.auto() as conn:
            return {(r[0], r[1]) for r in conn.execute(self.queries["delete_messages"], (
                [r[0] for r in receipts], [r[1] for r in receipts], queue_id, queue_id,
                self.count_shard())).fetchall()}

    def finish_jobs(self, queue_id: int, acks: Sequence[tuple[int, int, str]], now: int,
                    ) -> set[tuple[int, int]]:
        # One statement committing on its own (the deletes, the done records, the count):
        # one round trip and one WAL flush per group of acknowledgements.
        with self.auto() as conn:
            return {(r[0], r[1]) for r in conn.execute(self.queries["finish_jobs"], {
                "ids": [a[0] for a in acks], "tokens": [a[1] for a in acks],
                "keys": [a[2] for a in acks], "queue": queue_id, "now": now,
                "shard": self.count_shard()}).fetchall()}

    def reserve_job_keys(self, queue_id: int, leases: Sequence[tuple[str, int]], until: int,
                         now: int) -> list[tuple[bool, str | None]]:
        with self.auto() as conn:
            found = {r[0]: (bool(r[1]), r[2]) for r in conn.execute(
                self.queries["reserve_job_keys"], {
                    "keys": [k for k, _ in leases], "tokens": [t for _, t in leases],
                    "queue": queue_id, "until": until, "now": now}).fetchall()}
        return [found[key] for key, _ in leases]

    def insert_schedule_rows(self, conn: PgConn, rows: Sequence[Row]) -> int:
        # COPY (binary: no text parsing server-side) into a per-session staging table,
        # then one INSERT … SELECT that skips existing (group, name) pairs.
        conn.execute(self.queries["stage_schedules"])
        with conn.cursor() as cur, cur.copy(self.queries["copy_schedules"]) as copy:
            copy.set_types(_SCHEDULE_TYPES)
            for row in rows:
                copy.write_row(row)
        return int(conn.execute(self.queries["insert_staged_schedules"]).rowcount)


def _ident(name: str) -> str:
    """A schema name as search_path takes it (quoted, quotes doubled)."""
    return '"' + name.replace('"', '""') + '"'


def safe_url(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(url)
    if parts.password:
        return urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@",
                                                                     ":***@")))
    return url
