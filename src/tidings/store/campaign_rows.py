"""Row conversion shared by the SQLite and PostgreSQL campaign mixins."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tidings.model.campaigns import CampaignRecord, CampaignStatus, Step


def steps_text(steps: Sequence[Step]) -> str:
    return json.dumps([s.to_json() for s in steps], separators=(",", ":"))


def campaign_from_row(r: Sequence[Any]) -> CampaignRecord:
    return CampaignRecord(
        name=r[0], steps=tuple(Step.from_json(d) for d in json.loads(r[1])), template=r[2],
        status=CampaignStatus(r[3]), rows_read=int(r[4]), schedules_created=int(r[5]),
        row_errors=int(r[6]), cancelled=int(r[7]), created_at=int(r[8]),
        modified_at=int(r[9]))


def prefix_range(prefix: str) -> tuple[str, str]:
    """[prefix, prefix + U+10FFFF): a prefix match an index range scan can serve."""
    return prefix, prefix + "\U0010ffff"
