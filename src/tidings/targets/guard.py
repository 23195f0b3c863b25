"""The webhook SSRF guard: a webhook cannot reach the inside of the network it runs in.

Refused: loopback, private (RFC 1918, fc00::/7), link-local (169.254.0.0/16, where cloud
metadata services answer, and fe80::/10), carrier-grade NAT, multicast, reserved,
unspecified, and every other non-global address, also inside an IPv4-mapped IPv6 one.

Two moments:

* at creation, a URL whose host is such an address (or `localhost`) is a
  `ValidationError` on `Target.Arn` (a 400): nothing to resolve, it is refused as written;
* at delivery, the host name is resolved, every address checked, and the request is sent
  to the checked address itself (the `Host` header and TLS SNI/verification keep the
  name), so a DNS answer that changes between check and connect (rebinding) cannot slip
  an inside address through. Redirects are never followed. A refusal fails the delivery
  without retries (it would get the same answer): to the dead-letter queue with the
  reason.

`TIDINGS_WEBHOOK_ALLOW` opens what the operator chooses: CIDR ranges (`10.0.0.0/8`) and
host names (`hooks.internal`, or `.internal` for every name under it; for an allowed name
any address it resolves to is accepted). `TIDINGS_WEBHOOK_HTTPS_ONLY` refuses http://.
The guard is on except on a development node (loopback, no credentials), unless
`TIDINGS_WEBHOOK_GUARD` says `on` or `off`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from tidings.errors import ValidationError
from tidings.settings import Settings
from tidings.targets.base import DeliveryError

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Awaitable[list[str]]]


def refused_reason(ip: IpAddress) -> str | None:
    """Why a delivery may not go to `ip`; None for a public address."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return refused_reason(ip.ipv4_mapped)
    for test, reason in ((ip.is_loopback, "loopback"), (ip.is_link_local, "link-local"),
                         (ip.is_multicast, "multicast"), (ip.is_unspecified, "unspecified"),
                         (ip.is_private, "private"), (ip.is_reserved, "reserved")):
        if test:
            return reason
    return None if ip.is_global else "not public"


async def system_resolve(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True)
class Plan:
    """Where a delivery really goes: `url` names the checked address; `host` is the
    original host (for the Host header and TLS)."""

    url: str
    host: str
    port: int
    tls: bool


class WebhookGuard:
    def __init__(self, *, enabled: bool, allow: Sequence[str] = (), https_only: bool = False,
                 resolve: Resolver = system_resolve) -> None:
        self.enabled = enabled
        self.https_only = https_only
        self.networks: list[IpNetwork] = []
        self.names: list[str] = []
        for item in allow:
            item = item.strip().lower()
            if not item:
                continue
            try:
                self.networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                self.names.append(item)
        self.resolve = resolve

    @classmethod
    def from_settings(cls, settings: Settings) -> WebhookGuard:
        mode = settings.webhook_guard
        enabled = mode == "on" or (mode == "auto" and not settings.development_node)
        allow = (settings.webhook_allow or "").split(",")
        return cls(enabled=enabled, allow=allow, https_only=settings.webhook_https_only)

    def _name_allowed(self, host: str) -> bool:
        return any(host == n or (n.startswith(".") and host.endswith(n)) for n in self.names)

    def _ip_allowed(self, ip: IpAddress) -> str | None:
        """None when allowed, else the reason it is refused."""
        reason = refused_reason(ip)
        if reason is None or any(ip in net for net in self.networks):
            return None
        return reason

    def check_url(self, url: str, field: str = "Target.Arn") -> None:
        """At creation: refuse what is refused as written."""
        parts = urlsplit(url)
        if self.https_only and parts.scheme != "https":
            raise ValidationError(field, "webhooks must use https:// on this node "
                                  "(TIDINGS_WEBHOOK_HTTPS_ONLY)")
        if not self.enabled:
            return
        host = (parts.hostname or "").lower()
        if not host:
            raise ValidationError(field, "a webhook URL needs a host")
        if self._name_allowed(host):
            return
        if host == "localhost" or host.endswith(".localhost"):
            raise ValidationError(field, f"{host} is a loopback address, which webhooks may "
                                  "not reach (TIDINGS_WEBHOOK_ALLOW opens it)")
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            return  # a name: checked when it is resolved, at each delivery
        reason = self._ip_allowed(ip)
        if reason is not None:
            raise ValidationError(field, f"{host} is a {reason} address, which webhooks may "
                                  "not reach (TIDINGS_WEBHOOK_ALLOW opens it)")

    async def plan(self, url: str) -> Plan | None:
        """At delivery: the checked address to connect to; None when the guard is off.

        Raises a non-retryable `DeliveryError` (code WebhookRefused) for a refused one."""
        try:
            self.check_url(url, "url")
        except ValidationError as exc:
            raise DeliveryError("WebhookRefused", exc.rule, retryable=False) from None
        if not self.enabled:
            return None
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        tls = parts.scheme == "https"
        port = parts.port or (443 if tls else 80)
        try:
            candidates = [host] if _is_ip(host) else await self.resolve(host, port)
        except OSError as exc:
            raise DeliveryError("ConnectionError", f"cannot resolve {host}: {exc}") from None
        allowed_name = self._name_allowed(host)
        chosen, refused = None, []
        for text in candidates:
            ip = ipaddress.ip_address(text.split("%", 1)[0])
            reason = None if allowed_name else self._ip_allowed(ip)
            if reason is None:
                chosen = chosen or ip
            else:
                refused.append(f"{ip} ({reason})")
        if chosen is None:
            raise DeliveryError("WebhookRefused", f"{host} resolves to "
                                f"{', '.join(refused) or 'no address'}, which webhooks may "
                                "not reach (TIDINGS_WEBHOOK_ALLOW opens it)", retryable=False)
        literal = f"[{chosen}]" if chosen.version == 6 else str(chosen)
        netloc = f"{literal}:{port}"
        path = parts.path or "/"
        target = f"{parts.scheme}://{netloc}{path}" + (f"?{parts.query}" if parts.query else "")
        return Plan(target, host, port, tls)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
