"""The HTTP side of pushing: one keep-alive pool per endpoint (aiohttp), the SSRF guard and
TLS verification as webhook targets have them (`targets/guard.py`), and what an answer
means for the message.

A pool per endpoint origin, sized to the subscription's concurrency: a slow endpoint
fills only its own pool, so it never holds back another queue's pushes. Redirects are not
followed (a 3xx is a failure, as for webhooks).

Why aiohttp and not httpx (which webhook targets use): on 2 cores, 64 pushes at a time
to a loopback receiver answering at once, httpx made 520-580 requests a second and
aiohttp 5,100-6,300 (docs/benchmarks.md, push subscriptions): httpx's pool walk and
per-request machinery cost more than the push itself.
"""

from __future__ import annotations

import functools
import ssl
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from tidings.model.limits import retry_after_ms
from tidings.targets.base import DeliveryError
from tidings.targets.guard import WebhookGuard

#: At most this much of an endpoint's answer is kept as the message's error.
BODY_KEPT = 300
#: A Retry-After longer than this is taken as this (an endpoint cannot park a queue for days).
MAX_RETRY_AFTER_MS = 3600_000
#: A 2xx answer's body up to this size is read to its end, so its connection is reused;
#: past it the connection is closed instead.
MAX_DRAINED = 65_536
#: An idle keep-alive connection is closed after this long: under the 5 s that uvicorn,
#: Node and Apache keep one, so this side lets go first, and a push does not go out on a
#: connection the endpoint is closing at that instant (it would fail unanswered and cost
#: an attempt). Knowing which request went out on a kept-alive connection, to send it
#: again at once as webhooks do, takes an aiohttp trace config: 11-13 % more CPU a push.
KEEPALIVE_S = 4.0


@dataclass(frozen=True)
class Answer:
    """What became of one push: `ok` (a 2xx); otherwise `status` (None when the endpoint
    gave none: a timeout, a refused connection) and `error`, recorded on the message;
    `retry_after_ms` when a 429 or 503 said when to come back."""

    ok: bool
    status: int | None = None
    error: str = ""
    retry_after_ms: int | None = None


OK = Answer(True, 200)


@functools.cache
def _tls() -> ssl.SSLContext:
    """One verifying TLS context for every pool (making one reads the CA bundle), with
    certifi's CA bundle, the one httpx and so webhook targets use: pushes trust what
    webhook targets trust."""
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


@functools.lru_cache(maxsize=64)
def _timeout(seconds: float) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(total=seconds)


class PushSender:
    def __init__(self, guard: WebhookGuard | None = None) -> None:
        self.guard = guard or WebhookGuard(enabled=False)
        self._sessions: dict[tuple[str, int], aiohttp.ClientSession] = {}

    def _session(self, url: str, pool: int) -> aiohttp.ClientSession:
        """The endpoint's pool of `pool` keep-alive connections (made on first use)."""
        parts = urlsplit(url)
        key = (f"{parts.scheme}://{parts.netloc}", pool)
        session = self._sessions.get(key)
        if session is None or session.closed:
            connector = aiohttp.TCPConnector(limit=pool, limit_per_host=pool, ssl=_tls(),
                                             keepalive_timeout=KEEPALIVE_S,
                                             enable_cleanup_closed=False)
            # No cookies kept between pushes, no default User-Agent (ours is set), and
            # the answer's body read as sent (only its start is kept): so no
            # Accept-Encoding asking for a compressed one.
            session = self._sessions[key] = aiohttp.ClientSession(
                connector=connector, cookie_jar=aiohttp.DummyCookieJar(),
                auto_decompress=False, skip_auto_headers=("User-Agent", "Accept-Encoding"))
        return session

    async def post(self, endpoint: str, body: bytes, headers: dict[str, str], *,
                   timeout_s: float, pool: int) -> Answer:
        url = endpoint
        extra: dict[str, Any] = {}
        try:
            plan = await self.guard.plan(endpoint)
        except DeliveryError as refused:
            return Answer(False, None, f"{refused.code}: {refused.message}")
        if plan is not None:  # connect to the checked address; the name stays for the peer
            url = plan.url
            headers = {**headers, "host": urlsplit(endpoint).netloc.rsplit("@", 1)[-1]}
            if plan.tls:  # SNI and the certificate's check use the name, not the address
                extra["server_hostname"] = plan.host
        try:
            async with self._session(url, pool).post(
                    url, data=body, headers=headers, allow_redirects=False,
                    timeout=_timeout(timeout_s), **extra) as response:
                status = response.status
                if 200 <= status < 300:
                    if (response.content_length or 0) <= MAX_DRAINED:
                        await response.read()  # to its end: the connection is kept
                    return OK if status == 200 else Answer(True, status)
                text = (await response.content.read(BODY_KEPT)).decode("utf-8", "replace")
                reason = response.reason or ""
                later = None
                if status in (429, 503):
                    later = retry_after_ms(response.headers.get("retry-after"),
                                           int(time.time() * 1000), cap_ms=MAX_RETRY_AFTER_MS)
        except TimeoutError:
            return Answer(False, None, f"Timeout: no answer within {timeout_s:g} s")
        except aiohttp.ClientError as exc:
            why = str(exc) or "the connection was closed before an answer"
            return Answer(False, None, f"ConnectionError: {type(exc).__name__}: {why}")
        return Answer(False, status, f"HTTP{status}: {status} {reason}: {text}", later)

    async def close(self) -> None:
        for session in self._sessions.values():
            await session.close()
        self._sessions.clear()

