"""PostgreSQL notifier: LISTEN on one connection, wake this node's local waiters.

The PostgreSQL store issues `pg_notify(<the schema's channel>, channel)` inside the
transactions that make messages receivable or schedules due, so a send on one node wakes a
long poll or a dispatcher on every node. The PostgreSQL channel is named after the schema
tidings' tables are in (`CHANNEL_OF_SCHEMA`): several tidings databases in one PostgreSQL
database (a schema each: deployments, tenants, test runs) do not wake each other's nodes,
which cost every node CPU for every other's sends.

The listener starts with the first wait (a CLI command that never waits opens no extra
connection) and reconnects with backoff if the server goes away; meanwhile waiters fall
back to their timeouts.

Idle, the listener's thread sleeps in `select` on the connection's socket and a pipe that
`close` writes to: no timer wakes it. A server that goes away closes the socket (the
select returns, reading fails, the listener reconnects); one that vanishes silently (a
network cut) is found by TCP keepalives, which the kernel sends, not this process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
from typing import Any

import psycopg
from psycopg import sql

from tidings.notify.local import ListeningNotifier

log = logging.getLogger("tidings.notify")

#: TCP keepalives of the listening connection: a server that vanished without closing it
#: (a network cut) is noticed within about idle + interval × count seconds.
KEEPALIVE_IDLE_S = 60
KEEPALIVE_INTERVAL_S = 10
KEEPALIVE_COUNT = 3


#: The NOTIFY channel of the schema a connection's tables are in, as SQL: the store's
#: `pg_notify` calls (store/sql/postgres/queries.sql) spell the same expression. Hashed, as
#: a channel is an identifier of at most 63 bytes and a schema name may take them all.
CHANNEL_OF_SCHEMA = "'tidings_' || substr(md5(current_schema()), 1, 16)"


def listen_channel(conn: psycopg.Connection[Any]) -> str:
    """LISTEN on the channel of `conn`'s schema, and say which it is."""
    row = conn.execute(f"SELECT {CHANNEL_OF_SCHEMA}").fetchone()
    assert row is not None
    channel = str(row[0])
    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
    return channel


class PostgresNotifier(ListeningNotifier):
    def __init__(self, url: str) -> None:
        super().__init__()
        self._url = url
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._stopping = threading.Event()
        self._conn: psycopg.Connection[object] | None = None
        self._wake: tuple[int, int] | None = None  # a pipe close() writes to: stop

    def _ensure_listening(self, channel: str) -> None:
        if self._thread is not None:
            return
        with self._start_lock:
            if self._thread is None and not self._stopping.is_set():
                self._wake = os.pipe()
                self._thread = threading.Thread(target=self._listen, name="tidings-listen",
                                                daemon=True)
                self._thread.start()

    def _listen(self) -> None:
        assert self._wake is not None
        wake = self._wake[0]
        backoff = 0.1
        while not self._stopping.is_set():
            try:
                with psycopg.connect(self._url, autocommit=True, keepalives=1,
                                     keepalives_idle=KEEPALIVE_IDLE_S,
                                     keepalives_interval=KEEPALIVE_INTERVAL_S,
                                     keepalives_count=KEEPALIVE_COUNT) as conn:
                    self._conn = conn
                    listen_channel(conn)
                    backoff = 0.1
                    poll = select.poll()
                    poll.register(conn.pgconn.socket, select.POLLIN)
                    poll.register(wake, select.POLLIN)
                    while not self._stopping.is_set():
                        for note in conn.notifies(timeout=0):  # what has arrived
                            if note.payload:
                                super().notify(note.payload)
                        if any(fd == wake for fd, _ in poll.poll()):
                            return
            except psycopg.Error as exc:
                if self._stopping.is_set():
                    return
                log.warning("notification listener lost its connection (%s); retrying in"
                            " %.1f s", exc, backoff)
                stopper = select.poll()
                stopper.register(wake, select.POLLIN)
                if stopper.poll(backoff * 1000):
                    return
                backoff = min(backoff * 2, 10.0)
            finally:
                self._conn = None

    def close(self) -> None:
        self._stopping.set()
        with self._start_lock:
            wake, self._wake = self._wake, None
        if wake is None:
            return  # never listened, or closed already
        with contextlib.suppress(OSError):
            os.write(wake[1], b"x")
        if self._thread is not None:
            self._thread.join(timeout=3)
        for fd in wake:
            with contextlib.suppress(OSError):
                os.close(fd)
