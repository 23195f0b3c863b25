"""The HTTP side of pushing: one keep-alive pool per endpoint (httpx), the SSRF guard and
TLS verification as webhook targets have them (`targets/guard.py`), and what an answer
means for the message.

A pool per endpoint origin, sized to the subscription's concurrency: a slow endpoint
fills only its own pool, so it never holds back another queue's pushes. Redirects are not
followed (a 3xx is a failure, as for webhooks).
"""

from __future__ import annotations

import functools
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from tidings.model.limits import retry_after_ms
from tidings.targets.base import DeliveryError
from tidings.targets.guard import WebhookGuard

#: At most this much of an endpoint's answer is kept as the message's error.
BODY_KEPT = 300
#: A Retry-After longer than this is taken as this (an endpoint cannot park a queue for days).
MAX_RETRY_AFTER_MS = 3600_000
#: Connections per httpx client (see `PushSender._client`).
SHARD = 8


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
    """One verifying TLS context for every client (making one reads the CA bundle), with
    the CA bundle httpx itself uses, so pushes trust what webhook targets trust."""
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


class PushSender:
    def __init__(self, guard: WebhookGuard | None = None) -> None:
        self.guard = guard or WebhookGuard(enabled=False)
        self._clients: dict[tuple[str, int], list[httpx.AsyncClient]] = {}
        self._turn = 0

    def _client(self, url: str, pool: int) -> httpx.AsyncClient:
        """One of the endpoint's clients, in turn. A pool of `pool` connections is split
        into clients of at most `SHARD` connections: httpcore walks every connection of
        its pool for each request (and polls each idle one), so one pool of 64 cost more
        CPU per push than the push itself (measured: 40 % of a push's time)."""
        parts = urlsplit(url)
        key = (f"{parts.scheme}://{parts.netloc}", pool)
        shards = self._clients.get(key)
        if shards is None:
            shards = self._clients[key] = [self._new_client(min(SHARD, pool))
                                           for _ in range(-(-pool // SHARD))]
        self._turn = (self._turn + 1) % len(shards)
        return shards[self._turn]

    @staticmethod
    def _new_client(size: int) -> httpx.AsyncClient:
        limits = httpx.Limits(max_connections=size, max_keepalive_connections=size,
                              keepalive_expiry=30)
        # TCP_NODELAY: httpx may write a request's head and body separately; with Nagle
        # on, the body could wait for the head's ACK, which receivers delay.
        transport = httpx.AsyncHTTPTransport(
            verify=_tls(), limits=limits,
            socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
        return httpx.AsyncClient(follow_redirects=False, transport=transport)

    async def post(self, endpoint: str, body: bytes, headers: dict[str, str], *,
                   timeout_s: float, pool: int) -> Answer:
        url = endpoint
        extensions: dict[str, Any] = {}
        try:
            plan = await self.guard.plan(endpoint)
        except DeliveryError as refused:
            return Answer(False, None, f"{refused.code}: {refused.message}")
        if plan is not None:  # connect to the checked address; the name stays for the peer
            url = plan.url
            headers = {**headers, "host": urlsplit(endpoint).netloc.rsplit("@", 1)[-1]}
            if plan.tls:
                extensions["sni_hostname"] = plan.host
        try:
            response = await self._client(url, pool).post(
                url, content=body, headers=headers, timeout=timeout_s, extensions=extensions)
        except httpx.TimeoutException:
            return Answer(False, None, f"Timeout: no answer within {timeout_s:g} s")
        except httpx.HTTPError as exc:
            return Answer(False, None, f"ConnectionError: {type(exc).__name__}: {exc}")
        status = response.status_code
        if 200 <= status < 300:
            return OK if status == 200 else Answer(True, status)
        text = response.text[:BODY_KEPT]
        later = None
        if status in (429, 503):
            later = retry_after_ms(response.headers.get("retry-after"), int(time.time() * 1000),
                                   cap_ms=MAX_RETRY_AFTER_MS)
        return Answer(False, status, f"HTTP{status}: {status} {response.reason_phrase}: {text}",
                      later)

    async def close(self) -> None:
        for shards in self._clients.values():
            for client in shards:
                await client.aclose()
        self._clients.clear()
