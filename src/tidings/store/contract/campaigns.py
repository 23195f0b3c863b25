"""Campaigns: what `campaigns.service` asks of the store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tidings.model.campaigns import CampaignRecord, Step
from tidings.model.states import CampaignStatus


class CampaignStore(Protocol):
    """Campaign records, and the changes of status that act on the campaign's schedules in
    the same transaction (so a pause, a resume and a cancel cannot interleave)."""

    def create_campaign(self, record: CampaignRecord) -> bool:
        """Insert; False when a campaign of that name exists (left untouched)."""
        ...

    def get_campaign(self, name: str) -> CampaignRecord: ...
    def list_campaigns(self, after: str | None, limit: int) -> list[CampaignRecord]: ...
    def update_campaign_steps(self, name: str, steps: Sequence[Step], now: int) -> None: ...
    def add_campaign_progress(self, name: str, rows_read: int, row_errors: int, created: int,
                              now: int) -> None:
        """Rows read and row errors keep their maximum (a re-run reads the rows again);
        schedules created add up."""
        ...

    def set_campaign_status(self, name: str, current: CampaignStatus, new: CampaignStatus,
                            now: int) -> int:
        """Compare-and-set the status (`ConflictError` when it is no longer `current`) and,
        in the same transaction, disable the group's schedules (PAUSED) or delete them
        and count them as cancelled (CANCELLED); returns how many schedules changed."""
        ...

    def enable_campaign_schedules(self, name: str, dues: Sequence[tuple[str, int | None]],
                                  now: int) -> int:
        """Enable the named disabled schedules with their new due_at, only while the
        campaign is ACTIVE (`ConflictError` otherwise); returns how many."""
        ...

    def cancel_campaign_schedules(self, name: str, schedule_names: Sequence[str],
                                  now: int) -> int:
        """Delete the named schedules and count them as cancelled; returns how many."""
        ...

    def campaign_step_cancelled(self, name: str) -> dict[str, int]:
        """How many schedules of each step were cancelled (counted as they were deleted,
        by a campaign's cancel or a recipient's); a step with none is absent."""
        ...
