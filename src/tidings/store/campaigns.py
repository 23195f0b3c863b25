"""Campaign records: the `CampaignStore` part of `SqlStore`.

A change of a campaign's status and its effect on the campaign's schedules happen in one
transaction, the status written as a compare-and-set: a pause, a resume page and a cancel
therefore cannot interleave (a cancelled campaign stays cancelled; a page of a resume that
a pause overtook enables nothing).
"""

from __future__ import annotations

from collections.abc import Sequence

from tidings.errors import ConflictError
from tidings.model.campaigns import CampaignNotFound, CampaignRecord, Step
from tidings.model.states import CAMPAIGNS, CampaignStatus
from tidings.notify.base import SCHEDULES_CHANNEL
from tidings.store import rows
from tidings.store.driver import Conn
from tidings.store.sqlbase import SqlBase


class SqlCampaigns(SqlBase):
    def create_campaign(self, record: CampaignRecord) -> bool:
        r = record
        with self.driver.auto() as conn:
            return bool(conn.execute(self.q["insert_campaign"], (
                r.name, rows.steps_text(r.steps), r.template, r.status.value, r.created_at,
                r.modified_at)).rowcount > 0)

    def get_campaign(self, name: str) -> CampaignRecord:
        return rows.campaign(self._found("campaign_by_name", (name,), CampaignNotFound, name))

    def list_campaigns(self, after: str | None, limit: int) -> list[CampaignRecord]:
        return [rows.campaign(r) for r in self._all("list_campaigns", (after or "", limit))]

    def _change(self, conn: Conn, query: str, name: str, args: tuple[object, ...]) -> None:
        if conn.execute(self.q[query], (*args, name)).rowcount == 0:
            raise CampaignNotFound(name)

    def update_campaign_steps(self, name: str, steps: Sequence[Step], now: int) -> None:
        with self.driver.auto() as conn:
            self._change(conn, "update_campaign_steps", name, (rows.steps_text(steps), now))

    def add_campaign_progress(self, name: str, rows_read: int, row_errors: int, created: int,
                              now: int) -> None:
        with self.driver.auto() as conn:
            self._change(conn, "add_campaign_progress", name,
                         (rows_read, row_errors, created, now))

    def set_campaign_status(self, name: str, current: CampaignStatus, new: CampaignStatus,
                            now: int) -> int:
        CAMPAIGNS.check(current, new)
        with self.driver.tx() as conn:
            if conn.execute(self.q["set_campaign_status"],
                            (new.value, now, name, current.value)).rowcount == 0:
                if conn.execute(self.q["campaign_by_name"], (name,)).fetchone() is None:
                    raise CampaignNotFound(name)
                raise ConflictError(f"Campaign {name} is no longer {current.value}: another"
                                    " change came first")
            if new is CampaignStatus.PAUSED:
                return int(conn.execute(self.q["disable_group_schedules"], (now, name)).rowcount)
            if new is CampaignStatus.CANCELLED:
                # Step by step (a range of the group's names each), so each step's count
                # is exact; then whatever else the group holds.
                steps = rows.campaign(conn.execute(self.q["campaign_by_name"],
                                                   (name,)).fetchone()).steps
                per_step: dict[str, int] = {}
                for step in steps:
                    lo, hi = rows.prefix_range(f"{step.name}-")
                    per_step[step.name] = int(conn.execute(
                        self.q["delete_group_schedules_between"], (name, lo, hi)).rowcount)
                removed = sum(per_step.values()) + int(conn.execute(
                    self.q["delete_group_schedules"], (name,)).rowcount)
                self._add_step_cancelled(conn, name, per_step)
                self._change(conn, "add_campaign_cancelled", name, (removed, now))
                return removed
        return 0

    def enable_campaign_schedules(self, name: str, dues: Sequence[tuple[str, int | None]],
                                  now: int) -> int:
        with self.driver.tx() as conn:
            # Holds the campaign row until commit: a pause or cancel waits for this page.
            if conn.execute(self.q["lock_active_campaign"], (name,)).fetchone() is None:
                raise ConflictError(f"Campaign {name} is no longer {CampaignStatus.ACTIVE}: "
                                    "another change came first")
            enabled = sum(self.driver.run_each(conn, "enable_schedule", [
                (schedule, due, now, name) for schedule, due in dues]))
            if enabled:
                self.driver.notify(conn, SCHEDULES_CHANNEL)
        return enabled

    def cancel_campaign_schedules(self, name: str, schedule_names: Sequence[str],
                                  now: int) -> int:
        with self.driver.tx() as conn:
            gone = self.driver.run_each(conn, "delete_group_schedule", [
                (schedule, name) for schedule in schedule_names])
            removed = sum(gone)
            if removed:
                per_step: dict[str, int] = {}
                for schedule, ok in zip(schedule_names, gone, strict=True):
                    if ok:  # a step's schedule is named "{step}-{recipient key}"
                        step = schedule.split("-", 1)[0]
                        per_step[step] = per_step.get(step, 0) + 1
                self._add_step_cancelled(conn, name, per_step)
                self._change(conn, "add_campaign_cancelled", name, (removed, now))
        return removed

    def _add_step_cancelled(self, conn: Conn, name: str, per_step: dict[str, int]) -> None:
        for step, n in per_step.items():
            if n:
                conn.execute(self.q["add_step_cancelled"], (name, step, n))

    def campaign_step_cancelled(self, name: str) -> dict[str, int]:
        return {str(step): int(n) for step, n in self._all("step_cancelled_counts", (name,))}
