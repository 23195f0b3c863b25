"""`PushService`: push subscriptions as every face sees them (Python, CLI, native API,
console). One subscription per queue; the nodes' pushers (`push/pusher.py`) read what
this writes as soon as the store's wake-up reaches them (push/pushers.py).

The signing secret is returned whole only by `subscribe` and `rotate_secret` (the views
every other call gives hide it), so a listing never leaks it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tidings.clock import Clock
from tidings.errors import InternalQueueAccess, QueueNotFound, ValidationError
from tidings.model.push import (
    DEFAULT_CONCURRENCY,
    DEFAULT_ROTATION_GRACE_MS,
    Subscription,
    SubscriptionFailure,
    SubscriptionState,
    check_concurrency,
    check_endpoint,
    check_transition,
    new_secret,
    parse_rate,
    parse_timeout_ms,
    rate_text,
)
from tidings.model.queues import INTERNAL_QUEUES, QueueRecord
from tidings.notify.base import SUBSCRIPTIONS_CHANNEL
from tidings.push.limit import PUSH_LIMIT, limit_key
from tidings.queues.service import QueueService
from tidings.store.base import NewSubscription, Store
from tidings.targets.guard import WebhookGuard


@dataclass(frozen=True)
class SubscriptionView:
    """A subscription with its queue's name and, when an endpoint's Retry-After (or an
    operator) paused its limit key (`push:<queue>`), until when; `to_json` hides the
    secret unless asked."""

    queue: str
    subscription: Subscription
    held_until: int | None = None

    def to_json(self, *, secret: bool = False) -> dict[str, Any]:
        s = self.subscription
        out: dict[str, Any] = {
            "queue": self.queue, "endpoint": s.endpoint, "concurrency": s.concurrency,
            "rate": rate_text(s.rate_per_s), "timeout_ms": s.timeout_ms,
            "state": s.state.value, "held_until": self.held_until, "created_at": s.created_at,
            "modified_at": s.modified_at,
            # until when the previous secret still signs beside the current one
            "previous_secret_until": s.previous_until if s.previous_secret else None}
        if secret:
            out["secret"] = s.secret
        return out


class PushService:
    def __init__(self, queues: QueueService, store: Store, clock: Clock,
                 guard: WebhookGuard) -> None:
        self.queues = queues
        self.store = store
        self.clock = clock
        self.guard = guard

    def _queue(self, name: str) -> QueueRecord:
        if name in INTERNAL_QUEUES:
            raise InternalQueueAccess(name, "pushed")
        return self.queues.get_queue(name)

    def _endpoint(self, url: str) -> str:
        check_endpoint(url)
        self.guard.check_url(url, "endpoint")
        return url

    def subscribe(self, queue: str, endpoint: str, *, concurrency: int = DEFAULT_CONCURRENCY,
                  rate: str | float | None = None, timeout: str | float | None = None,
                  paused: bool = False) -> SubscriptionView:
        """Push the queue's messages to `endpoint`. The view's `subscription.secret` is the
        signing secret: the only time it is shown (`rotate_secret` makes a new one)."""
        record = self._queue(queue)
        new = NewSubscription(
            queue_id=record.id, endpoint=self._endpoint(endpoint),
            concurrency=check_concurrency(concurrency), rate_per_s=parse_rate(rate),
            timeout_ms=parse_timeout_ms(timeout),
            state=(SubscriptionState.PAUSED if paused else SubscriptionState.ACTIVE).value,
            secret=new_secret(), now=self.clock.now_ms())
        made = self.store.create_subscription(new)
        self._changed()
        return SubscriptionView(queue, made)

    def get(self, queue: str) -> SubscriptionView:
        return self._view(queue, self.store.get_subscription(self._queue(queue).id))

    def subscriptions(self) -> list[SubscriptionView]:
        """Every subscription whose queue exists, by queue name."""
        pauses = self.store.limit_pauses(self.clock.now_ms())
        out = []
        for s in self.store.list_subscriptions():
            try:
                name = self.store.get_queue_by_id(s.queue_id).name
            except QueueNotFound:
                continue  # its queue is being deleted, with it (store.delete_queue)
            out.append(self._view(name, s, pauses))
        return sorted(out, key=lambda v: v.queue)

    def _view(self, queue: str, sub: Subscription,
              pauses: dict[str, int] | None = None) -> SubscriptionView:
        if pauses is None:
            pauses = self.store.limit_pauses(self.clock.now_ms())
        held = max(pauses.get(limit_key(queue), 0), pauses.get(PUSH_LIMIT, 0))
        return SubscriptionView(queue, sub, held or None)

    def update(self, queue: str, *, endpoint: str | None = None,
               concurrency: int | None = None, rate: str | float | None = None,
               timeout: str | float | None = None, clear_rate: bool = False,
               ) -> SubscriptionView:
        """Change what is given; `clear_rate` removes the rate limit."""
        current = self.get(queue).subscription
        changes: dict[str, Any] = {}
        if endpoint is not None:
            changes["endpoint"] = self._endpoint(endpoint)
        if concurrency is not None:
            changes["concurrency"] = check_concurrency(concurrency)
        if clear_rate:
            changes["rate_per_s"] = None
        elif rate is not None:
            changes["rate_per_s"] = parse_rate(rate)
        if timeout is not None:
            changes["timeout_ms"] = parse_timeout_ms(timeout)
        if not changes:
            raise ValidationError("subscription", "nothing to change: give --endpoint, "
                                  "--concurrency, --rate or --timeout")
        return self._write(queue, current.changed(**changes))

    def set_state(self, queue: str, state: SubscriptionState) -> SubscriptionView:
        """Pause or resume (the transitions table says which moves exist); resuming also
        lifts a pause an endpoint's Retry-After put on its limit key."""
        current = self.get(queue).subscription
        if state is SubscriptionState.ACTIVE:
            self.store.pause_limit(limit_key(queue), None, extend=False)
        if current.state is state:
            self._changed()  # the pushers read the lifted pause at once
            return self._view(queue, current)
        check_transition(current.state, state)
        return self._write(queue, current.changed(state=state))

    def pause(self, queue: str) -> SubscriptionView:
        return self.set_state(queue, SubscriptionState.PAUSED)

    def resume(self, queue: str) -> SubscriptionView:
        return self.set_state(queue, SubscriptionState.ACTIVE)

    def rotate_secret(self, queue: str, *, grace_s: float | None = None) -> SubscriptionView:
        """A new secret; the old one still signs beside it for `grace_s` (default 24 h),
        so receivers can move to the new one without refusing a push meanwhile."""
        current = self.get(queue).subscription
        grace_ms = DEFAULT_ROTATION_GRACE_MS if grace_s is None else int(grace_s * 1000)
        if grace_ms < 0:
            raise ValidationError("grace", "must be 0 or more seconds")
        now = self.clock.now_ms()
        return self._write(queue, current.changed(
            secret=new_secret(), previous_secret=current.secret if grace_ms else None,
            previous_until=now + grace_ms if grace_ms else None))

    def delete(self, queue: str) -> bool:
        deleted = self.store.delete_subscription(self._queue(queue).id)
        self._changed()
        return deleted

    def failures(self, queue: str, limit: int = 20) -> list[SubscriptionFailure]:
        sub = self.get(queue).subscription
        return self.store.push_failures(sub.id, limit)

    def _write(self, queue: str, changed: Subscription) -> SubscriptionView:
        written = self.store.update_subscription(changed, self.clock.now_ms())
        self._changed()
        return self._view(queue, written)

    def _changed(self) -> None:
        """After the commit: wake the pushers of this process and, on SQLite, of the
        file's other processes (on PostgreSQL the store's NOTIFY reaches every node)."""
        self.queues.notifier.notify(SUBSCRIPTIONS_CHANNEL)
