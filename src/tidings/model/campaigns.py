"""Campaigns: a schedule group of per-recipient, one-shot email schedules plus its record.

Rules:
- A campaign's schedules live in the schedule group named after the campaign, so the
  campaign name follows the group-name rule (1-64 of letters, digits, '-', '_', '.').
- Each (step, recipient) pair has one schedule named `{step}-{recipient}`: a re-run finds
  the names it already created and skips them, so nothing is created twice.
- Recipient ids outside the name charset (or too long) are sanitised: other characters
  become '_' and a short stable hash of the original id is appended, so two ids that
  sanitise alike still get distinct names. Ids already in the charset are used as they are.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from tidings.errors import NotFoundError, ValidationError
from tidings.model.schedules import check_name
from tidings.model.states import CampaignStatus as CampaignStatus  # re-exported

STEP_RE = re.compile(r"^[0-9a-zA-Z_.]{1,20}$")
_CLEAN_ID = re.compile(r"^[0-9a-zA-Z\-_.]+$")
_DIRTY = re.compile(r"[^0-9a-zA-Z\-_.]")
MAX_NAME = 64
HASH_CHARS = 8


class CampaignNotFound(NotFoundError):
    """The campaign does not exist."""

    kind = "campaign"
    wording = "Campaign {ident} does not exist."


def check_campaign_name(name: str) -> str:
    return check_name("Campaign", name)


@dataclass(frozen=True)
class Step:
    """One drip step: `day` calendar days after the base date, at `time` local (None: the
    run's own time), with `template` (None: the campaign's template)."""

    name: str
    day: int = 0
    time: str | None = None  # HH:MM or HH:MM:SS
    template: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "day": self.day, "time": self.time,
                "template": self.template}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Step:
        return cls(doc["name"], int(doc.get("day", 0)), doc.get("time"), doc.get("template"))


def check_step_name(name: str) -> str:
    if not STEP_RE.match(name):
        raise ValidationError("Step", f"{name!r}: a step name is 1-20 letters, digits, '_' "
                              "or '.'")
    return name


#: Room for the recipient in a name: whatever the steps (up to 20 characters and '-'), so a
#: recipient's key never depends on which steps a campaign has.
ID_ROOM = MAX_NAME - 21


def recipient_key(recipient_id: str) -> str:
    """The recipient's part of its schedule names (see the module rules)."""
    room = ID_ROOM
    if len(recipient_id) <= room and _CLEAN_ID.match(recipient_id):
        return recipient_id
    digest = hashlib.blake2b(recipient_id.encode(), digest_size=HASH_CHARS // 2).hexdigest()
    clean = _DIRTY.sub("_", recipient_id)[: room - HASH_CHARS - 1]
    return f"{clean}-{digest}"


@dataclass(frozen=True)
class CampaignRecord:
    name: str
    steps: tuple[Step, ...]
    template: str | None
    status: CampaignStatus
    rows_read: int
    schedules_created: int
    row_errors: int
    cancelled: int
    created_at: int
    modified_at: int


@dataclass(frozen=True)
class CampaignCounts:
    """Counts by status. `scheduled` = schedules still in the group (split into enabled and
    disabled); fired/sent/suppressed/failed come from the delivery log (fired = every
    logged delivery, including those still being retried); `failed` includes bounces and
    rendering failures; `cancelled` = schedules removed by cancel."""

    scheduled: int
    enabled: int
    disabled: int
    fired: int
    sent: int
    suppressed: int
    failed: int
    cancelled: int

    def to_json(self) -> dict[str, int]:
        return dict(self.__dict__)
