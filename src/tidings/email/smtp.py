"""Sending through an SMTP relay: pooled connections, a rate limit and a connection cap.

Relay URL (`--smtp-url` / `TIDINGS_SMTP_URL`):
- `smtp://[user:pass@]host[:port]` (port 25 by default; 587 with a user): STARTTLS when
  the relay offers it, AUTH with the URL's user and password (percent-encoded);
- `smtps://…` (port 465): TLS from the first byte (implicit TLS, RFC 8314);
- query options: `starttls=require` (fail rather than send in clear), `verify=false`
  (accept any certificate: test relays only), `timeout=30` (seconds a reply may take).

Limits, per relay: at most `max_connections` sessions at once (a relay counts them and
refuses beyond its own cap), and at most `max_rate` messages a second (a token bucket
with room for one message, so the achieved rate stays at the limit rather than
overshooting after a pause). A spike waits in line for a token and a connection, in
arrival order; nothing is refused for being over the limit.

Connections are kept and reused for later messages (one EHLO/AUTH per connection, not
per message); one that breaks is dropped and the next message opens a fresh one.

Outcome of a send: the relay's final reply. 4xx replies, lost connections and timeouts
raise `SmtpTemporaryError` (try again later); 5xx raise `SmtpPermanentError`, naming the
refused recipients (all of them when the relay refused the message itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NoReturn
from urllib.parse import parse_qs, unquote, urlsplit

import aiosmtplib

from tidings.errors import ValidationError

_LOCAL_HOSTNAME = socket.gethostname() or "localhost"  # not getfqdn(): no DNS per connect


class SmtpTemporaryError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code} {message}" if code else message)
        self.code = code
        self.message = message


class SmtpPermanentError(Exception):
    def __init__(self, code: int, message: str, refused: Sequence[str]) -> None:
        super().__init__(f"{code} {message}")
        self.code = code
        self.message = message
        self.refused = tuple(refused)


@dataclass(frozen=True)
class SendResult:
    reply: str  # the relay's answer to DATA, e.g. "250 OK queued as 4F2A"
    refused: dict[str, str]  # recipients refused while others were accepted: address → reply


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


class TokenBucket:
    """`rate` tokens a second, room for `burst`. Waiters are served in arrival order:
    each reserves the next free instant, so none can starve another."""

    def __init__(self, rate: float, burst: int = 1,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.interval = 1.0 / rate
        self.burst = max(burst, 1)
        self._clock = clock
        self._next = clock()  # the instant the next token is free

    def reserve(self) -> float:
        """Take a token; returns how long to wait before using it."""
        now = self._clock()
        earliest = now - (self.burst - 1) * self.interval  # unused tokens saved up
        at = max(self._next, earliest)
        self._next = at + self.interval
        return max(at - now, 0.0)

    async def acquire(self) -> None:
        wait = self.reserve()
        if wait > 0:
            await asyncio.sleep(wait)


class RelayPool:
    """Connections to one relay, at most `max_connections` in use at once."""

    def __init__(self, config: RelayConfig, *, max_connections: int = 4,
                 max_rate: float = 0.0) -> None:
        if max_connections < 1:
            raise ValidationError("smtp_max_connections", "must be at least 1")
        self.config = config
        self.max_connections = max_connections
        self._slots = asyncio.Semaphore(max_connections)
        self._idle: deque[aiosmtplib.SMTP] = deque()
        self.bucket = TokenBucket(max_rate) if max_rate > 0 else None
        self.sent = 0

    async def _connect(self) -> aiosmtplib.SMTP:
        c = self.config
        client = aiosmtplib.SMTP(hostname=c.host, port=c.port, username=c.username,
                                 password=c.password, use_tls=c.implicit_tls,
                                 start_tls=c.start_tls, validate_certs=c.verify,
                                 timeout=c.timeout_s, local_hostname=_LOCAL_HOSTNAME)
        try:
            await client.connect()
        except aiosmtplib.SMTPResponseException as exc:
            # Even a 5xx here (e.g. 535 bad credentials) refuses the session, not this
            # message: no bounce, and a retry succeeds once the relay or setup is fixed.
            raise SmtpTemporaryError(exc.code, f"relay {c.safe_url}: {exc.message}") from None
        except (aiosmtplib.SMTPException, OSError) as exc:
            raise SmtpTemporaryError(0, f"cannot connect to {c.safe_url}: {exc}") from None
        return client

    async def send(self, sender: str, recipients: Sequence[str], data: bytes) -> SendResult:
        if self.bucket is not None:
            await self.bucket.acquire()
        async with self._slots:
            client = self._idle.pop() if self._idle else await self._connect()
            reusable = False
            try:
                result = await self._transaction(client, sender, recipients, data)
                reusable = True
                self.sent += 1
                return result
            except SmtpPermanentError:
                reusable = True  # aiosmtplib sent RSET: the session is clean again
                raise
            except SmtpTemporaryError as exc:
                reusable = exc.code > 0  # a reply (not a lost connection): RSET was sent
                raise
            finally:
                if reusable and client.is_connected:
                    self._idle.append(client)
                else:
                    client.close()

    @staticmethod
    async def _transaction(client: aiosmtplib.SMTP, sender: str, recipients: Sequence[str],
                           data: bytes) -> SendResult:
        # MAIL/RCPT are issued directly rather than through `sendmail`, whose address
        # re-parsing costs more than the rest of the transaction; the addresses were
        # validated when the message was accepted (no spaces, brackets or line breaks).
        try:
            if client.is_ehlo_or_helo_needed:
                await client.ehlo()
            reply = await client.execute_command(b"MAIL", b"FROM:<" + sender.encode() + b">")
            if reply.code != 250:
                await _reset(client)
                _raise(reply.code, reply.message, recipients)
            refused: dict[str, aiosmtplib.SMTPResponse] = {}
            for rcpt in recipients:
                reply = await client.execute_command(b"RCPT", b"TO:<" + rcpt.encode() + b">")
                if reply.code not in (250, 251):
                    refused[rcpt] = reply
            if len(refused) == len(recipients):
                await _reset(client)
                first = next(iter(refused.values()))
                if all(400 <= r.code < 500 for r in refused.values()):
                    raise SmtpTemporaryError(first.code, first.message)
                raise SmtpPermanentError(first.code, first.message,
                                         [a for a, r in refused.items() if r.code >= 500])
            reply = await client.data(data)
        except aiosmtplib.SMTPResponseException as exc:  # DATA refused (SMTPDataError)
            await _reset(client)
            _raise(exc.code, exc.message, recipients)
        except (TimeoutError, aiosmtplib.SMTPException, OSError) as exc:
            client.close()
            raise SmtpTemporaryError(0, f"{type(exc).__name__}: {exc}") from None
        return SendResult(reply=f"{reply.code} {reply.message}",
                          refused={a: f"{r.code} {r.message}" for a, r in refused.items()})

    async def close(self) -> None:
        while self._idle:
            client = self._idle.pop()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.quit(), 2)
            client.close()


def _raise(code: int, message: str, recipients: Sequence[str]) -> NoReturn:
    if 500 <= code < 600:
        raise SmtpPermanentError(code, message, recipients)
    raise SmtpTemporaryError(code, message)


async def _reset(client: aiosmtplib.SMTP) -> None:
    """RSET after a refusal, so the session can carry the next message."""
    try:
        await client.rset()
    except (TimeoutError, aiosmtplib.SMTPException, OSError):
        client.close()


class SmtpSender:
    """One `RelayPool` per relay URL, made on first use."""

    def __init__(self, *, max_connections: int = 4, max_rate: float = 0.0) -> None:
        self.max_connections = max_connections
        self.max_rate = max_rate
        self._pools: dict[str, RelayPool] = {}

    def pool(self, url: str) -> RelayPool:
        pool = self._pools.get(url)
        if pool is None:
            pool = self._pools[url] = RelayPool(RelayConfig.parse(url),
                                                max_connections=self.max_connections,
                                                max_rate=self.max_rate)
        return pool

    async def send(self, url: str, sender: str, recipients: Sequence[str],
                   data: bytes) -> SendResult:
        return await self.pool(url).send(sender, recipients, data)

    async def close(self) -> None:
        for pool in self._pools.values():
            await pool.close()
