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

import asyncio
import inspect
import json
import logging
from typing import Any
from urllib.parse import urlsplit

from tidings.clock import Clock
from tidings.errors import QueueNotFound, TidingsError, ValidationError
from tidings.jobs.handlers import Handlers, Job
from tidings.model.firings import DELIVERY_JOB, FiringContext, delivery_job, render_input
from tidings.model.limits import Limit, RetryAfter
from tidings.model.schedules import Target, TargetKind
from tidings.queues.internal import DELIVERY_QUEUE, EMAIL_QUEUE
from tidings.queues.service import QueueService
from tidings.runtime import metrics
from tidings.runtime.bridge import Bridge
from tidings.schedules.firing_log import FiringLog, Outcome
from tidings.targets.base import DeliveryError, Route, Suppress
from tidings.targets.deadletter import dead_letter_attributes
from tidings.targets.email import EmailDelivery
from tidings.targets.function import as_input, event_for
from tidings.targets.guard import WebhookGuard
from tidings.targets.webhook import WebhookSender

log = logging.getLogger("tidings.deliveries")
MAX_ROUTE_DEPTH = 4


class Targets:
    """Delivers one input to one non-queue target."""

    def __init__(self, queues: QueueService, bridge: Bridge, functions: dict[str, Any],
                 webhook_secret: bytes, email: EmailDelivery | None = None,
                 webhook_guard: WebhookGuard | None = None) -> None:
        self.queues = queues
        self.bridge = bridge
        self.functions = functions
        self.webhooks = WebhookSender(webhook_secret, webhook_guard)
        self.email = email

    async def deliver(self, target: Target, body: str, ctx: FiringContext, attempt: int,
                      depth: int = 0) -> str:
        """Returns the outcome: "delivered" or "suppressed"; raises DeliveryError."""
        if depth > MAX_ROUTE_DEPTH:
            raise DeliveryError("RouteLoop", "function targets routed more than 4 times",
                                retryable=False)
        if target.kind is TargetKind.WEBHOOK:
            await self.webhooks.send(target, body, ctx, attempt)
            return "delivered"
        if target.kind is TargetKind.QUEUE:
            try:
                await self.bridge.run(self.queues.send, target.destination, body,
                                      group_id=target.message_group_id,
                                      deduplication_id=ctx.execution_id
                                      if target.destination.endswith(".fifo") else None)
            except QueueNotFound as exc:
                # Retried: the queue may be created before the retry policy runs out.
                raise DeliveryError("QueueDoesNotExist", exc.message, retryable=True) from None
            except TidingsError as exc:
                raise DeliveryError(type(exc).__name__, exc.message, retryable=False) from None
            return "delivered"
        if target.kind is TargetKind.FUNCTION:
            return await self._function(target, body, ctx, attempt, depth)
        if target.kind is TargetKind.EMAIL:
            if self.email is not None and self.email.relay:
                return await self.email.deliver(target, body, ctx, attempt)
            # Routed here by a function: to the email queue, for a node with a relay.
            await self.bridge.run(self.queues.ops.enqueue_internal, EMAIL_QUEUE,
                                  json.dumps(delivery_job(ctx, target, body)))
            return "queued"
        raise DeliveryError("UnsupportedTarget", f"{target.kind} targets are not available",
                            retryable=False)

    async def _function(self, target: Target, body: str, ctx: FiringContext, attempt: int,
                        depth: int) -> str:
        fn = self.functions.get(target.destination)
        if fn is None:
            raise DeliveryError("FunctionNotFound",
                                f"no function {target.destination!r} is registered on this"
                                " node's app", retryable=True)
        event = event_for(body, ctx, attempt)
        try:
            if inspect.iscoroutinefunction(fn):
                result = await fn(event)
            else:  # the user's code, which may take its time: not on the store's pool
                result = await asyncio.to_thread(fn, event)
        except Exception as exc:  # noqa: BLE001 - the user's code failed: a retry
            raise DeliveryError("FunctionError", f"{type(exc).__name__}: {exc}") from exc
        then = target.options.get("then")
        if isinstance(result, Suppress):
            return "suppressed"
        if isinstance(result, Route):
            routed = result.target
            if isinstance(routed, str):
                routed = Target(TargetKind.QUEUE, routed)
            new_body = body if result.input is None else as_input(result.input)
            return await self.deliver(routed, new_body, ctx, attempt, depth + 1)
        if then is None:
            return "delivered"
        new_body = body if result is None else as_input(result)
        return await self.deliver(Target.from_json(then), new_body, ctx, attempt, depth + 1)

    async def gave_up(self, target: Target, ctx: FiringContext, failure: DeliveryError,
                      attempts: int) -> None:
        """Told when a delivery is abandoned, so a target that logs (email) can say so."""
        if target.kind is TargetKind.EMAIL and self.email is not None:
            await self.email.gave_up(ctx, failure, attempts)

    async def close(self) -> None:
        await self.webhooks.close()
        if self.email is not None:
            await self.email.close()


