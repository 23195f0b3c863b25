"""A dispatcher's firing pass: its claim, held by the handle it works through.

The handle keeps what the pass read of each row, so that its completion compares with
that and nothing else: no state of the pass outlives it or hides in the store. See
`ScheduleStore.firing_pass` for the contract.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from tidings.model.messages import NewMessage
from tidings.model.schedules import Schedule
from tidings.store import rows
from tidings.store.contract.schedules import Firing
from tidings.store.driver import Conn, Row
from tidings.store.sqlbase import SqlBase


class SqlFiringPass:
    """`FiringPass` over `SqlBase`: the rows one pass claimed, and the transaction that
    holds them where there is one (PostgreSQL)."""

    def __init__(self, store: SqlBase, found: Sequence[Row], conn: Conn | None) -> None:
        self._store = store
        self._conn = conn
        self._open = True
        claimed = [rows.schedule(r) for r in found]
        #: schedule id -> the version this pass read: what its completion compares
        self._read = {s.id: s.version for s in claimed}
        claimed.sort(key=lambda s: (s.next_fire_at or 0, s.id))
        self.schedules: Sequence[Schedule] = claimed

    def close(self) -> None:
        self._open = False

    @contextmanager
    def _transaction(self) -> Iterator[Conn]:
        """The pass's own transaction where it holds one (its statements pipelined: the
        completion reads only which rows held), else a new one."""
        driver = self._store.driver
        if self._conn is None:
            with driver.tx() as conn:
                yield conn
            return
        with driver.pipelined(self._conn):
            yield self._conn

    def complete(self, firings: Sequence[Firing], now: int) -> list[bool]:
        if not self._open:
            raise RuntimeError("a firing pass is completed inside its `with` block")
        read = self._read
        ours: dict[int, Firing] = {}  # one firing per row this pass holds (the first)
        for f in firings:
            if f.schedule_id in read:
                ours.setdefault(f.schedule_id, f)
        run_each = self._store.driver.run_each
        with self._transaction() as conn:
            deleting = [(sid, read[sid], f.occurrence) for sid, f in ours.items() if f.delete]
            held = {r[0] for r, ok in zip(deleting, run_each(
                conn, "delete_fired_schedule", deleting), strict=True) if ok}
            advancing = [(sid, read[sid], f.occurrence, f.next_fire_at, f.due_at,
                          now if f.fired else None) for sid, f in ours.items() if not f.delete]
            held.update(r[0] for r, ok in zip(advancing, run_each(
                conn, "advance_schedule", advancing), strict=True) if ok)
            pending: dict[tuple[int, bool], list[NewMessage]] = {}
            for sid, f in ours.items():  # in the firings' order (a FIFO queue's order)
                if sid not in held:
                    continue
                for tm in f.messages:
                    pending.setdefault((tm.queue_id, tm.fifo), []).append(tm.message)
            for (queue_id, fifo), messages in pending.items():
                self._store.write_messages(conn, queue_id, messages, fifo, now)
            outcomes = [f.outcome for sid, f in ours.items()
                        if f.outcome is not None and sid in held]
            if outcomes:  # the batch's history rows: one statement
                run_each(conn, "insert_firings", outcomes)
        for sid in held:  # changed by this pass: no longer as it read them
            del read[sid]
        return [f.schedule_id in held and ours[f.schedule_id] is f for f in firings]
