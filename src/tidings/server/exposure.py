"""Whether a node may start where it listens, and the reminder of an open one.

Like Redis's protected mode: a node listening beyond loopback with no credentials at all
(no API token, no AWS access key) refuses to start, saying how to set them, unless the
operator passes `--insecure-no-auth`; then a warning repeats every minute in the log, so
an open node is never forgotten in a corner.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from tidings.errors import ValidationError
from tidings.settings import Settings

log = logging.getLogger("tidings.security")

HOW_TO = ("set TIDINGS_API_TOKENS (e.g. admin:$(tidings token new --bare)) or "
          "TIDINGS_API_TOKENS_FILE for the native API, and TIDINGS_AWS_KEYS or "
          "TIDINGS_AWS_KEYS_FILE for the AWS APIs; or listen on 127.0.0.1; or pass "
          "--insecure-no-auth (TIDINGS_INSECURE_NO_AUTH=true) to run it open anyway")

OPEN_WARNING = ("tidings is listening on %s with authentication off (--insecure-no-auth): "
                "anyone who can reach it can read, send, purge and delete")


def check_exposure(settings: Settings) -> None:
    """Raise when the node would listen beyond loopback with no credentials."""
    if settings.loopback_only or settings.has_credentials or settings.insecure_no_auth:
        return
    raise ValidationError("host", f"{settings.host} is beyond loopback and no credentials "
                          f"are configured: {HOW_TO}")


def check_unsubscribe_links(settings: Settings) -> None:
    """A node beyond loopback that delivers email needs an https TIDINGS_PUBLIC_URL: its
    List-Unsubscribe links are built on it, and Gmail and Yahoo require an https one-click
    link from bulk senders (a link to http://0.0.0.0:9324 reaches nobody). Refused, unless
    the operator opts out (TIDINGS_INSECURE_UNSUBSCRIBE_LINKS): then one loud warning."""
    if settings.loopback_only or not settings.smtp_url:
        return
    if (settings.public_url or "").lower().startswith("https://"):
        return
    problem = (f"this node delivers email from {settings.host} beyond loopback and "
               f"TIDINGS_PUBLIC_URL is {settings.public_url or 'not set'}: its unsubscribe "
               "links would not be https links to this node, which Gmail and Yahoo require")
    if settings.insecure_unsubscribe_links:
        log.warning("!!! %s (TIDINGS_INSECURE_UNSUBSCRIBE_LINKS is set: delivering anyway) "
                    "!!!", problem)
        return
    raise ValidationError("TIDINGS_PUBLIC_URL", f"{problem}; set TIDINGS_PUBLIC_URL="
                          "https://… (how the world reaches this node), or "
                          "TIDINGS_INSECURE_UNSUBSCRIBE_LINKS=true to deliver anyway")


def describe(settings: Settings) -> list[str]:
    """What the node's doors are, for the start-up log (never a secret)."""
    if settings.development_node:
        return ["development node (loopback, no credentials): no authentication, webhooks "
                "may reach private addresses"]
    if not settings.credentials_required:
        return ["authentication OFF (--insecure-no-auth)"]
    native = settings.api_tokens or settings.api_tokens_file
    aws = settings.aws_keys or settings.aws_keys_file
    return ["native API and console: bearer tokens required" + (
                "" if native else " (none configured: every call is refused)"),
            "AWS APIs: SigV4 required" + (
                "" if aws else " (no keys configured: every call is refused)")]


class OpenNodeWarning:
    """A service that logs `OPEN_WARNING` at start and every `interval_s` after."""

    def __init__(self, host: str, interval_s: float = 60.0) -> None:
        self.host = host
        self.interval_s = interval_s
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        while not self._stopping.is_set():
            log.warning(OPEN_WARNING, self.host)
            try:
                await asyncio.wait_for(self._stopping.wait(), self.interval_s)
            except TimeoutError:
                pass

    def stop(self) -> None:
        self._stopping.set()


def uvicorn_security(settings: Settings) -> dict[str, Any]:
    """uvicorn options for TLS and proxies.

    `X-Forwarded-For`/`-Proto` are believed only from `TIDINGS_TRUSTED_PROXIES` (uvicorn
    would otherwise believe them from 127.0.0.1, so any local process could pose as any
    client); with none, they are ignored."""
    if bool(settings.tls_cert) != bool(settings.tls_key):
        raise ValidationError("tls_cert" if settings.tls_key else "tls_key",
                              "--tls-cert and --tls-key go together")
    options: dict[str, Any] = {
        "proxy_headers": bool(settings.trusted_proxies),
        "forwarded_allow_ips": settings.trusted_proxies or "",
        "server_header": False,
    }
    if settings.tls_cert:
        options |= {"ssl_certfile": settings.tls_cert, "ssl_keyfile": settings.tls_key}
    return options
