"""`t.queues` with push subscriptions on it: `t.queues.subscribe("jobs", endpoint=…)`.

The queue service itself (`queues/`) sits below push and knows nothing of it; this
subclass is what `Tidings` builds, so the Python API reads as the CLI does (`tidings queue
subscribe`). Each method is `PushService`'s (`t.queues.push`)."""

from __future__ import annotations

from typing import Any

from tidings.clock import Clock
from tidings.model.push import SubscriptionFailure
from tidings.model.receipts import ReceiptSigner
from tidings.notify.base import Notifier
from tidings.push.service import PushService, SubscriptionView
from tidings.queues.service import QueueService
from tidings.store.base import Store
from tidings.targets.guard import WebhookGuard


class PushQueues(QueueService):
    def __init__(self, store: Store, clock: Clock, notifier: Notifier, signer: ReceiptSigner,
                 *, guard: WebhookGuard, **kwargs: Any) -> None:
        super().__init__(store, clock, notifier, signer, **kwargs)
        self.push = PushService(self, store, clock, guard)

    def subscribe(self, queue: str, endpoint: str, **options: Any) -> SubscriptionView:
        """Push the queue's messages to `endpoint` (`concurrency=20`, `rate="100/s"`,
        `timeout="30s"`, `paused=False`); the view's `subscription.secret` is shown only
        now."""
        return self.push.subscribe(queue, endpoint, **options)

    def subscription(self, queue: str) -> SubscriptionView:
        return self.push.get(queue)

    def subscriptions(self) -> list[SubscriptionView]:
        return self.push.subscriptions()

    def update_subscription(self, queue: str, **changes: Any) -> SubscriptionView:
        return self.push.update(queue, **changes)

    def pause_subscription(self, queue: str) -> SubscriptionView:
        return self.push.pause(queue)

    def resume_subscription(self, queue: str) -> SubscriptionView:
        return self.push.resume(queue)

    def rotate_subscription_secret(self, queue: str, *, grace_s: float | None = None,
                                   ) -> SubscriptionView:
        return self.push.rotate_secret(queue, grace_s=grace_s)

    def unsubscribe(self, queue: str) -> bool:
        return self.push.delete(queue)

    def push_failures(self, queue: str, limit: int = 20) -> list[SubscriptionFailure]:
        return self.push.failures(queue, limit)
