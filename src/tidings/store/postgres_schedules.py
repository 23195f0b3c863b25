"""The schedule half of the PostgreSQL store (mixed into `PostgresStore`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import psycopg

from tidings.errors import GroupNotFound, ScheduleNotFound
from tidings.model.schedules import Schedule, ScheduleGroup, target_text
from tidings.store.base import Firing, NewSchedule, ScheduleRow
from tidings.store.sqlfiles import queries
from tidings.store.sqlite_schedules import schedule_from_row

Q = queries("postgres")
SCHEDULES_CHANNEL = "schedules"
_STAGE_TYPES = ["text", "text", "text", "text", "text", "int8", "int8", "int4", "text", "text",
                "text", "text", "int8", "int8", "int8", "int8"]


def _group(r: Sequence[Any]) -> ScheduleGroup:
    return ScheduleGroup(r[0], r[1], r[2], json.loads(r[3]))


class PostgresSchedules:
    # Provided by PostgresStore, which mixes this class in.
    def _tx(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def _write_messages(self, conn: psycopg.Connection[Any], queue_id: int, messages: Any,
                        fifo: bool, now: int) -> Any:
        raise NotImplementedError

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        with self._tx() as conn:
            return conn.execute(sql, args).fetchall()

    # groups ------------------------------------------------------------------------------

    def create_group(self, name: str, tags: dict[str, str], now: int) -> bool:
        with self._tx() as conn:
            return conn.execute(Q["insert_group"], (name, now, now, json.dumps(tags))).rowcount > 0

    def get_group(self, name: str) -> ScheduleGroup:
        rows = self._rows(Q["group_columns"] + " WHERE name = %s", (name,))
        if not rows:
            raise GroupNotFound(name)
        return _group(rows[0])

    def list_groups(self, prefix: str, after: str | None, limit: int) -> list[ScheduleGroup]:
        rows = self._rows(Q["group_columns"] + ' WHERE starts_with(name, %s) AND name COLLATE "C"'
                          ' > %s ORDER BY name COLLATE "C" LIMIT %s', (prefix, after or "", limit))
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

    def insert_schedules(self, rows: Sequence[NewSchedule], now: int) -> list[bool]:
        if not rows:
            return []
        texts: dict[int, str] = {}
        staged: list[ScheduleRow] = []
        for r in rows:
            s = r.spec
            target = texts.get(id(s.target)) or texts.setdefault(id(s.target),
                                                                 target_text(s.target))
            staged.append((s.group, s.name, s.state.value, s.expression, s.timezone, s.start_ms,
                           s.end_ms, s.flexible_window_minutes, target,
                           s.action_after_completion.value, s.description, s.client_token,
                           r.next_fire_at, r.due_at, now, now))
        with self._tx() as conn:
            self._stage(conn, staged)
            # Usually every row is new: then the count says so and no names travel back.
            # Otherwise undo and insert again, asking which rows went in.
            conn.execute("SAVEPOINT bulk")
            count = conn.execute(Q["insert_staged_schedules"]).rowcount
            if count == len(rows):
                conn.execute(Q["notify"], (SCHEDULES_CHANNEL,))
                return [True] * len(rows)
            conn.execute("ROLLBACK TO SAVEPOINT bulk")
            inserted = {(g, n) for g, n in conn.execute(
                Q["insert_staged_schedules"] + " RETURNING group_name, name").fetchall()}
            if inserted:
                conn.execute(Q["notify"], (SCHEDULES_CHANNEL,))
        return [(r.spec.group, r.spec.name) in inserted for r in rows]

    def insert_schedule_rows(self, rows: Sequence[ScheduleRow],
                             campaign: str | None = None) -> int:
        if not rows:
            return 0
        with self._tx() as conn:
            self._stage(conn, rows)
            count = int(conn.execute(Q["insert_staged_schedules"]).rowcount)
            if count:
                conn.execute(Q["notify"], (SCHEDULES_CHANNEL,))
                if campaign is not None:
                    conn.execute(Q["add_campaign_created"], (count, campaign))
            return count

    @staticmethod
    def _stage(conn: psycopg.Connection[Any], rows: Sequence[ScheduleRow]) -> None:
        """COPY rows into the session's staging table, after checking their groups."""
        for g in {r[0] for r in rows}:
            if conn.execute("SELECT 1 FROM schedule_groups WHERE name = %s",
                            (g,)).fetchone() is None:
                raise GroupNotFound(g)
        conn.execute(Q["stage_schedules"])
        with conn.cursor() as cur, cur.copy(Q["copy_schedules"]) as copy:
            copy.set_types(_STAGE_TYPES)  # binary COPY: no text parsing server-side
            for row in rows:
                copy.write_row(row)

    def get_schedule(self, group: str, name: str) -> Schedule:
        rows = self._rows(Q["schedule_columns"] + " WHERE group_name = %s AND name = %s",
                          (group, name))
        if not rows:
            raise ScheduleNotFound(f"{group}/{name}", f"Schedule {name} does not exist.")
        return schedule_from_row(rows[0])

    def list_schedules(self, group: str | None, prefix: str, state: str | None,
                       after: tuple[str, str] | None, limit: int) -> list[Schedule]:
        sql = Q["schedule_columns"] + " WHERE starts_with(name, %s)"
        args: list[Any] = [prefix]
        if group is not None:
            sql += " AND group_name = %s"
            args.append(group)
        if state is not None:
            sql += " AND state = %s"
            args.append(state)
        if after is not None:
            sql += ' AND (group_name COLLATE "C", name COLLATE "C") > (%s, %s)'
            args.extend(after)
        sql += ' ORDER BY group_name COLLATE "C", name COLLATE "C" LIMIT %s'
        args.append(limit)
        return [schedule_from_row(r) for r in self._rows(sql, args)]

    def replace_schedule(self, row: NewSchedule, now: int) -> Schedule:
        s = row.spec
        with self._tx() as conn:
            cur = conn.execute(Q["replace_schedule"], (
                s.state.value, s.expression, s.timezone, s.start_ms, s.end_ms,
                s.flexible_window_minutes, target_text(s.target), s.action_after_completion.value,
                s.description, row.next_fire_at, row.due_at, now, s.group, s.name))
            if cur.rowcount == 0:
                raise ScheduleNotFound(f"{s.group}/{s.name}", f"Schedule {s.name} does not exist.")
            conn.execute(Q["notify"], (SCHEDULES_CHANNEL,))
        return self.get_schedule(s.group, s.name)

    def delete_schedule(self, group: str, name: str) -> None:
        with self._tx() as conn:
            if conn.execute(Q["delete_schedule"], (group, name)).rowcount == 0:
                raise ScheduleNotFound(f"{group}/{name}", f"Schedule {name} does not exist.")

    def next_due_at(self) -> int | None:
        rows = self._rows(Q["next_due_at"])
        return None if not rows or rows[0][0] is None else int(rows[0][0])

    def claim_due_schedules(self, now: int, limit: int, claim_ms: int,
                            token: int) -> list[Schedule]:
        rows = self._rows(Q["claim_due"], (now + claim_ms, token, now, limit))
        schedules = [schedule_from_row(r) for r in rows]
        schedules.sort(key=lambda s: (s.next_fire_at or 0, s.id))
        return schedules

    def complete_firings(self, firings: Sequence[Firing], now: int) -> list[bool]:
        deletes = [f for f in firings if f.delete]
        advances = [f for f in firings if not f.delete]
        with self._tx() as conn:
            held: set[int] = set()
            if deletes:
                held.update(r[0] for r in conn.execute(Q["delete_fired_schedules"], (
                    [f.schedule_id for f in deletes], [f.claim_token for f in deletes],
                    [f.occurrence for f in deletes])).fetchall())
            if advances:
                held.update(r[0] for r in conn.execute(Q["advance_schedules"], (
                    [f.schedule_id for f in advances], [f.claim_token for f in advances],
                    [f.occurrence for f in advances], [f.next_fire_at for f in advances],
                    [f.due_at for f in advances],
                    [now if f.fired else None for f in advances])).fetchall())
            pending: dict[tuple[int, bool], list[Any]] = {}
            for f in firings:
                if f.schedule_id in held:
                    for tm in f.messages:
                        pending.setdefault((tm.queue_id, tm.fifo), []).append(tm.message)
            for (queue_id, fifo), messages in pending.items():
                self._write_messages(conn, queue_id, messages, fifo, now)
        return [f.schedule_id in held for f in firings]

    def count_schedules(self) -> int:
        return int(self._rows(Q["count_schedules"])[0][0])


