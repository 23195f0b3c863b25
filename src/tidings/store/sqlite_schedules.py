"""The schedule half of the SQLite store (mixed into `SQLiteStore`)."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from functools import lru_cache
from typing import Any

from tidings.errors import GroupNotFound, ScheduleNotFound
from tidings.model.schedules import (
    ActionAfterCompletion,
    Schedule,
    ScheduleGroup,
    ScheduleSpec,
    ScheduleState,
    Target,
    target_text,
)
from tidings.store.base import Firing, NewSchedule, ScheduleRow
from tidings.store.sqlfiles import queries

Q = queries("sqlite")


@lru_cache(maxsize=1024)
def target_of(text: str) -> Target:
    """Targets are immutable and mostly shared (a fan-out names one queue): parse once."""
    return Target.from_json(json.loads(text))


def schedule_from_row(r: Sequence[Any]) -> Schedule:
    spec = ScheduleSpec(
        name=r[2], group=r[1], state=ScheduleState(r[3]), expression=r[4], timezone=r[5],
        start_ms=r[6], end_ms=r[7], flexible_window_minutes=r[8],
        target=target_of(r[9]),
        action_after_completion=ActionAfterCompletion(r[10]), description=r[11],
        client_token=r[12])
    return Schedule(spec=spec, id=r[0], next_fire_at=r[13], due_at=r[14], last_fired_at=r[15],
                    created_at=r[16], modified_at=r[17])


def _group(r: Sequence[Any]) -> ScheduleGroup:
    return ScheduleGroup(r[0], r[1], r[2], json.loads(r[3]))


class SQLiteSchedules:
    _lock: threading.RLock
    _conn: sqlite3.Connection

    # Provided by SQLiteStore, which mixes this class in.
    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def _write_messages(self, conn: sqlite3.Connection, queue_id: int, messages: Any,
                        fifo: bool, now: int) -> Any:
        raise NotImplementedError

    # groups ------------------------------------------------------------------------------

    def create_group(self, name: str, tags: dict[str, str], now: int) -> bool:
        with self._tx() as conn:
            return conn.execute(Q["insert_group"], (name, now, now, json.dumps(tags))).rowcount > 0

    def get_group(self, name: str) -> ScheduleGroup:
        with self._lock:
            row = self._conn.execute(Q["group_columns"] + " WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise GroupNotFound(name)
        return _group(row)

    def list_groups(self, prefix: str, after: str | None, limit: int) -> list[ScheduleGroup]:
        with self._lock:
            rows = self._conn.execute(
                Q["group_columns"] + " WHERE name >= ? AND name < ? AND name > ?"
                " ORDER BY name LIMIT ?", (prefix, prefix + "\U0010ffff", after or "", limit),
            ).fetchall()
        return [_group(r) for r in rows]

    def delete_group(self, name: str) -> int:
        with self._tx() as conn:
            if conn.execute(Q["delete_group"], (name,)).rowcount == 0:
                raise GroupNotFound(name)
            return int(conn.execute(Q["delete_group_schedules"], (name,)).rowcount)

    def tag_group(self, name: str, tags: dict[str, str], now: int) -> None:
        with self._tx() as conn:
            if conn.execute(Q["update_group_tags"], (json.dumps(tags), now, name)).rowcount == 0:
                raise GroupNotFound(name)

    # schedules -----------------------------------------------------------------------------

    @staticmethod
    def _params(row: NewSchedule, texts: dict[int, str] | None = None) -> tuple[Any, ...]:
        s = row.spec
        if texts is None:
            target = target_text(s.target)
        else:  # many schedules of a fan-out share one Target object: serialise it once
            target = texts.get(id(s.target)) or texts.setdefault(id(s.target),
                                                                 target_text(s.target))
        return (s.state.value, s.expression, s.timezone, s.start_ms, s.end_ms,
                s.flexible_window_minutes, target, s.action_after_completion.value,
                s.description)

    def insert_schedules(self, rows: Sequence[NewSchedule], now: int) -> list[bool]:
        texts: dict[int, str] = {}
        params = [(r.spec.group, r.spec.name, *self._params(r, texts), r.spec.client_token,
                   r.next_fire_at, r.due_at, now, now) for r in rows]
        with self._tx() as conn:
            for g in {r.spec.group for r in rows}:
                if conn.execute("SELECT 1 FROM schedule_groups WHERE name = ?", (g,)).fetchone()\
                        is None:
                    raise GroupNotFound(g)
            # Fast path: one executemany; its total rowcount tells whether every row went in.
            # Only when some already existed do we need per-row answers: redo those
            # one by one (the rows are identical, so the second insert of each is a no-op).
            savepoint = "SAVEPOINT bulk"
            conn.execute(savepoint)
            cur = conn.executemany(Q["insert_schedule"], params)
            if cur.rowcount == len(params):
                conn.execute("RELEASE bulk")
                return [True] * len(params)
            conn.execute("ROLLBACK TO bulk")
            conn.execute("RELEASE bulk")
            return [conn.execute(Q["insert_schedule"], p).rowcount > 0 for p in params]

    def insert_schedule_rows(self, rows: Sequence[ScheduleRow],
                             campaign: str | None = None) -> int:
        with self._tx() as conn:
            for g in {r[0] for r in rows}:
                if conn.execute("SELECT 1 FROM schedule_groups WHERE name = ?", (g,)).fetchone()\
                        is None:
                    raise GroupNotFound(g)
            count = int(conn.executemany(Q["insert_schedule"], rows).rowcount)
            if campaign is not None and count:
                conn.execute(Q["add_campaign_created"], (count, campaign))
            return count

    def get_schedule(self, group: str, name: str) -> Schedule:
        with self._lock:
            row = self._conn.execute(Q["schedule_columns"] + " WHERE group_name = ? AND name = ?",
                                     (group, name)).fetchone()
        if row is None:
            raise ScheduleNotFound(f"{group}/{name}", f"Schedule {name} does not exist.")
        return schedule_from_row(row)

    def list_schedules(self, group: str | None, prefix: str, state: str | None,
                       after: tuple[str, str] | None, limit: int) -> list[Schedule]:
        sql = Q["schedule_columns"] + " WHERE name >= ? AND name < ?"
        args: list[Any] = [prefix, prefix + "\U0010ffff"]
        if group is not None:
            sql += " AND group_name = ?"
            args.append(group)
        if state is not None:
            sql += " AND state = ?"
            args.append(state)
        if after is not None:
            sql += " AND (group_name, name) > (?, ?)"
            args.extend(after)
        sql += " ORDER BY group_name, name LIMIT ?"
        args.append(limit)
        with self._lock:
            rows = self._conn.execute(sql, args).fetchall()
        return [schedule_from_row(r) for r in rows]

    def replace_schedule(self, row: NewSchedule, now: int) -> Schedule:
        s = row.spec
        with self._tx() as conn:
            cur = conn.execute(Q["replace_schedule"], (*self._params(row), row.next_fire_at,
                                                       row.due_at, now, s.group, s.name))
            if cur.rowcount == 0:
                raise ScheduleNotFound(f"{s.group}/{s.name}", f"Schedule {s.name} does not exist.")
        return self.get_schedule(s.group, s.name)

    def delete_schedule(self, group: str, name: str) -> None:
        with self._tx() as conn:
            if conn.execute(Q["delete_schedule"], (group, name)).rowcount == 0:
                raise ScheduleNotFound(f"{group}/{name}", f"Schedule {name} does not exist.")

    def next_due_at(self) -> int | None:
        with self._lock:
            row = self._conn.execute(Q["next_due_at"]).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def claim_due_schedules(self, now: int, limit: int, claim_ms: int,
                            token: int) -> list[Schedule]:
        with self._tx() as conn:
            rows = conn.execute(Q["claim_due"], (now + claim_ms, token, now, limit)).fetchall()
        schedules = [schedule_from_row(r) for r in rows]
        schedules.sort(key=lambda s: (s.next_fire_at or 0, s.id))
        return schedules

    def complete_firings(self, firings: Sequence[Firing], now: int) -> list[bool]:
        deletes = [(f.schedule_id, f.claim_token, f.occurrence) for f in firings if f.delete]
        advances = [(f.next_fire_at, f.due_at, now if f.fired else None, f.schedule_id,
                     f.claim_token, f.occurrence) for f in firings if not f.delete]
        with self._tx() as conn:
            # Fast path: all claims still held (the usual case) shows in the total rowcount
            # of one executemany per statement; otherwise redo row by row for the answers.
            conn.execute("SAVEPOINT fire")
            n = 0
            if deletes:
                n += conn.executemany(Q["delete_fired_schedule"], deletes).rowcount
            if advances:
                n += conn.executemany(Q["advance_schedule"], advances).rowcount
            if n == len(firings):
                conn.execute("RELEASE fire")
                held = [True] * len(firings)
            else:
                conn.execute("ROLLBACK TO fire")
                conn.execute("RELEASE fire")
                held = []
                for f in firings:
                    if f.delete:
                        cur = conn.execute(Q["delete_fired_schedule"],
                                           (f.schedule_id, f.claim_token, f.occurrence))
                    else:
                        cur = conn.execute(Q["advance_schedule"],
                                           (f.next_fire_at, f.due_at, now if f.fired else None,
                                            f.schedule_id, f.claim_token, f.occurrence))
                    held.append(cur.rowcount > 0)
            pending: dict[tuple[int, bool], list[Any]] = {}
            for f, ok in zip(firings, held, strict=True):
                if ok:
                    for tm in f.messages:
                        pending.setdefault((tm.queue_id, tm.fifo), []).append(tm.message)
            for (queue_id, fifo), messages in pending.items():
                self._write_messages(conn, queue_id, messages, fifo, now)
        return held

    def count_schedules(self) -> int:
        with self._lock:
            return int(self._conn.execute(Q["count_schedules"]).fetchone()[0])

