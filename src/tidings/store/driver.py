"""What a database backend provides to `SqlStore`: only what really differs.

`SqlStore` holds every rule of the store once; a driver holds its connection and
transaction handling, its named queries (`sql/<backend>/queries.sql`, the same names and
parameter order on every backend), how a list travels as one parameter (a JSON text for
SQLite's `json_each`, an array for PostgreSQL), how it wakes other nodes, and the fast
paths that really differ: PostgreSQL's one-statement sends and deletes, binary COPY and
advisory locks; SQLite's `executemany`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeAlias

Row = tuple[Any, ...]


#: A driver's connection (sqlite3 or psycopg): what `tx()` and `auto()` yield. Both have
#: the DB-API `execute(sql, params)` returning a cursor (`fetchone`, `fetchall`,
#: `rowcount`, iteration); typed loosely because the two libraries' signatures differ.
Conn: TypeAlias = Any


class ConnectionLock(Protocol):
    """What `Driver.inline_lock` is: a lock that can be tried without waiting."""

    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...
    def release(self) -> None: ...


class Driver(Protocol):
    name: str  # "sqlite" or "postgres": which `sql/<name>/` folder its SQL comes from
    url: str
    max_concurrency: int
    #: Held while the driver's one connection is in use (SQLite); None where calls take a
    #: connection from a pool (PostgreSQL). Whoever takes it without waiting may run a
    #: short store call on its own thread: the event loop then skips a thread hop.
    inline_lock: ConnectionLock | None
    #: One writer at a time for the whole database (SQLite). A firing pass may then read
    #: its claim without marking the rows and plan outside any transaction: the
    #: completion's compare-and-set (the row's version) refuses a row that changed
    #: meanwhile, and nothing was written that a crash would need to undo.
    single_writer: bool

    @property
    def queries(self) -> Mapping[str, str]: ...

    def tx(self) -> AbstractContextManager[Conn]:
        """One write transaction (committed at the end of the block, rolled back on error)."""
        ...

    def pipelined(self, conn: Conn) -> AbstractContextManager[Any]:
        """Statements sent without waiting for each one's answer until a result is read
        or the block ends (PostgreSQL's pipeline mode; elsewhere nothing changes)."""
        ...

    def auto(self) -> AbstractContextManager[Conn]:
        """A connection whose statements commit on their own: a read, or a write that is
        one statement (atomic by itself), without a transaction's extra round trips."""
        ...

    def read(self) -> AbstractContextManager[Conn]:
        """`auto` for statements that only read. On SQLite it leaves out the writer lock
        (drivers/writer_lock.py): in WAL mode a reader neither waits for a writer nor
        holds one up, and a read under that lock made the other process's writes wait
        for it (a dispatcher process reading its claim held up the node's consumers)."""
        ...

    def close(self) -> None: ...

    def borrow(self, connection: Any) -> AbstractContextManager[Conn]:
        """The application's own connection, made to write tidings' tables inside its
        current transaction (a savepoint of it); refused where the backend cannot."""
        ...

    def array(self, values: Sequence[Any]) -> Any:
        """A list bound as one parameter (`IN (SELECT value FROM json_each(?))` /
        `= ANY(%s)`)."""
        ...

    def insert_id(self, conn: Conn, query: str, params: Sequence[Any]) -> int | None:
        """Run the named INSERT of at most one row; the new row's id, None if none went
        in (the PostgreSQL statement returns it; SQLite reads the connection's last one)."""
        ...

    def insert_ids(self, conn: Conn, query: str, rows: Sequence[Row]) -> list[int | None]:
        """Run the named INSERT for every row, in as few round trips as the database
        allows; each row's new id, None for a row that did not go in (its first value,
        its key, was there already, or earlier in `rows`). The PostgreSQL statement takes
        the rows as arrays and returns (key, id) of those that went in."""
        ...

    def run_each(self, conn: Conn, query: str, rows: Sequence[Row], key: int = 1,
                 ) -> list[bool]:
        """Run the named statement for every row, in as few round trips as the database
        allows, and say for each row whether it changed a row. A row is identified by its
        first `key` values (the PostgreSQL statements take the rows as arrays and return
        those keys)."""
        ...

    def count_shard(self) -> int:
        """Which row of `queue_counts` a change of a queue's total goes to."""
        ...

    def notify(self, conn: Conn, channel: str) -> None:
        """Wake other nodes when this transaction commits (no-op where there are none)."""
        ...

    def lock(self, conn: Conn, key: int) -> None:
        """Serialise with other transactions taking the same key, until this one ends."""
        ...

    def try_lock(self, conn: Conn, key: int) -> bool:
        """Take the key for this transaction if nobody holds it; False otherwise."""
        ...

    # fast paths -------------------------------------------------------------------------

    def insert_messages(self, conn: Conn, rows: Sequence[Row]) -> None:
        """Insert message rows (`insert_message`'s columns) with no per-row answer."""
        ...

    def send_standard(self, queue_id: int, rows: Sequence[Row], channel: str) -> None:
        """A standard queue's send: the rows, the queue's count and the wake-up, committed."""
        ...

    def delete_receipts(self, queue_id: int, receipts: Sequence[tuple[int, int]],
                        ) -> set[tuple[int, int]]:
        """Delete by (row id, lease token) and adjust the count, committed; returns the
        receipts that deleted their message (two receipts of one message differ)."""
        ...

    def finish_jobs(self, queue_id: int, acks: Sequence[tuple[int, int, str]], now: int,
                    ) -> set[tuple[int, int]]:
        """For each (row id, lease token, job key): delete the message if the receipt
        still holds it, mark the key done, adjust the count; committed. Returns the
        receipts that deleted their message."""
        ...

    def reserve_job_keys(self, queue_id: int, leases: Sequence[tuple[str, int]], until: int,
                         now: int) -> list[tuple[bool, str | None]]:
        """Reserve each (distinct) job key with its token until `until`, where it has no
        row or its holder's lease ran out; committed. Per key: (reserved, its state before
        when not reserved)."""
        ...

    def insert_schedule_rows(self, conn: Conn, rows: Sequence[Row]) -> int:
        """Insert schedule rows, skipping existing (group, name); returns how many went in."""
        ...
