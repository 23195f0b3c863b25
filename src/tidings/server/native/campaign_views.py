"""The native JSON shapes of campaigns and a recipient's steps, shared by the HTTP API and
the CLI's `--json` (kept free of FastAPI: the CLI loads this module on every run)."""

from __future__ import annotations

from typing import Any

from tidings.campaigns.service import RecipientStep
from tidings.clock import iso
from tidings.model.campaigns import CampaignRecord
from tidings.model.states import ScheduleState


def campaign_json(r: CampaignRecord) -> dict[str, Any]:
    """A campaign in a listing (its status and counts: `CampaignView.to_json`)."""
    return {"name": r.name, "status": r.status.value,
            "steps": [s.to_json() for s in r.steps],
            "schedules_created": r.schedules_created, "row_errors": r.row_errors,
            "created_at": r.created_at}


def recipient_step_json(step: RecipientStep) -> dict[str, Any]:
    s = step.schedule
    return {
        "step": step.step, "schedule": step.schedule_name,
        "state": ("fired" if s is None else
                  "paused" if s.spec.state is ScheduleState.DISABLED else "scheduled"),
        "due_at": None if s is None or s.due_at is None else iso(s.due_at),
        "deliveries": [{"id": d.id, "state": d.state.value, "recipients": list(d.recipients),
                        "updated_at": iso(d.updated_at), "detail": d.detail}
                       for d in step.deliveries]}


def recipient_json(campaign: str, recipient_id: str,
                   steps: list[RecipientStep]) -> dict[str, Any]:
    return {"campaign": campaign, "recipient": recipient_id,
            "steps": [recipient_step_json(s) for s in steps]}
