"""Sending through an SMTP relay: a pool of sessions per relay, a rate limit, a cap.

Relay URL (`--smtp-url` / `TIDINGS_SMTP_URL`):
- `smtp://[user:pass@]host[:port]` (port 25 by default; 587 with a user): STARTTLS when
  the relay offers it, AUTH with the URL's user and password (percent-encoded);
- `smtps://…` (port 465): TLS from the first byte (implicit TLS, RFC 8314);
- query options: `starttls=require` (fail rather than send in clear), `verify=false`
  (accept any certificate: test relays only), `timeout=30` (seconds a reply may take).

Limits, per relay: at most `max_connections` sessions at once (a relay counts them and
refuses beyond its own cap), and at most `max_rate` messages a second (a token bucket
with room for one message, so the achieved rate stays at the limit rather than
overshooting after a pause). A spike waits in line for a token and a session, in
arrival order; nothing is refused for being over the limit.

Sessions are kept and carry message after message, pipelined when the relay offers
PIPELINING (`session.py`); the relay's state (down, asked to slow down) and the back-off
it earns are the pool's (`relay.py`). Outcomes are in `smtp_errors.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

from tidings.email.pace import TokenBucket
from tidings.email.relay import RelayPool, close_all
from tidings.email.session import new_client
from tidings.email.smtp_errors import (
    SendResult,
    SmtpPermanentError,
    SmtpSlowDown,
    SmtpTemporaryError,
)
from tidings.errors import ValidationError

__all__ = ["RelayConfig", "SendResult", "SmtpPermanentError", "SmtpSender", "SmtpSlowDown",
           "SmtpTemporaryError", "TokenBucket"]


@dataclass(frozen=True)
class RelayConfig:
    url: str
    host: str
    port: int
    implicit_tls: bool
    start_tls: bool | None  # None: when offered; True: required
    username: str | None
    password: str | None
    verify: bool
    timeout_s: float

    @classmethod
    def parse(cls, url: str) -> RelayConfig:
        parts = urlsplit(url)
        if parts.scheme not in ("smtp", "smtps"):
            raise ValidationError("smtp_url", "must start with smtp:// or smtps://")
        if not parts.hostname:
            raise ValidationError("smtp_url", "must name a host, e.g. smtp://mail.example.com:587")
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        implicit = parts.scheme == "smtps"
        user = unquote(parts.username) if parts.username else None
        try:
            port = parts.port or (465 if implicit else 587 if user else 25)
            timeout = float(query.get("timeout", "30"))
        except ValueError:
            raise ValidationError("smtp_url", "has an invalid port or timeout") from None
        start = query.get("starttls", "auto").lower()
        if start not in ("auto", "require"):
            raise ValidationError("smtp_url", "starttls must be auto or require")
        return cls(url=url, host=parts.hostname, port=port, implicit_tls=implicit,
                   start_tls=True if start == "require" and not implicit else None,
                   username=user,
                   password=unquote(parts.password) if parts.password is not None else None,
                   verify=query.get("verify", "true").lower() not in ("0", "false", "no"),
                   timeout_s=timeout)

    @property
    def safe_url(self) -> str:
        """The URL without its password, for logs."""
        user = f"{self.username}@" if self.username else ""
        scheme = "smtps" if self.implicit_tls else "smtp"
        return f"{scheme}://{user}{self.host}:{self.port}"


class SmtpSender:
    """One `RelayPool` per relay URL, made on first use (on the running loop)."""

    def __init__(self, *, max_connections: int = 4, max_rate: float = 0.0,
                 backoff_max_s: float = 60.0, wait_s: float = 300.0,
                 backoff_first_s: float = 1.0) -> None:
        if max_connections < 1:
            raise ValidationError("smtp_max_connections", "must be at least 1")
        self.max_connections = max_connections
        self.max_rate = max_rate
        self.backoff_first_s = backoff_first_s
        self.backoff_max_s = backoff_max_s
        self.wait_s = wait_s
        self._pools: dict[str, RelayPool] = {}

    def pool(self, url: str) -> RelayPool:
        found = self._pools.get(url)
        if found is None:
            c = RelayConfig.parse(url)
            pool = RelayPool(
                f"{c.host}:{c.port}",
                lambda: new_client(c.host, c.port, username=c.username, password=c.password,
                                   implicit_tls=c.implicit_tls, start_tls=c.start_tls,
                                   verify=c.verify, timeout_s=c.timeout_s),
                timeout_s=c.timeout_s, max_connections=self.max_connections,
                backoff_first_s=self.backoff_first_s, backoff_max_s=self.backoff_max_s,
                wait_s=self.wait_s,
                bucket=TokenBucket(self.max_rate) if self.max_rate > 0 else None)
            found = self._pools[url] = pool
        return found

    async def send(self, url: str, sender: str, recipients: Sequence[str],
                   data: bytes) -> SendResult:
        return await self.pool(url).send(sender, recipients, data)

    async def close(self) -> None:
        await close_all(list(self._pools.values()))
