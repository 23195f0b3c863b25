"""The webhook target's rules: what a schedule's webhook may name, the downstream a limit
would count it against, and its delivery. The HTTP client itself is `targets/webhook.py`
(`WebhookSender`), which only a node delivering loads: the dispatcher (also in its own
process) and the faces that check a target do not load an HTTP client to ask these.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar
from urllib.parse import urlsplit

from tidings.model.queues import DELIVERY_QUEUE
from tidings.model.schedules import Target, TargetKind
from tidings.targets.base import Attempt, DeliveryError, Outcomes, Reach, TargetChecks, one_by_one


class WebhookTarget:
    kind: ClassVar[TargetKind] = TargetKind.WEBHOOK
    writes_queue: ClassVar[bool] = False
    delivery_queue: ClassVar[str] = DELIVERY_QUEUE
    checks_input: ClassVar[bool] = False
    logs_deliveries: ClassVar[bool] = False
    native_fields: ClassVar[bool] = True

    def validate(self, target: Target, checks: TargetChecks) -> bool:
        """Refuse a URL naming an address webhooks may not reach (each delivery checks
        again after resolving the name)."""
        checks.webhook_guard.check_url(target.destination)
        return True

    def limits_key(self, target: Target) -> str:
        """The host (and port) the requests go to: what a receiver's 429 is about."""
        parts = urlsplit(target.destination)
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:  # not a number: the delivery will say so; the key stays usable
            port = 0
        return f"webhook:{(parts.hostname or '').lower()}:{port}"

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


def webhook_host(body: dict[str, Any]) -> str | None:
    """The limit key's value of a delivery job's body: its webhook's host (None: not a
    webhook), so a limit named `webhook` gives each host its own key."""
    target = body.get("target")
    if not isinstance(target, dict) or target.get("kind") != TargetKind.WEBHOOK.value:
        return None
    return urlsplit(str(target.get("destination", ""))).hostname or None
