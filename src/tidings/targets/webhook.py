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
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tidings.model.firings import FiringContext, scheduled_time_text
from tidings.model.limits import retry_after_ms
from tidings.model.schedules import Target
from tidings.targets.base import DeliveryError
from tidings.targets.guard import WebhookGuard

if TYPE_CHECKING:
    import httpx

DEFAULT_TIMEOUT_S = 10.0
#: An idle kept-alive connection is closed after this long: under the 5 s that uvicorn,
#: Node and Apache keep one, so this side lets go first (httpx's default is 5 s too).
KEEPALIVE_S = 4.0

#: A Retry-After longer than this is taken as this (`tidings.RetryAfter`'s own bound).
MAX_RETRY_AFTER_MS = 43_200_000


def signature(secret: bytes, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret, str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


class WebhookSender:
    def __init__(self, default_secret: bytes, guard: WebhookGuard | None = None) -> None:
        self.default_secret = default_secret
        self.guard = guard or WebhookGuard(enabled=False)
        # Made at the first webhook: httpx (with the CLI it imports, rich and click) is
        # ~20 MB of every process's memory, which a node that sends no webhook saves.
        self._client: httpx.AsyncClient | None = None

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
        import httpx

        if self._client is None:
            self._client = httpx.AsyncClient(
                follow_redirects=False, limits=httpx.Limits(keepalive_expiry=KEEPALIVE_S))
        # A request that fails without an answer on a connection kept alive from an
        # earlier one (a read or write error, an answer cut short) most likely met the
        # server closing it as its keep-alive ran out: it is sent once more at once, on a
        # new connection, and only then counts. Without it a retry that came as the
        # receiver's keep-alive ended (uvicorn's, Node's 5 s; gunicorn's 2 s) failed as
        # "ReadError" and burnt an attempt the receiver never saw. On a new connection
        # the same failure is the attempt's: the receiver may have read it and died.
        stale = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)
        for tries_left in (1, 0):
            connected: list[str] = []

            async def trace(event: str, _info: Any, seen: list[str] = connected) -> None:
                if event.startswith("connection.connect_tcp."):
                    seen.append(event)

            try:
                response = await self._client.post(
                    url, content=payload, headers=headers, timeout=timeout,
                    extensions={**extensions, "trace": trace})
                break
            except httpx.TimeoutException:
                raise DeliveryError("Timeout", f"no answer within {timeout:g} s") from None
            except httpx.HTTPError as exc:
                if tries_left and not connected and isinstance(exc, stale):
                    continue
                why = str(exc) or "the connection was closed before an answer"
                raise DeliveryError("ConnectionError", f"{type(exc).__name__}: {why}") from None
        status = response.status_code
        if 200 <= status < 300:
            return status
        text = response.text[:300]
        retryable = status in (408, 429) or status >= 500
        later = (retry_after_ms(response.headers.get("retry-after"), int(time.time() * 1000),
                                cap_ms=MAX_RETRY_AFTER_MS) if status in (429, 503) else None)
        pushback = later / 1000 if later is not None else None
        raise DeliveryError(f"HTTP{status}", f"{status} {response.reason_phrase}: {text}",
                            retryable=retryable, retry_after_s=pushback)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
