"""Push subscriptions: what `tidings.push` asks of the store."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from tidings.model.push import Subscription, SubscriptionFailure
from tidings.model.receipts import Receipt


@dataclass(frozen=True)
class NewSubscription:
    queue_id: int
    endpoint: str
    concurrency: int
    rate_per_s: float | None
    timeout_ms: int
    state: str
    secret: str
    now: int


@dataclass(frozen=True)
class SlotClaim:
    """A node's ask for (or renewal of) in-flight slots of a subscription, held until
    `until`; only slots below `concurrency` count."""

    subscription_id: int
    holder: str
    concurrency: int
    until: int
    now: int


class PushStore(Protocol):
    """Subscriptions (one per queue), their shared in-flight slots and recent failures."""

    def create_subscription(self, new: NewSubscription) -> Subscription:
        """Insert it and its slots; `ConflictError` when the queue already has one."""
        ...

    def get_subscription(self, queue_id: int) -> Subscription:
        """`SubscriptionNotFound` when the queue has none."""
        ...

    def list_subscriptions(self) -> list[Subscription]: ...

    def update_subscription(self, changed: Subscription, now: int) -> Subscription:
        """Write every field of `changed` if the row is still at `changed.version` (a
        compare-and-set; `ConflictError` otherwise); slots up to its concurrency exist
        afterwards."""
        ...

    def delete_subscription(self, queue_id: int) -> bool:
        """With its slots and failures; False when there was none."""
        ...

    def claim_slots(self, claim: SlotClaim, want: int) -> list[int]:
        """Up to `want` free slots, now held by `claim.holder` until `claim.until`."""
        ...

    def renew_slots(self, claim: SlotClaim) -> list[int]:
        """Extend the holder's slots that it still holds; those it lost are not returned."""
        ...

    def release_slots(self, subscription_id: int, holder: str, slots: Sequence[int]) -> None: ...

    def return_messages(self, queue_id: int, receipts: Sequence[Receipt],
                        visible_at: int) -> list[bool]:
        """Give leased messages back, visible at `visible_at`, their receive not counted
        (compare-and-set on the lease; False where stale)."""
        ...

    def record_push_failures(self, subscription_id: int,
                             failures: Sequence[SubscriptionFailure], keep: int) -> None:
        """Add them, keeping only the subscription's last `keep`."""
        ...

    def push_failures(self, subscription_id: int, limit: int) -> list[SubscriptionFailure]:
        """The most recent first."""
        ...
