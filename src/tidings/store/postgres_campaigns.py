"""The campaign half of the PostgreSQL store (mixed into `PostgresStore`)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import psycopg

from tidings.model.campaigns import CampaignNotFound, CampaignRecord, CampaignStatus, Step
from tidings.store.campaign_rows import campaign_from_row, prefix_range, steps_text
from tidings.store.sqlfiles import queries

Q = queries("postgres")
SCHEDULES_CHANNEL = "schedules"


class PostgresCampaigns:
    # Provided by PostgresStore, which mixes this class in.
    def _tx(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def _fetch(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        with self._tx() as conn:
            return conn.execute(sql, args).fetchall()

    def create_campaign(self, record: CampaignRecord) -> bool:
        r = record
        with self._tx() as conn:
            return conn.execute(Q["insert_campaign"], (
                r.name, steps_text(r.steps), r.template, r.status.value, r.created_at,
                r.modified_at)).rowcount > 0

    def get_campaign(self, name: str) -> CampaignRecord:
        rows = self._fetch(Q["campaign_columns"] + " WHERE name = %s", (name,))
        if not rows:
            raise CampaignNotFound(name, f"Campaign {name} does not exist.")
        return campaign_from_row(rows[0])

    def list_campaigns(self, after: str | None, limit: int) -> list[CampaignRecord]:
        rows = self._fetch(Q["campaign_columns"] + ' WHERE name COLLATE "C" > %s'
                           ' ORDER BY name COLLATE "C" LIMIT %s', (after or "", limit))
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
        rows = self._fetch(Q["paused_page"], (group, after, limit))
        return [(r[0], r[1], r[2]) for r in rows]

    def enable_schedules(self, group: str, dues: Sequence[tuple[str, int | None]],
                         now: int) -> int:
        with self._tx() as conn:
            n = conn.execute(Q["enable_schedules"], (
                now, [d[0] for d in dues], [d[1] for d in dues], group)).rowcount
            if n:
                conn.execute(Q["notify"], (SCHEDULES_CHANNEL,))
            return int(n)

    def delete_named_schedules(self, group: str, names: Sequence[str]) -> int:
        with self._tx() as conn:
            return int(conn.execute(Q["delete_named_schedules"], (group, list(names))).rowcount)

    def delete_schedules_in_group(self, group: str) -> int:
        with self._tx() as conn:
            return int(conn.execute(Q["delete_group_schedules"], (group,)).rowcount)

    def group_state_counts(self, group: str) -> dict[str, int]:
        return {r[0]: int(r[1]) for r in self._fetch(Q["group_state_counts"], (group,))}

    def delivery_state_counts(self, schedule_prefix: str) -> dict[str, int]:
        try:
            rows = self._fetch(Q["delivery_state_counts"], prefix_range(schedule_prefix))
        except psycopg.errors.UndefinedTable:
            return {}  # a database without the email migration has no deliveries yet
        return {r[0]: int(r[1]) for r in rows}

    def firing_counts(self, start_ms: int, end_ms: int, bucket_ms: int, *,
                      by_occurrence: bool = False) -> list[tuple[int, str, int]]:
        query = "firings_by_occurrence" if by_occurrence else "firings_by_due"
        rows = self._fetch(Q[query], (bucket_ms, start_ms, end_ms))
        return [(int(r[0]) * bucket_ms, str(r[1]), int(r[2])) for r in rows]
