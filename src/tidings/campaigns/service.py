"""Campaigns: status, pause/resume, cancel (all or one recipient), fan-out and forecast.

Rules (documented for users in docs/campaigns.md):
- Pause disables every remaining schedule of the campaign's group in one statement;
  resume enables them again, each due at its occurrence plus its flexible offset (the
  same stable offset as before the pause). A one-shot step whose time passed during the
  pause fires as soon as it is resumed (late rather than never, as `at()` does).
- Cancel deletes every remaining schedule and is final; the count is recorded on the
  campaign. Cancelling one recipient deletes its remaining steps only (it converted).
- Counts: see `CampaignCounts`. Delivery counts come from the delivery log, whose rows
  name the schedule as `group/name`: rows under `campaign/` are this campaign's.
- Forecast: enabled schedules by minute over a horizon, by occurrence (before flexible
  windows) and by due time (after them); each schedule counts its next firing. With
  an email send rate (settings `smtp_max_rate`), email firings beyond it are shown as
  sent later, as the relay would send them.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

from tidings.campaigns.fanout import FanoutOptions, FanoutProgress, FanoutSummary, run_fanout
from tidings.campaigns.limited import (
    DEFAULT_MEAN_DURATION_MS,
    forecast_limited,
    spread_by_rate,
)
from tidings.clock import Clock
from tidings.errors import ScheduleNotFound, ValidationError
from tidings.model.campaigns import (
    CampaignCounts,
    CampaignRecord,
    CampaignStatus,
    recipient_key,
)
from tidings.model.email import Delivery
from tidings.model.queues import check_range
from tidings.model.schedules import Schedule
from tidings.notify.base import SCHEDULES_CHANNEL, Notifier
from tidings.schedules.service import ScheduleService, flex_offset_ms
from tidings.store.base import (
    CampaignStore,
    ContactStore,
    DeliveryQuery,
    EmailStore,
    LimitStore,
    ScheduleStore,
    StoreRuntime,
)
from tidings.targets.base import LimitPlace


class CampaignServiceStore(CampaignStore, ContactStore, EmailStore, ScheduleStore, StoreRuntime,
                           LimitStore, Protocol):
    """What this module asks of the store: campaigns, their schedules and their deliveries,
    what the fan-out it runs writes (`FanoutStore`), and the limits the forecast shows."""

RESUME_PAGE = 5_000
FAILED_STATES = ("FAILED", "BOUNCED", "RENDERING_FAILURE")


@dataclass(frozen=True)
class CampaignView:
    record: CampaignRecord
    counts: CampaignCounts

    def to_json(self) -> dict[str, Any]:
        r = self.record
        return {"name": r.name, "status": r.status.value, "template": r.template,
                "steps": [s.to_json() for s in r.steps], "rows_read": r.rows_read,
                "schedules_created": r.schedules_created, "row_errors": r.row_errors,
                "created_at": r.created_at, "modified_at": r.modified_at,
                "counts": self.counts.to_json()}


@dataclass(frozen=True)
class RecipientStep:
    """A step of one recipient: its schedule (None once fired or cancelled) and the
    deliveries it made."""

    step: str
    schedule_name: str
    schedule: Schedule | None
    deliveries: list[Delivery]


@dataclass(frozen=True)
class Forecast:
    start_ms: int
    bucket_ms: int
    buckets: int
    occurrences: dict[str, list[int]]  # by target kind, before flexible windows
    firings: dict[str, list[int]]  # by target kind, when they are due
    email_rate_per_s: float = 0.0
    email_sent: list[int] = field(default_factory=list)  # after the send rate, if any
    #: Per limit key with a rate, a concurrency or a pause: when its firings start and
    #: drain (`LimitedKey.to_json`).
    limited: list[dict[str, Any]] = field(default_factory=list)

    def total(self, series: dict[str, list[int]]) -> list[int]:
        out = [0] * self.buckets
        for counts in series.values():
            for i, c in enumerate(counts):
                out[i] += c
        return out

    def to_json(self) -> dict[str, Any]:
        return {"start_ms": self.start_ms, "bucket_ms": self.bucket_ms,
                "buckets": self.buckets, "occurrences": self.occurrences,
                "firings": self.firings, "email_rate_per_s": self.email_rate_per_s,
                "email_sent": self.email_sent, "limited": self.limited}


class CampaignService:
    def __init__(self, store: CampaignServiceStore, clock: Clock, notifier: Notifier,
                 schedules: ScheduleService, *, email_rate_per_s: float = 0.0,
                 smtp_relay: str | None = None) -> None:
        """`smtp_relay`: the host of TIDINGS_SMTP_URL (the forecast's `smtp:<relay>`)."""
        self.store = store
        self.limit_place = LimitPlace(smtp_relay)
        self.clock = clock
        self.notifier = notifier
        self.schedules = schedules
        self.email_rate_per_s = email_rate_per_s

    def fanout(self, source: IO[bytes], options: FanoutOptions, *,
               errors: IO[str] | None = None,
               on_progress: Callable[[FanoutProgress], None] | None = None,
               bytes_total: int | None = None) -> FanoutSummary:
        """Fan a binary CSV / JSON Lines stream out into the campaign (see campaigns/fanout.py)."""
        return run_fanout(self.schedules, self.store, source, options, errors=errors,
                          on_progress=on_progress, bytes_total=bytes_total)

    def get(self, name: str) -> CampaignRecord:
        return self.store.get_campaign(name)

    def list(self, *, after: str | None = None, limit: int = 100) -> list[CampaignRecord]:
        check_range("MaxResults", limit, 1, 1000)
        return self.store.list_campaigns(after, limit)

    def counts(self, record: CampaignRecord) -> CampaignCounts:
        states = self.store.schedule_state_counts(record.name)
        log = self.store.delivery_state_counts(record.name + "/")
        enabled, disabled = states.get("ENABLED", 0), states.get("DISABLED", 0)
        return CampaignCounts(
            scheduled=enabled + disabled, enabled=enabled, disabled=disabled,
            fired=sum(log.values()), sent=log.get("SENT", 0),
            suppressed=log.get("SUPPRESSED", 0),
            failed=sum(log.get(s, 0) for s in FAILED_STATES), cancelled=record.cancelled)

    def status(self, name: str) -> CampaignView:
        record = self.store.get_campaign(name)
        return CampaignView(record, self.counts(record))

    def _move(self, name: str, to: CampaignStatus) -> CampaignRecord:
        """Change the status (a compare-and-set with the status read here: a concurrent
        change makes this one fail with `ConflictError` rather than undo it)."""
        record = self.store.get_campaign(name)
        if to is not record.status:
            self.store.set_campaign_status(name, record.status, to, self.clock.now_ms())
        return record

    def pause(self, name: str) -> CampaignView:
        self._move(name, CampaignStatus.PAUSED)
        return self.status(name)

    def resume(self, name: str) -> CampaignView:
        self._move(name, CampaignStatus.ACTIVE)
        after = ""
        while True:
            page = self.store.disabled_schedules(name, after, RESUME_PAGE)
            if not page:
                break
            dues = [(n, None if nxt is None else nxt + flex_offset_ms(name, n, nxt, flex))
                    for n, nxt, flex in page]
            if self.store.enable_campaign_schedules(name, dues, self.clock.now_ms()):
                self.notifier.notify(SCHEDULES_CHANNEL)
            after = page[-1][0]
        return self.status(name)

    def cancel(self, name: str) -> CampaignView:
        self._move(name, CampaignStatus.CANCELLED)
        return self.status(name)

    def cancel_recipient(self, name: str, recipient_id: str) -> int:
        """Delete the recipient's remaining steps; returns how many were removed."""
        record = self.store.get_campaign(name)
        if not recipient_id:
            raise ValidationError("RecipientId", "is empty")
        key = recipient_key(recipient_id)
        return self.store.cancel_campaign_schedules(
            name, [f"{s.name}-{key}" for s in record.steps], self.clock.now_ms())

    def recipient(self, name: str, recipient_id: str) -> builtins.list[RecipientStep]:
        """One recipient's steps: each one's schedule while it is pending, and the
        deliveries it made. Names are matched exactly (`welcome-u1` is not `welcome-u10`);
        an empty list means the campaign never knew this id."""
        record = self.store.get_campaign(name)
        if not recipient_id:
            raise ValidationError("RecipientId", "is empty")
        key = recipient_key(recipient_id)
        out: builtins.list[RecipientStep] = []
        for step in record.steps:
            schedule_name = f"{step.name}-{key}"
            try:
                pending: Schedule | None = self.schedules.get(schedule_name, group=name)
            except ScheduleNotFound:
                pending = None
            where = f"{name}/{schedule_name}"
            deliveries = [d for d in self.store.find_deliveries(
                DeliveryQuery(schedule_prefix=where), 0, 100) if d.schedule == where]
            if pending is not None or deliveries:
                out.append(RecipientStep(step.name, schedule_name, pending, deliveries))
        return out

    def forecast(self, hours: int = 48, *, bucket_minutes: int = 1,
                 mean_duration_ms: int = DEFAULT_MEAN_DURATION_MS) -> Forecast:
        """`mean_duration_ms`: how long a start holds a concurrency slot, for the limited
        keys' estimate (campaigns/limited.py)."""
        check_range("Hours", hours, 1, 24 * 31)
        check_range("MeanDurationMs", mean_duration_ms, 1, 86_400_000)
        check_range("BucketMinutes", bucket_minutes, 1, 1440)
        bucket = bucket_minutes * 60_000
        start = self.clock.now_ms() // bucket * bucket
        n = hours * 3_600_000 // bucket
        end = start + n * bucket

        def series(by_occurrence: bool) -> dict[str, list[int]]:
            out: dict[str, list[int]] = {}
            for at, kind, count in self.store.firing_counts(start, end, bucket,
                                                            by_occurrence=by_occurrence):
                out.setdefault(kind, [0] * n)[(at - start) // bucket] += count
            return out

        firings = series(False)
        sent: list[int] = []
        if self.email_rate_per_s > 0 and "email" in firings:
            sent = spread_by_rate(firings["email"], self.email_rate_per_s * bucket / 1000)
        limited = [k.to_json() for k in forecast_limited(
            self.store, self.limit_place, now_ms=self.clock.now_ms(), start_ms=start,
            bucket_ms=bucket, buckets=n, mean_duration_ms=mean_duration_ms)]
        return Forecast(start, bucket, n, series(True), firings, self.email_rate_per_s, sent,
                        limited)
