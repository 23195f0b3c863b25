"""Recipient domains the relay asked this node to slow down for, and until when.

A relay that paces each destination (Postfix's per-domain concurrency, a provider's
"450 4.7.1 too many messages to gmail.com") answers RCPT with a 4xx about its rate. That
reply concerns the domain, not the message: retrying the message at once, or counting
the attempt as a failure, would only earn more of them. So the domain is *held*: for a
back-off that doubles with each slow-down in a row (from `first_s` up to `max_s`, the
relay's own back-off settings), mail to it is not offered to the relay; its deliveries
go back to their queue until the hold ends without an attempt counted
(`DeliveryError.retry_after_s`), and the hold is written as a pause of the limit key
`email:<domain>` so every node's consumers keep that domain's jobs back too
(`jobs/deliveries.py`). Mail to other domains goes on. A message the domain takes again
ends the streak, so the next slow-down starts short.

One log line when a domain becomes held (naming the domain, the reply and the pause)
and one when mail to it goes again; none per message.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

log = logging.getLogger("tidings.email.domains")

def domain_of(address: str) -> str:
    return address.rpartition("@")[2].strip().lower()


@dataclass(slots=True)
class Hold:
    until: float  # clock seconds
    backoff_s: float  # the length of the last hold: the next one doubles it
    reason: str


class DomainHolds:
    def __init__(self, first_s: float = 1.0, max_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.first_s = first_s
        self.max_s = max(max_s, first_s)
        self.clock = clock
        self._holds: dict[str, Hold] = {}

    def hold(self, domains: Iterable[str], reason: str) -> float:
        """The relay slowed us down for `domains`: hold them; returns the seconds until
        the longest of their holds ends."""
        now = self.clock()
        longest = 0.0
        for domain in domains:
            held = self._holds.get(domain)
            if held is not None and held.until > now:
                longest = max(longest, held.until - now)  # held already: no new line
                continue
            backoff = self.first_s if held is None else min(held.backoff_s * 2, self.max_s)
            self._holds[domain] = Hold(now + backoff, backoff, reason)
            log.warning("SMTP relay asked to slow down for %s: %s; holding its emails "
                        "for %g s", domain, reason, backoff)
            longest = max(longest, backoff)
        return longest

    def held(self, recipients: Iterable[str]) -> tuple[str, float, str] | None:
        """(domain, seconds left, reason) of a recipient's domain on hold, or None."""
        if not self._holds:
            return None
        now = self.clock()
        for address in recipients:
            hold = self._holds.get(domain_of(address))
            if hold is not None and hold.until > now:
                return domain_of(address), hold.until - now, hold.reason
        return None

    def took(self, recipients: Iterable[str]) -> None:
        """Mail to these recipients was accepted: their domains' streaks end."""
        if not self._holds:
            return
        for address in recipients:
            domain = domain_of(address)
            hold = self._holds.pop(domain, None)
            if hold is not None:
                log.info("SMTP relay takes mail for %s again", domain)
