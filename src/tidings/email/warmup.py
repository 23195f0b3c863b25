"""A new sending domain's warm-up: daily caps that grow (`TIDINGS_EMAIL_WARMUP`).

Mailbox providers judge a sending domain (and IP) by its history: one that sends nothing
and then 200,000 emails in an hour looks like a spammer's. A warm-up ladder such as
`50,100,250,500,1000,2500,5000` lets a domain send at most 50 emails on its first day, 100
on its second, and so on; past the ladder's last step there is no cap. Day 1 is the first
UTC day the domain sent with a warm-up configured; days are UTC days (midnight to
midnight UTC, whatever the recipients' zones), counted in the database
(`email_warmup_days`), so the cap holds across nodes and restarts.

Mail over today's cap is *paced*, not failed: its delivery stays QUEUED with the reason in
its detail and goes back to its queue until the next UTC day (a few minutes past midnight,
spread so the day's first sends do not all come at once), without an attempt counted and
whatever the retry policy's maximum event age (`DeliveryError.paced`: our own pace held
it, the downstream never refused it). The count is of messages offered to the relay: one
the relay then refuses still used its place.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence

from tidings.clock import Clock
from tidings.errors import ValidationError
from tidings.model.email import bare_address
from tidings.runtime.batching import Batcher
from tidings.runtime.bridge import Bridge
from tidings.store.base import EmailStore

DAY_MS = 86_400_000
#: Paced mail comes back within this many seconds after midnight UTC, spread at random.
SPREAD_S = 300.0


def parse_ladder(text: str | None) -> tuple[int, ...]:
    """`50,100,250` → (50, 100, 250): the caps of day 1, 2, 3 …"""
    steps = [p.strip() for p in (text or "").split(",") if p.strip()]
    if not all(p.isdigit() and int(p) > 0 for p in steps):
        raise ValidationError("TIDINGS_EMAIL_WARMUP", f"{text!r} is not a list of daily "
                              "caps, e.g. 50,100,250,500,1000")
    return tuple(int(p) for p in steps)


def sending_domain(from_address: str) -> str:
    return bare_address(from_address).rpartition("@")[2].lower()


def utc_day(now_ms: int) -> int:
    return now_ms // DAY_MS


class WarmUp:
    """Grants today's places of each sending domain; concurrent deliveries share one
    store transaction (a group commit)."""

    def __init__(self, store: EmailStore, bridge: Bridge, clock: Clock,
                 ladder: Sequence[int]) -> None:
        self.store = store
        self.clock = clock
        self.ladder = tuple(ladder)
        self._take: Batcher[None, str, bool] = Batcher(bridge, self._grant)

    def _grant(self, _: None, domains: Sequence[str]) -> list[bool]:
        wanted = Counter(domains)
        day = utc_day(self.clock.now_ms())
        left = dict(zip(wanted, self.store.take_warmup(day, self.ladder,
                                                       list(wanted.items())), strict=True))
        out = []
        for domain in domains:
            out.append(left[domain] > 0)
            left[domain] -= 1
        return out

    async def pace(self, from_address: str) -> float | None:
        """None: the message may go now; else the seconds to wait (into the next UTC
        day)."""
        if await self._take.submit(None, sending_domain(from_address)):
            return None
        now = self.clock.now_ms()
        return (DAY_MS - now % DAY_MS) / 1000 + random.uniform(1.0, SPREAD_S)

    def cap_today(self, from_address: str) -> str:
        """What the log says of paced mail."""
        return (f"paced: the warm-up's daily cap for {sending_domain(from_address)} is "
                "reached today (TIDINGS_EMAIL_WARMUP); it goes after midnight UTC")
