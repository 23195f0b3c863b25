"""What the console shows of one campaign beyond its status: each step's progress, the
campaign's own load forecast, and a recipient's remaining steps (to cancel them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from tidings.campaigns.limited import DEFAULT_MEAN_DURATION_MS, LimitedKey, forecast_limited
from tidings.clock import Clock
from tidings.errors import ScheduleNotFound, ValidationError
from tidings.model.campaigns import recipient_key
from tidings.model.schedules import Schedule
from tidings.model.states import DeliveryState
from tidings.store.base import CampaignStore, EmailStore, LimitStore, NodeStore, ScheduleStore
from tidings.targets.base import LimitPlace


class CampaignViewStore(CampaignStore, EmailStore, NodeStore, ScheduleStore, LimitStore,
                        Protocol):
    """What this module asks of the store: campaigns, their schedules and deliveries, the
    console's indexes, and the limits its firings count against."""

FAILED_STATES = (DeliveryState.FAILED, DeliveryState.BOUNCED, DeliveryState.RENDERING_FAILURE)


@dataclass(frozen=True)
class StepProgress:
    step: str
    scheduled: int  # schedules of the step still waiting (enabled or paused)
    sent: int
    failed: int
    suppressed: int
    queued: int  # fired, waiting for (another) attempt
    cancelled: int  # schedules of the step deleted by a cancel (campaign or recipient)


@dataclass(frozen=True)
class RecipientSteps:
    recipient_id: str
    steps: list[tuple[str, Schedule | None]]  # (step, its schedule; None: none left)


class CampaignViews:
    def __init__(self, store: CampaignViewStore, clock: Clock,
                 limit_place: LimitPlace | None = None) -> None:
        self.store = store
        self.clock = clock
        self.limit_place = limit_place or LimitPlace()

    def steps(self, name: str) -> list[StepProgress]:
        record = self.store.get_campaign(name)
        out = []
        cancelled = self.store.campaign_step_cancelled(name)
        for step in record.steps:
            states = self.store.schedule_state_counts_by_prefix(name, f"{step.name}-")
            log = self.store.delivery_state_counts(f"{name}/{step.name}-")
            out.append(StepProgress(
                step.name, sum(states.values()), log.get(DeliveryState.SENT, 0),
                sum(log.get(s, 0) for s in FAILED_STATES), log.get(DeliveryState.SUPPRESSED, 0),
                log.get(DeliveryState.QUEUED, 0), cancelled.get(step.name, 0)))
        return out

    def forecast(self, name: str, hours: int = 6,
                 bucket_ms: int = 60_000) -> tuple[int, list[int]]:
        """(first bucket start, firings per bucket) of the campaign's schedules."""
        self.store.get_campaign(name)
        start = self.clock.now_ms() // bucket_ms * bucket_ms
        n = hours * 3_600_000 // bucket_ms
        counts = [0] * n
        for at, count in self.store.group_firing_counts(name, start, start + n * bucket_ms,
                                                        bucket_ms):
            counts[(at - start) // bucket_ms] += count
        return start, counts

    def limited(self, name: str, hours: int = 6, bucket_ms: int = 60_000, *,
                mean_duration_ms: int = DEFAULT_MEAN_DURATION_MS) -> list[LimitedKey]:
        """The limit keys (with a rate, a concurrency or a pause) the campaign's firings
        count against, and when its firings due within `hours` drain through each
        (campaigns/limited.py)."""
        start = self.clock.now_ms() // bucket_ms * bucket_ms
        return forecast_limited(self.store, self.limit_place, now_ms=self.clock.now_ms(),
                                start_ms=start, bucket_ms=bucket_ms,
                                buckets=hours * 3_600_000 // bucket_ms, group=name,
                                mean_duration_ms=mean_duration_ms)

    def recipient(self, name: str, recipient_id: str) -> RecipientSteps:
        if not recipient_id.strip():
            raise ValidationError("recipient", "give the recipient's id (its CSV row's id)")
        record = self.store.get_campaign(name)
        key = recipient_key(recipient_id.strip())
        found: list[tuple[str, Schedule | None]] = []
        for step in record.steps:
            try:
                found.append((step.name, self.store.get_schedule(name, f"{step.name}-{key}")))
            except ScheduleNotFound:
                found.append((step.name, None))
        return RecipientSteps(recipient_id.strip(), found)
