"""Deliverability controls on the way to the relay: per-domain paces and a frequency cap.

- **Per recipient domain** (`TIDINGS_SMTP_DOMAIN_RATES`, e.g. `gmail.com=20,yahoo.com=10`;
  off by default): at most that many emails a second to the domain, each domain its own
  token bucket, so a slow domain's mail waits its turn without holding back the others'
  beyond the deliveries it occupies. `*=N` paces every domain not named. The relay's own
  pace is `TIDINGS_SMTP_MAX_RATE` (smtp.py).
- **Per recipient and local day** (`TIDINGS_EMAIL_DAILY_CAP`, 0: off): list mail (mail
  that carries a one-click unsubscribe: campaigns, sends naming a contact list) to an
  address that was already sent that many emails since its local midnight is not sent:
  the delivery ends SUPPRESSED naming the cap. Transactional mail (a password reset) is
  never capped. The local day is the recipient's `timezone` in the template data (what a
  fan-out's CSV carries), else UTC; the count comes from the delivery log, so it holds
  across restarts and nodes (deliveries in flight at the same moment may pass it by those).

Both sit behind `SendingLimits`, a small interface, so the downstream limits of issue 33
(a `tidings.limits` package shared with webhooks) can back it later without the email
target changing. Campaign quiet hours already exist where they belong, at fan-out time
(`campaigns/fanout_timing.py`): a step due inside them is moved to their end.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, tzinfo
from typing import Any, Protocol
from zoneinfo import ZoneInfo

from tidings.email.pace import TokenBucket
from tidings.errors import ValidationError
from tidings.model.email import bare_address


class SendingLimits(Protocol):
    """Asked by the email target before each message goes to the relay."""

    async def before_send(self, recipients: Sequence[str]) -> None:
        """Return when the message may go (waiting for the domains' paces)."""
        ...


class NoLimits:
    async def before_send(self, recipients: Sequence[str]) -> None:
        return None


class DomainRates:
    """A token bucket per recipient domain (`*`: every domain not named, each its own)."""

    def __init__(self, rates: Mapping[str, float],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rates = dict(rates)
        self.clock = clock
        self._buckets: dict[str, TokenBucket] = {}

    def _bucket(self, domain: str) -> TokenBucket | None:
        bucket = self._buckets.get(domain)
        if bucket is None:
            rate = self.rates.get(domain, self.rates.get("*", 0.0))
            if rate <= 0:
                return None
            bucket = self._buckets[domain] = TokenBucket(rate, clock=self.clock)
        return bucket

    def reserve(self, recipients: Sequence[str]) -> float:
        """Take a token of each recipient domain's bucket; returns how long to wait."""
        domains = {bare_address(r).rpartition("@")[2].lower() for r in recipients}
        return max((b.reserve() for d in sorted(domains) if (b := self._bucket(d))),
                   default=0.0)

    async def before_send(self, recipients: Sequence[str]) -> None:
        if (wait := self.reserve(recipients)) > 0:
            await asyncio.sleep(wait)


def parse_domain_rates(text: str | None) -> dict[str, float]:
    """`gmail.com=20,yahoo.com=10,*=50` → {domain: emails a second}."""
    rates: dict[str, float] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        domain, sep, value = part.partition("=")
        domain = domain.strip().lower()
        try:
            rate = float(value)
        except ValueError:
            rate = -1.0
        if not sep or not domain or rate <= 0 or not (domain == "*" or "." in domain):
            raise ValidationError("TIDINGS_SMTP_DOMAIN_RATES",
                                  f"{part.strip()!r} is not domain=emails-per-second "
                                  "(e.g. gmail.com=20; * for every other domain)")
        rates[domain] = rate
    return rates


def sending_limits(domain_rates: str | None) -> SendingLimits:
    rates = parse_domain_rates(domain_rates)
    return DomainRates(rates) if rates else NoLimits()


def recipient_zone(template_data: Mapping[str, Any]) -> tzinfo:
    """The zone of the recipient's local day: the template data's `timezone` when it
    names one, else UTC."""
    name = template_data.get("timezone")
    if isinstance(name, str) and name:
        try:
            return ZoneInfo(name)
        except (ValueError, KeyError, OSError):  # (ZoneInfoNotFoundError is a KeyError)
            pass
    return UTC


def local_midnight_ms(now_ms: int, zone: tzinfo) -> int:
    local = datetime.fromtimestamp(now_ms / 1000, zone)
    midnight = local.replace(hour=0, minute=0, second=0, microsecond=0)
    return int(midnight.timestamp() * 1000)
