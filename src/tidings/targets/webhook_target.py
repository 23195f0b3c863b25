"""The webhook target's rules: what a schedule's webhook may name, the downstream a limit
would count it against, and its delivery. The HTTP client itself is `targets/webhook.py`
(`WebhookSender`), which only a node delivering loads: the dispatcher (also in its own
process) and the faces that check a target do not load an HTTP client to ask these.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from typing import ClassVar
from urllib.parse import urlsplit

from tidings.model.queues import DELIVERY_QUEUE
from tidings.model.schedules import Target, TargetKind
from tidings.targets.base import (
    Attempt,
    DeliveryError,
    LimitPlace,
    Outcomes,
    Reach,
    TargetChecks,
    one_by_one,
)


class WebhookTarget:
    kind: ClassVar[TargetKind] = TargetKind.WEBHOOK
    writes_queue: ClassVar[bool] = False
    delivery_queue: ClassVar[str] = DELIVERY_QUEUE
    checks_input: ClassVar[bool] = False
    input_limits: ClassVar[tuple[str, ...]] = ()
    logs_deliveries: ClassVar[bool] = False
    native_fields: ClassVar[bool] = True

    def validate(self, target: Target, checks: TargetChecks) -> bool:
        """Refuse a URL naming an address webhooks may not reach (each delivery checks
        again after resolving the name)."""
        checks.webhook_guard.check_url(target.destination)
        return True

    def limit_keys(self, target: Target, body: str | None, place: LimitPlace,
                   wanted: Container[str]) -> dict[str, str]:
        """The host the requests go to: what a receiver's 429 is about (its pause is
        written for this key, whatever limit is set)."""
        host = webhook_host(target)
        return {WEBHOOK_LIMIT: host} if host and WEBHOOK_LIMIT in wanted else {}

    def aws_arn(self, target: Target, region: str, account: str) -> str:
        return target.destination  # a webhook: its URL is the only name it has

    async def deliver(self, batch: Sequence[Attempt], reach: Reach) -> Outcomes:
        async def post(a: Attempt) -> str:
            await reach.webhooks.send(a.target, a.body, a.ctx, a.attempt)
            return "delivered"

        return await one_by_one(batch, post)

    async def gave_up(self, attempt: Attempt, failure: DeliveryError, reach: Reach) -> None:
        return None


WEBHOOK_LIMIT = "webhook"


def webhook_host(target: Target) -> str | None:
    """The value of a webhook's limit key: its host, lower case (any port, any path)."""
    return urlsplit(target.destination).hostname or None
