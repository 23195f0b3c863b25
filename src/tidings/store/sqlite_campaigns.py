"""The campaign half of the SQLite store (mixed into `SQLiteStore`)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager

from tidings.model.campaigns import CampaignNotFound, CampaignRecord, CampaignStatus, Step
from tidings.store.campaign_rows import campaign_from_row, prefix_range, steps_text
from tidings.store.sqlfiles import queries

Q = queries("sqlite")


class SQLiteCampaigns:
    _lock: threading.RLock
    _conn: sqlite3.Connection

    # Provided by SQLiteStore, which mixes this class in.
    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def create_campaign(self, record: CampaignRecord) -> bool:
        r = record
        with self._tx() as conn:
            return conn.execute(Q["insert_campaign"], (
                r.name, steps_text(r.steps), r.template, r.status.value, r.created_at,
                r.modified_at)).rowcount > 0

    def get_campaign(self, name: str) -> CampaignRecord:
        with self._lock:
            row = self._conn.execute(Q["campaign_columns"] + " WHERE name = ?",
                                     (name,)).fetchone()
        if row is None:
            raise CampaignNotFound(name, f"Campaign {name} does not exist.")
        return campaign_from_row(row)

    def list_campaigns(self, after: str | None, limit: int) -> list[CampaignRecord]:
        with self._lock:
            rows = self._conn.execute(
                Q["campaign_columns"] + " WHERE name > ? ORDER BY name LIMIT ?",
                (after or "", limit)).fetchall()
        return [campaign_from_row(r) for r in rows]

    def _change(self, query: str, name: str, args: tuple[object, ...]) -> None:
        with self._tx() as conn:
            if conn.execute(Q[query], (*args, name)).rowcount == 0:
                raise CampaignNotFound(name, f"Campaign {name} does not exist.")

    def update_campaign_steps(self, name: str, steps: Sequence[Step], now: int) -> None:
        self._change("update_campaign_steps", name, (steps_text(steps), now))

    def add_campaign_progress(self, name: str, rows_read: int, row_errors: int, created: int,
                              now: int) -> None:
        self._change("add_campaign_progress", name, (rows_read, row_errors, created, now))

    def set_campaign_status(self, name: str, status: CampaignStatus, now: int) -> None:
        self._change("set_campaign_status", name, (status.value, now))

    def add_campaign_cancelled(self, name: str, count: int, now: int) -> None:
        self._change("add_campaign_cancelled", name, (count, now))

    def pause_group_schedules(self, group: str, now: int) -> int:
        with self._tx() as conn:
            return int(conn.execute(Q["pause_group"], (now, group)).rowcount)

    def paused_schedules(self, group: str, after: str, limit: int,
                         ) -> list[tuple[str, int | None, int | None]]:
        with self._lock:
            rows = self._conn.execute(Q["paused_page"], (group, after, limit)).fetchall()
        return [(r[0], r[1], r[2]) for r in rows]

    def enable_schedules(self, group: str, dues: Sequence[tuple[str, int | None]],
                         now: int) -> int:
        with self._tx() as conn:
            cur = conn.executemany(Q["enable_schedule"],
                                   [(due, now, group, name) for name, due in dues])
            return int(cur.rowcount)

    def delete_named_schedules(self, group: str, names: Sequence[str]) -> int:
        with self._tx() as conn:
            cur = conn.executemany(Q["delete_schedule"], [(group, n) for n in names])
            return int(cur.rowcount)

    def delete_schedules_in_group(self, group: str) -> int:
        with self._tx() as conn:
            return int(conn.execute(Q["delete_group_schedules"], (group,)).rowcount)

    def group_state_counts(self, group: str) -> dict[str, int]:
        with self._lock:
            rows = self._conn.execute(Q["group_state_counts"], (group,)).fetchall()
        return {r[0]: int(r[1]) for r in rows}

    def delivery_state_counts(self, schedule_prefix: str) -> dict[str, int]:
        with self._lock:
            rows = self._conn.execute(Q["delivery_state_counts"],
                                      prefix_range(schedule_prefix)).fetchall()
        return {r[0]: int(r[1]) for r in rows}

    def firing_counts(self, start_ms: int, end_ms: int, bucket_ms: int, *,
                      by_occurrence: bool = False) -> list[tuple[int, str, int]]:
        query = "firings_by_occurrence" if by_occurrence else "firings_by_due"
        with self._lock:
            rows = self._conn.execute(Q[query], (bucket_ms, start_ms, end_ms)).fetchall()
        return [(int(r[0]) * bucket_ms, str(r[1]), int(r[2])) for r in rows]
