"""PostgreSQL notifier: LISTEN on one connection, wake this node's local waiters.

The PostgreSQL store issues `pg_notify('tidings', channel)` inside the transactions that
make messages receivable or schedules due, so a send on one node wakes a long poll or a
dispatcher on every node. The listener starts with the first wait (a CLI command that
never waits opens no extra connection) and reconnects with backoff if the server goes
away; meanwhile waiters fall back to their timeouts.
"""

from __future__ import annotations

import logging
import threading
import time

import psycopg

from tidings.notify.local import ListeningNotifier

log = logging.getLogger("tidings.notify")


class PostgresNotifier(ListeningNotifier):
    def __init__(self, url: str) -> None:
        super().__init__()
        self._url = url
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._stopping = threading.Event()
        self._conn: psycopg.Connection[object] | None = None

    def _ensure_listening(self, channel: str) -> None:
        if self._thread is not None:
            return
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._listen, name="tidings-listen",
                                                daemon=True)
                self._thread.start()

    def _listen(self) -> None:
        backoff = 0.1
        while not self._stopping.is_set():
            try:
                with psycopg.connect(self._url, autocommit=True) as conn:
                    self._conn = conn
                    conn.execute("LISTEN tidings")
                    backoff = 0.1
                    while not self._stopping.is_set():
                        for note in conn.notifies(timeout=1.0):
                            super().notify(note.payload)
            except psycopg.Error as exc:
                if self._stopping.is_set():
                    return
                log.warning("notification listener lost its connection (%s); retrying in"
                            " %.1f s", exc, backoff)
                time.sleep(backoff)
                backoff = min(backoff * 2, 10.0)
            finally:
                self._conn = None

    def close(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=3)
