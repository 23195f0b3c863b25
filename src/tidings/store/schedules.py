"""Schedules and schedule groups: the `ScheduleStore` half of `SqlStore`.

A firing is a compare-and-set on what its pass read of the row (store/firing.py): a node
that lost its rows (stalled past its hold, or killed) writes nothing, so each occurrence
fires once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from tidings.errors import GroupNotFound, ScheduleNotFound
from tidings.model.schedules import Schedule, ScheduleGroup, ScheduleRow, target_text
from tidings.notify.base import SCHEDULES_CHANNEL, wakes_dispatchers
from tidings.store import rows
from tidings.store.base import FiringOutcome, NewSchedule
from tidings.store.driver import Conn
from tidings.store.firing import SqlFiringPass
from tidings.store.sqlbase import SqlBase


def _not_found(group: str, name: str) -> ScheduleNotFound:
    return ScheduleNotFound(f"{group}/{name}", f"Schedule {name} does not exist.")


def schedule_rows(new: Sequence[NewSchedule], now: int) -> list[ScheduleRow]:
    texts: dict[int, str] = {}  # a fan-out's specs share one Target: serialise it once
    out = []
    for r in new:
        s = r.spec
        target = texts.get(id(s.target)) or texts.setdefault(id(s.target),
                                                             target_text(s.target))
        out.append(ScheduleRow(s.group, s.name, s.state.value, s.expression, s.timezone,
                               s.start_ms, s.end_ms, s.flexible_window_minutes, target,
                               s.action_after_completion.value, s.description,
                               s.client_token, r.next_fire_at, r.due_at, now, now))
    return out


class SqlSchedules(SqlBase):
    # groups -----------------------------------------------------------------------------

    def create_group(self, name: str, tags: dict[str, str], now: int,
                     client_token: str | None = None) -> bool:
        with self.driver.auto() as conn:
            return bool(conn.execute(self.q["insert_group"], (name, now, now, json.dumps(tags),
                                                              client_token)).rowcount > 0)

    def get_group(self, name: str) -> ScheduleGroup:
        return rows.schedule_group(self._found("group_by_name", (name,), GroupNotFound, name))

    def list_groups(self, prefix: str, after: str | None, limit: int) -> list[ScheduleGroup]:
        return [rows.schedule_group(r) for r in self._all(
            "list_groups", (*rows.prefix_range(prefix), after or "", limit))]

    def delete_group(self, name: str) -> int:
        with self.driver.tx() as conn:
            if conn.execute(self.q["delete_group"], (name,)).rowcount == 0:
                raise GroupNotFound(name)
            return int(conn.execute(self.q["delete_group_schedules"], (name,)).rowcount)

    def tag_group(self, name: str, tags: dict[str, str], now: int) -> None:
        with self.driver.auto() as conn:
            if conn.execute(self.q["update_group_tags"],
                            (json.dumps(tags), now, name)).rowcount == 0:
                raise GroupNotFound(name)

    # schedules --------------------------------------------------------------------------

    def _check_groups(self, conn: Conn, groups: set[str]) -> None:
        for group in groups:
            if conn.execute(self.q["group_by_name"], (group,)).fetchone() is None:
                raise GroupNotFound(group)

    def insert_schedules(self, rows: Sequence[NewSchedule], now: int) -> list[bool]:
        staged = schedule_rows(rows, now)
        if not staged:
            return []
        with self.driver.tx() as conn:
            self._check_groups(conn, {r.group for r in staged})
            # Usually every row is new: then the count says so and nothing else travels.
            # Otherwise undo and insert again, asking which rows went in.
            conn.execute(self.q["savepoint"])
            if self.driver.insert_schedule_rows(conn, staged) == len(staged):
                conn.execute(self.q["release_savepoint"])
                inserted = [True] * len(staged)
            else:
                conn.execute(self.q["rollback_to_savepoint"])
                conn.execute(self.q["release_savepoint"])
                inserted = self.driver.run_each(conn, "insert_schedule", staged, key=2)
            if any(ok and wakes_dispatchers(r.due_at, now, self.wake_horizon_ms)
                   for r, ok in zip(staged, inserted, strict=True)):
                self.driver.notify(conn, SCHEDULES_CHANNEL)
        return inserted

    def create_schedule(self, row: NewSchedule, now: int, connection: Any = None,
                        ) -> Schedule | None:
        s = row.spec  # ScheduleRow's columns, then the group again: one plain tuple
        params = (s.group, s.name, s.state.value, s.expression, s.timezone, s.start_ms,
                  s.end_ms, s.flexible_window_minutes, target_text(s.target),
                  s.action_after_completion.value, s.description, s.client_token,
                  row.next_fire_at, row.due_at, now, now, s.group)
        with (self.driver.auto() if connection is None
              else self.driver.borrow(connection)) as conn:
            made = self.driver.insert_id(conn, "create_schedule", params)
            if made is not None and wakes_dispatchers(row.due_at, now, self.wake_horizon_ms):
                self.driver.notify(conn, SCHEDULES_CHANNEL)
        if made is None:
            return None
        return Schedule(spec=row.spec, id=made, next_fire_at=row.next_fire_at,
                        due_at=row.due_at, last_fired_at=None, created_at=now, modified_at=now,
                        version=0)

    def insert_schedule_rows(self, rows: Sequence[ScheduleRow],
                             campaign: str | None = None) -> int:
        if not rows:
            return 0
        with self.driver.tx() as conn:
            self._check_groups(conn, {r.group for r in rows})
            count = self.driver.insert_schedule_rows(conn, rows)
            if count:
                self.driver.notify(conn, SCHEDULES_CHANNEL)
                if campaign is not None:
                    conn.execute(self.q["add_campaign_created"], (count, campaign))
        return count

    def get_schedule(self, group: str, name: str) -> Schedule:
        row = self._one("schedule_by_name", (group, name))
        if row is None:
            raise _not_found(group, name)
        return rows.schedule(row)

    def list_schedules(self, group: str | None, prefix: str, state: str | None,
                       after: tuple[str, str] | None, limit: int) -> list[Schedule]:
        lo, hi = rows.prefix_range(prefix)
        after_group, after_name = after or ("", "")
        if group is None:
            found = self._all("list_schedules", {
                "lo": lo, "hi": hi, "state": state, "after_group": after_group,
                "after_name": after_name, "limit": limit})
        elif after_group > group:
            found = []  # the page token is past this group already
        else:
            found = self._all("list_group_schedules", {
                "group": group, "lo": lo, "hi": hi, "state": state,
                "after_name": after_name if after_group == group else "", "limit": limit})
        return [rows.schedule(r) for r in found]

    def replace_schedule(self, row: NewSchedule, now: int) -> Schedule:
        s = row.spec
        (staged,) = schedule_rows([row], now)
        with self.driver.tx() as conn:
            if conn.execute(self.q["replace_schedule"], (
                    staged.state, staged.expression, staged.timezone, staged.start_ms,
                    staged.end_ms, staged.flexible_window_minutes, staged.target,
                    staged.action_after_completion, staged.description, row.next_fire_at,
                    row.due_at, now, s.group, s.name)).rowcount == 0:
                raise _not_found(s.group, s.name)
            if wakes_dispatchers(row.due_at, now, self.wake_horizon_ms):
                self.driver.notify(conn, SCHEDULES_CHANNEL)
            return rows.schedule(conn.execute(self.q["schedule_by_name"],
                                              (s.group, s.name)).fetchone())

    def delete_schedule(self, group: str, name: str) -> None:
        with self.driver.auto() as conn:
            if conn.execute(self.q["delete_schedule"], (group, name)).rowcount == 0:
                raise _not_found(group, name)

    def next_due_at(self) -> int | None:
        row = self._one("next_due_at")
        return None if row is None or row[0] is None else int(row[0])

    def warm_due(self, start: int, until: int, limit: int) -> tuple[int, int | None]:
        count, last = self._one("warm_due", (start, until, limit))[:2]
        return int(count), None if last is None else int(last)

    @contextmanager
    def firing_pass(self, now: int, limit: int, hold_ms: int) -> Iterator[SqlFiringPass]:
        if self.driver.single_writer:
            # Read, don't mark: marking would rewrite each row (and move it in the due_at
            # index) for nothing, since the completion compares what the pass read. A
            # read: the other process's writers go on while this pass plans.
            with self.driver.read() as conn:
                found = conn.execute(self.q["read_due"], (now, limit)).fetchall()
            held = SqlFiringPass(self, found, None)
            try:
                yield held
            finally:
                held.close()
            return
        # Many writers (PostgreSQL): one transaction, whose claim locks the rows instead of
        # marking them (a mark wrote each row, and its WAL, once more, and cost a commit of
        # its own). The idle limit is `hold_ms`: a pass whose node stalls that long is
        # ended by the server, and its rows go to another node.
        with self.driver.tx() as conn:
            found = conn.execute(self.q["lock_due"],
                                 (f"{max(hold_ms, 1)}ms", now, limit)).fetchall()
            held = SqlFiringPass(self, found, conn)
            try:
                yield held
            finally:
                held.close()

    # firing history ---------------------------------------------------------------------

    def record_firings(self, outcomes: Sequence[FiringOutcome]) -> None:
        if outcomes:
            with self.driver.tx() as conn:
                self.driver.run_each(conn, "insert_firings", outcomes)

    def recent_firings(self, schedule_id: int, since: int,
                       limit: int) -> list[FiringOutcome]:
        return [FiringOutcome(schedule_id, int(occ), int(at), str(outcome), int(attempts),
                              detail)
                for occ, at, outcome, attempts, detail in
                self._all("recent_firings", (schedule_id, since, limit))]

    def trim_firings(self, before: int, limit: int) -> int:
        # Ids grow with time: the rows to delete are the lowest ids, found by a scan in id
        # order that stops at the first row to keep (no index on the instant needed).
        lo, hi = self._one("firings_id_range")
        if lo is None:
            return 0
        end = min(int(hi) + 1, int(lo) + limit)
        keep = self._one("firings_trim_bound", (end, before))
        if keep is not None:
            end = int(keep[0])
        with self.driver.auto() as conn:
            return int(conn.execute(self.q["trim_firings"], (end,)).rowcount)

    def count_schedules(self) -> int:
        return int(self._one("count_schedules")[0])

    # group-wide reads (campaigns, forecasts) --------------------------------------------

    def disabled_schedules(self, group: str, after: str, limit: int,
                           ) -> list[tuple[str, int | None, int | None]]:
        return [(name, nxt, flex) for name, nxt, flex in
                self._all("disabled_schedules", (group, after, limit))]

    def schedule_state_counts(self, group: str) -> dict[str, int]:
        return {state: int(n) for state, n in self._all("schedule_state_counts", (group,))}

    def firing_counts(self, start_ms: int, end_ms: int, bucket_ms: int, *,
                      by_occurrence: bool = False) -> list[tuple[int, str, int]]:
        query = "firings_by_occurrence" if by_occurrence else "firings_by_due"
        found: list[Any] = self._all(query, (bucket_ms, start_ms, end_ms))
        return [(int(bucket) * bucket_ms, str(kind), int(n)) for bucket, kind, n in found]

    def firing_counts_by_destination(self, start_ms: int, end_ms: int, bucket_ms: int, *,
                                     group: str | None = None
                                     ) -> list[tuple[int, str, str, int]]:
        found: list[Any] = (
            self._all("firings_by_due_destination", (bucket_ms, start_ms, end_ms))
            if group is None else self._all("group_firings_by_due_destination", {
                "group": group, "bucket": bucket_ms, "lo": start_ms, "hi": end_ms}))
        return [(int(bucket) * bucket_ms, str(kind), str(dest or ""), int(n))
                for bucket, kind, dest, n in found]

    def firing_inputs(self, start_ms: int, end_ms: int, bucket_ms: int, *, kind: str,
                      group: str | None = None) -> list[tuple[int, str, int]]:
        found: list[Any] = self._all("firings_by_due_input", {
            "kind": kind, "group": group, "bucket": bucket_ms, "lo": start_ms,
            "hi": end_ms})
        return [(int(bucket) * bucket_ms, str(text), int(n)) for bucket, text, n in found
                if text is not None]