def delivery_app(targets: Targets, queues: QueueService, clock: Clock, bridge: Bridge, *,
                 queue: str = DELIVERY_QUEUE, firings: FiringLog | None = None) -> Handlers:
    """The built-in app whose one handler performs the deliveries of an internal queue
    (`DELIVERY_QUEUE` on every node; `EMAIL_QUEUE` on nodes with an SMTP relay); its
    store calls go through `bridge`, the node's."""
    app = Handlers(queue=queue, retry_base_s=1.0, retry_max_s=300.0, create_queues=False,
              poison="retry")

    schedule_id_of = _schedule_id

    async def record(job: Job, ctx: FiringContext, outcome: Outcome,
                     detail: str | None = None) -> None:
        """The delivery's final outcome in its schedule's firing history (a job queued
        before the dispatcher named the schedule, or a resend, has none to go to)."""
        schedule_id = schedule_id_of(job.payload)
        if firings is not None and schedule_id is not None:
            await bridge.run(firings.record, schedule_id, ctx.scheduled_time, outcome,
                             job.attempt, detail)

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

    # A limit stored for `webhook` or `webhook:<host>` (tidings limit set) applies to
    # the deliveries to that host; a 429/503 with Retry-After pauses its key.
    @app.handler(DELIVERY_JOB, limit=Limit(name=WEBHOOK_LIMIT, key=webhook_host))
    async def deliver(job: Job) -> None:
        ctx = FiringContext.from_json(job.payload["context"])
        target = Target.from_json(job.payload["target"])
        if target.kind is TargetKind.EMAIL and job.queue != EMAIL_QUEUE:
            # Queued before email had its own queue: move it there, where only a node
            # with a relay takes it.
            await bridge.run(queues.ops.enqueue_internal, EMAIL_QUEUE, json.dumps(job.payload))
            return
        body = render_input(job.payload.get("input") or "{}", ctx, job.attempt)
        kind = target.kind.value
        try:
            outcome = await targets.deliver(target, body, ctx, job.attempt)
            if outcome == Outcome.DUPLICATE:
                metrics.DUPLICATES.labels(kind).inc()
                await record(job, ctx, Outcome.DUPLICATE, _duplicate_detail(ctx))
                return
            metrics.DELIVERED.labels(kind).inc()
            log.debug("delivered %s to %s: %s", ctx.execution_id, kind, outcome)
            if outcome in (Outcome.DELIVERED, Outcome.SUPPRESSED):  # not "queued" on
                await record(job, ctx, Outcome(outcome))
            return
        except DeliveryError as exc:
            metrics.FAILED.labels(kind).inc()
            metrics.FAILURES.add(clock.now_ms(), kind, target.destination, exc.message)
            since = job.payload.get("resent_at") or ctx.scheduled_time
            age_s = (clock.now_ms() - since) / 1000
            if (exc.retry_after_s is not None and target.kind is TargetKind.WEBHOOK
                    and age_s + exc.retry_after_s < target.retry_policy.maximum_event_age_s):
                # The host pushed back: its key waits, this delivery with it, and the
                # attempt does not count (the event's age still does).
                raise RetryAfter(exc.retry_after_s, key=f"{WEBHOOK_LIMIT}:"
                                 f"{webhook_host(job.payload)}") from exc
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

    return app


WEBHOOK_LIMIT = "webhook"


def webhook_host(body: dict[str, Any]) -> str | None:
    """The limit key's value of a delivery: its webhook's host (None: not a webhook)."""
    target = body.get("target")
    if not isinstance(target, dict) or target.get("kind") != TargetKind.WEBHOOK.value:
        return None
    return urlsplit(str(target.get("destination", ""))).hostname or None


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
