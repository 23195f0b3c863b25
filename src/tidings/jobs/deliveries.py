"""Deliveries to non-queue targets (webhook, function, email), run as jobs of the internal
delivery queue, so they share the queue engine's leases, retries and crash safety.

A failed attempt is retried with exponential backoff and jitter until the target's retry
policy is exhausted (MaximumRetryAttempts, or MaximumEventAgeInSeconds counted from the
scheduled time) or the failure is permanent; then the dead-letter event goes to the
schedule's DLQ (if it has one) and the delivery is acknowledged.

Every store call here goes through the node's `Bridge`, whose pool is sized for the store
(one thread on SQLite); only a user's synchronous function runs on a thread of its own.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from tidings.clock import Clock
from tidings.errors import ValidationError
from tidings.jobs.consumers import Consumer
from tidings.jobs.handlers import Handlers, Job
from tidings.limits.book import LimitBook
from tidings.model.firings import DELIVERY_JOB, FiringContext, render_input
from tidings.model.limits import Limit, RetryAfter
from tidings.model.schedules import Target
from tidings.queues.internal import DELIVERY_QUEUE
from tidings.queues.service import QueueService
from tidings.runtime import metrics
from tidings.runtime.batching import Batcher
from tidings.runtime.bridge import Bridge
from tidings.runtime.health import Health
from tidings.schedules.firing_log import FiringLog, Outcome
from tidings.targets.base import TARGET_LIMITS, Attempt, DeliveryError, LimitPlace, Reach
from tidings.targets.deadletter import dead_letter_attributes
from tidings.targets.email import EmailDelivery
from tidings.targets.guard import WebhookGuard
from tidings.targets.registry import TARGETS, target_of
from tidings.targets.webhook import WebhookSender
from tidings.targets.webhook_target import WEBHOOK_LIMIT, webhook_host

#: The longest a job waits in one hold (RetryAfter's bound): a longer pace (a warm-up's
#: next day) is waited out in several, none of them an attempt.
MAX_HOLD_S = 43_200.0

log = logging.getLogger("tidings.deliveries")


class Targets:
    """One node's deliveries: what it delivers with (`Reach`), and one delivery to a target
    of any kind, which the registry names."""

    def __init__(self, queues: QueueService, bridge: Bridge, functions: dict[str, Any],
                 webhook_secret: bytes, email: EmailDelivery | None = None,
                 webhook_guard: WebhookGuard | None = None) -> None:
        self.reach = Reach(TARGETS, queues, bridge, functions,
                           WebhookSender(webhook_secret, webhook_guard), email)
        relay = email.relay if email is not None else None
        #: The SMTP relay's host: the value of the `smtp` limit's key.
        self.relay_host = (urlsplit(relay).hostname or relay) if relay else None

    async def deliver(self, target: Target, body: str, ctx: FiringContext,
                      attempt: int) -> str:
        """Returns the outcome: "delivered", "suppressed", "queued" or "duplicate";
        raises DeliveryError."""
        return await self.reach.deliver(Attempt(target, body, ctx, attempt))

    async def gave_up(self, target: Target, ctx: FiringContext, failure: DeliveryError,
                      attempts: int) -> None:
        """Told when a delivery is abandoned, so a target that logs (email) can say so."""
        await target_of(target).gave_up(Attempt(target, "", ctx, attempts), failure,
                                        self.reach)

    async def close(self) -> None:
        await self.reach.webhooks.close()
        if self.reach.email is not None:
            await self.reach.email.close()


def delivery_consumer(targets: Targets, queues: QueueService, clock: Clock, bridge: Bridge,
                      firings: FiringLog, *, queue: str = DELIVERY_QUEUE, concurrency: int,
                      grace_s: float, poll_fallback_s: float, health: Health,
                      book: LimitBook, ended: Callable[[], None] | None = None) -> Consumer:
    """The consumer of one internal queue's deliveries (`delivery_app`), as a node (and
    its email process) runs it."""
    return Consumer(delivery_app(targets, queues, clock, bridge, queue=queue,
                                 firings=firings, ended=ended),
                    queues, bridge, concurrency=concurrency, grace_s=grace_s, health=health,
                    poll_fallback_s=poll_fallback_s, book=book)


def delivery_app(targets: Targets, queues: QueueService, clock: Clock, bridge: Bridge, *,
                 queue: str = DELIVERY_QUEUE, firings: FiringLog | None = None,
                 ended: Callable[[], None] | None = None) -> Handlers:
    """The built-in app whose one handler performs the deliveries of an internal queue
    (`DELIVERY_QUEUE` on every node; `EMAIL_QUEUE` on nodes with an SMTP relay); its
    store calls go through `bridge`, the node's. `ended`: told (on the loop's thread)
    each time a delivery's handler returned or raised (an email process's metrics
    report, child_process.py)."""
    app = Handlers(queue=queue, retry_base_s=1.0, retry_max_s=300.0, create_queues=False,
              poison="retry")

    schedule_id_of = _schedule_id
    # Each kind's counter child, looked up once: `labels()` takes a lock and builds its
    # key at every call (1.5 us of the 2.1 an increment cost, at every delivery).
    delivered = functools.cache(metrics.DELIVERED.labels)
    # Concurrent deliveries' outcomes share one transaction (a store trip per delivery
    # was a tenth of the email path's time: bench/email.py), a short call (inline on
    # SQLite when its connection is free, as the email target's own group commits).
    outcomes: Batcher[None, tuple[int, int, Outcome, int, str | None], None] | None = (
        Batcher(bridge, firings.record_many, short=True) if firings is not None else None)

    async def record(job: Job, ctx: FiringContext, outcome: Outcome,
                     detail: str | None = None) -> None:
        """The delivery's final outcome in its schedule's firing history (a job queued
        before the dispatcher named the schedule, or a resend, has none to go to)."""
        schedule_id = schedule_id_of(job.payload)
        if outcomes is not None and schedule_id is not None:
            await outcomes.submit(None, (schedule_id, ctx.scheduled_time, outcome,
                                         job.attempt, detail))

    async def duplicates(jobs: list[Job]) -> None:
        """Deliveries acknowledged without running (their execution id already ran to
        success): in the firing history with the id they matched."""
        for job in jobs:
            try:
                ctx = FiringContext.from_json(job.payload["context"])
            except (KeyError, TypeError):
                continue  # not a delivery the dispatcher made: nothing to record it under
            await record(job, ctx, Outcome.DUPLICATE, _duplicate_detail(ctx))

    app.on_duplicate = duplicates

    def held_back(jobs: list[Job]) -> None:
        for job in jobs:
            target = job.payload.get("target")
            kind = target.get("kind") if isinstance(target, dict) else None
            metrics.LIMIT_HELD_FIRINGS.labels(str(kind or "unknown")).inc()

    app.on_held_back = held_back

    # A limit stored for `webhook` or `webhook:<host>` (tidings limit set) applies to
    # the deliveries to that host, and so on for each name of TARGET_LIMITS (the target's
    # kind says which keys a delivery has); a 429/503 with Retry-After pauses its key,
    # a relay's "slow down" for a domain its `email-domain:<domain>` (email/domain_holds.py).
    place = LimitPlace(targets.relay_host)
    limits = [Limit(name=name, key=functools.partial(_limit_value, name, place))
              for name in TARGET_LIMITS]

    async def deliver(job: Job) -> None:
        ctx = FiringContext.from_json(job.payload["context"])
        target = Target.from_json(job.payload["target"])
        home = target_of(target).delivery_queue
        if job.queue != home:
            # Queued before its kind had a queue of its own (email, which only a node
            # with a relay takes): move it there.
            await bridge.run(queues.ops.enqueue_internal, home, json.dumps(job.payload))
            return
        body = render_input(job.payload.get("input") or "{}", ctx, job.attempt)
        kind = target.kind.value
        try:
            outcome = await targets.deliver(target, body, ctx, job.attempt)
            if outcome == Outcome.DUPLICATE:
                metrics.DUPLICATES.labels(kind).inc()
                await record(job, ctx, Outcome.DUPLICATE, _duplicate_detail(ctx))
                return
            delivered(kind).inc()
            log.debug("delivered %s to %s: %s", ctx.execution_id, kind, outcome)
            if outcome in (Outcome.DELIVERED, Outcome.SUPPRESSED):  # not "queued" on
                await record(job, ctx, Outcome(outcome))
            return
        except DeliveryError as exc:
            metrics.FAILED.labels(kind).inc()
            metrics.FAILURES.add(clock.now_ms(), kind, target.destination, exc.message)
            since = job.payload.get("resent_at") or ctx.scheduled_time
            age_s = (clock.now_ms() - since) / 1000
            # (a webhook's receiver says when to come back, targets/webhook.py; an SMTP
            # relay's "slow down" holds a domain, and a warm-up's daily cap paces mail,
            # targets/email.py)
            if exc.retry_after_s is not None and (
                    exc.paced or age_s + exc.retry_after_s
                    < target.retry_policy.maximum_event_age_s):
                # The downstream pushed back: its key waits, this delivery with it, and
                # the attempt does not count (the event's age still does, unless it is
                # our own pace that holds the delivery).
                key = exc.hold_key if exc.hold_key is not None else \
                    f"{WEBHOOK_LIMIT}:{webhook_host(target)}"
                raise RetryAfter(min(exc.retry_after_s, MAX_HOLD_S), key=key or None,
                                 pause=bool(key)) from exc
            failure = exc
        since = job.payload.get("resent_at") or ctx.scheduled_time
        exhausted = _exhausted(target, failure, job.attempt, since, clock.now_ms())
        if exhausted is None:
            raise failure  # retried by the consumer with backoff
        metrics.DEAD_LETTERED.labels(kind).inc()
        await targets.gave_up(target, ctx, failure, job.attempt)
        log.warning("delivery %s of %s/%s gave up (%s): %s", ctx.execution_id, ctx.group,
                    ctx.name, exhausted, failure.message)
        if target.dead_letter_queue:
            attrs = dead_letter_attributes(ctx, target, failure.code, failure.message,
                                           attempts=job.attempt, exhausted=exhausted)
            await bridge.run(queues.send, target.dead_letter_queue, body, attributes=attrs)
        await record(job, ctx, Outcome.DEAD_LETTERED if target.dead_letter_queue
                     else Outcome.DROPPED, f"{failure.code}: {failure.message} ({exhausted})")

    app.handler(DELIVERY_JOB, limit=limits)(deliver if ended is None
                                            else _telling(deliver, ended))
    return app


def _telling(deliver: Callable[[Job], Awaitable[None]],
             ended: Callable[[], None]) -> Callable[[Job], Awaitable[None]]:
    async def deliver_and_tell(job: Job) -> None:
        try:
            await deliver(job)
        finally:
            ended()

    return deliver_and_tell


def _limit_value(name: str, place: LimitPlace, payload: dict[str, Any]) -> str | None:
    """The value of the delivery's key for the limit `name` (None: it has none), asked
    only while a limit or pause of that name exists (`tidings.limits.book`)."""
    target = payload.get("target")
    if not isinstance(target, dict):
        return None
    spec = Target.from_json(target)
    return target_of(spec).limit_keys(spec, payload.get("input"), place, (name,)).get(name)


def _duplicate_detail(ctx: FiringContext) -> str:
    return (f"execution {ctx.execution_id} was already delivered; this copy was "
            "acknowledged without delivering it again")


def _schedule_id(payload: dict[str, Any]) -> int | None:
    value = payload.get("schedule_id")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _exhausted(target: Target, failure: DeliveryError, attempt: int, since: int,
               now: int) -> str | None:
    """Why retries stop, or None. The event age counts from the scheduled time, or from
    an operator's resend of the delivery."""
    policy = target.retry_policy
    if not failure.retryable:
        return "NonRetryableError"
    if attempt > policy.maximum_retry_attempts:  # attempt 1 is not a retry
        return "MaximumRetryAttempts"
    if now - since >= policy.maximum_event_age_s * 1000:
        return "MaximumEventAgeInSeconds"
    return None


__all__ = ["Targets", "delivery_app", "ValidationError"]
