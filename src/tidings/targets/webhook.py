"""HTTP webhook target: POST the input as JSON, signed with HMAC-SHA256.

Headers a receiver can rely on:
- `X-Tidings-Schedule` (group/name), `X-Tidings-Scheduled-Time` (ISO 8601 UTC),
  `X-Tidings-Attempt` (1-based), `X-Tidings-Execution-Id` (stable per occurrence: dedupe
  on it);
- `X-Tidings-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">` with the
  target's `secret` (or the node's webhook secret). Including the timestamp lets the
  receiver reject replays of an old delivery.

Where it may go: `targets/guard.py` (the SSRF guard) checks the destination, and the
request is sent to the very address it checked. Redirects are not followed: a 3xx is a
permanent failure.

Outcome: 2xx delivered; 408, 429, 5xx, timeouts and connection errors are retried with
the target's retry policy; any other status is a permanent failure (a retry would get the
same answer) and goes straight to the dead-letter queue.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Sequence
from typing import Any, ClassVar
from urllib.parse import urlsplit

import httpx

from tidings.model.firings import FiringContext, scheduled_time_text
from tidings.model.queues import DELIVERY_QUEUE
from tidings.model.schedules import Target, TargetKind
from tidings.targets.base import Attempt, DeliveryError, Outcomes, Reach, TargetChecks, one_by_one
from tidings.targets.guard import WebhookGuard

DEFAULT_TIMEOUT_S = 10.0


def signature(secret: bytes, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret, str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


class WebhookSender:
    def __init__(self, default_secret: bytes, guard: WebhookGuard | None = None) -> None:
        self.default_secret = default_secret
        self.guard = guard or WebhookGuard(enabled=False)
        self._client = httpx.AsyncClient(follow_redirects=False)

    async def send(self, target: Target, body: str, ctx: FiringContext, attempt: int) -> int:
        secret = target.options.get("secret")
        key = secret.encode() if isinstance(secret, str) else self.default_secret
        payload = body.encode()
        headers = {
            "content-type": "application/json",
            "user-agent": "tidings-webhook/1",
            "x-tidings-schedule": f"{ctx.group}/{ctx.name}",
            "x-tidings-scheduled-time": scheduled_time_text(ctx.scheduled_time),
            "x-tidings-attempt": str(attempt),
            "x-tidings-execution-id": ctx.execution_id,
            "x-tidings-signature": signature(key, int(time.time()), payload),
        }
        for name, value in (target.options.get("headers") or {}).items():
            headers.setdefault(str(name).lower(), str(value))
        timeout = float(target.options.get("timeout_s") or DEFAULT_TIMEOUT_S)
        url = target.destination
        extensions: dict[str, Any] = {}
        plan = await self.guard.plan(url)
        if plan is not None:  # connect to the checked address; the name stays for the peer
            url = plan.url
            headers["host"] = urlsplit(target.destination).netloc.rsplit("@", 1)[-1]
            if plan.tls:
                extensions["sni_hostname"] = plan.host
        try:
            response = await self._client.post(url, content=payload, headers=headers,
                                               timeout=timeout, extensions=extensions)
        except httpx.TimeoutException:
            raise DeliveryError("Timeout", f"no answer within {timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise DeliveryError("ConnectionError", f"{type(exc).__name__}: {exc}") from None
        status = response.status_code
        if 200 <= status < 300:
            return status
        text = response.text[:300]
        retryable = status in (408, 429) or status >= 500
        raise DeliveryError(f"HTTP{status}", f"{status} {response.reason_phrase}: {text}",
                            retryable=retryable)

    async def close(self) -> None:
        await self._client.aclose()


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
