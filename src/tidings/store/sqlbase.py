"""What every part of `SqlStore` shares: the driver, its named queries, and the one
message writer that both sends and schedule firings go through."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tidings.errors import NotFoundError
from tidings.model.messages import NewMessage, encode_attributes
from tidings.model.queues import FIFO_DEDUP_WINDOW_MS
from tidings.notify.base import WAKE_HORIZON_MS, queue_channel
from tidings.store.base import StoredSend
from tidings.store.driver import Conn, ConnectionLock, Driver, Row
from tidings.store.migrate import SchemaStatus, known, schema_status

#: Advisory-lock keys (PostgreSQL; no-ops on SQLite, whose writes are serial anyway).
FIFO_RECEIVE_LOCK = 7133001 << 32  # + queue id: the "nothing of this group in flight" check
MAINTENANCE_LOCK = 7133002  # retention sweeps run on one node at a time


#: Positional parameters, or named ones (`:name` / `%(name)s`) where a value repeats.
Params = Sequence[Any] | Mapping[str, Any]


def message_row(queue_id: int, m: NewMessage) -> Row:
    """The parameters of `insert_message`, in its column order."""
    return (queue_id, m.message_id, m.body, m.md5_body, encode_attributes(m.attributes),
            m.md5_attributes, m.visible_at, m.sent_at, m.expires_at, m.group_id,
            m.deduplication_id, m.scheduled_at)


def only_reads(sql: str) -> bool:
    """Whether a named query is a plain SELECT (after its comments): `_one` and `_all` run
    it without the writer lock. A WITH may end in a write, so it is not counted."""
    code = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    return code.lstrip()[:7].upper() in ("SELECT ", "SELECT\n")


class SqlBase:
    def __init__(self, driver: Driver, *, wake_horizon_ms: int = WAKE_HORIZON_MS) -> None:
        """`wake_horizon_ms`: schedules written due within it wake the dispatchers
        (`notify.base.wake_horizon_ms` of the nodes' fallback poll)."""
        self.driver = driver
        self.wake_horizon_ms = wake_horizon_ms
        self.q = driver.queries
        self.url = driver.url
        self.max_concurrency = driver.max_concurrency
        self.inline_lock: ConnectionLock | None = driver.inline_lock
        self._reads = frozenset(name for name, sql in self.q.items() if only_reads(sql))

    def close(self) -> None:
        self.driver.close()

    def ping(self) -> None:
        self._one("ping")

    def schema_status(self) -> SchemaStatus:
        # (no migrations table any more: nothing newer than this release, at least)
        return schema_status(self.driver) or SchemaStatus({}, known(self.driver.name), None)

    def schema_mark(self) -> tuple[int, int]:
        count, last = self._one("schema_mark")
        return int(count), int(last or 0)

    def _one(self, query: str, args: Params = ()) -> Any:
        with (self.driver.read() if query in self._reads else self.driver.auto()) as conn:
            return conn.execute(self.q[query], args).fetchone()

    def _found(self, query: str, args: Params, missing: type[NotFoundError], ident: str) -> Any:
        """The row `query` finds; `missing(ident)` raised when there is none."""
        row = self._one(query, args)
        if row is None:
            raise missing(ident)
        return row

    def _all(self, query: str, args: Params = ()) -> list[Any]:
        with (self.driver.read() if query in self._reads else self.driver.auto()) as conn:
            return list(conn.execute(self.q[query], args).fetchall())

    def reclaim_space(self) -> bool:
        """Make the space of deleted rows reusable where the database would not do it by
        itself (PostgreSQL with autovacuum off: VACUUM the tables that churn). True if it
        had to."""
        row = self._one("reclaim_needed")
        if not (row and row[0]):
            return False
        with self.driver.auto() as conn:
            conn.execute(self.q["reclaim_space"])
        return True

    def _add_count(self, conn: Conn, queue_id: int, n: int) -> None:
        conn.execute(self.q["add_count"], (queue_id, self.driver.count_shard(), n))

    def write_messages(self, conn: Conn, queue_id: int, messages: Sequence[NewMessage],
                        fifo: bool, now: int) -> list[StoredSend]:
        """Insert inside the caller's transaction (sends, and firings of schedules)."""
        if not messages:
            return []
        if not fifo:  # no deduplication: one bulk insert
            self.driver.insert_messages(conn, [message_row(queue_id, m) for m in messages])
            out = [StoredSend(m.message_id, None, False) for m in messages]
            stored = len(messages)
        else:
            out, stored = [], 0
            for m in messages:
                if m.deduplication_id is not None:
                    dup = conn.execute(self.q["find_dedup"],
                                       (queue_id, m.deduplication_id, now)).fetchone()
                    if dup is not None:
                        out.append(StoredSend(dup[0], dup[1], True))
                        continue
                seq = conn.execute(self.q["insert_message_returning"],
                                   message_row(queue_id, m)).fetchone()[0]
                stored += 1
                if m.deduplication_id is not None:
                    conn.execute(self.q["put_dedup"], (queue_id, m.deduplication_id,
                                                       m.message_id, seq,
                                                       now + FIFO_DEDUP_WINDOW_MS))
                out.append(StoredSend(m.message_id, seq, False))
        if stored:
            self._add_count(conn, queue_id, stored)
            self.driver.notify(conn, queue_channel(queue_id))
        return out
