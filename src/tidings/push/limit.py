"""A subscription's downstream limit: the limit key `push:<queue>` (`tidings.limits`),
shared by every node as every limit is.

- A 429 or 503 with Retry-After pauses the key until then (`pause_limit`, extend: a later
  pause stands), here at once and on the other nodes at their next read; the message
  goes back uncounted: the endpoint asked for time, no attempt was spent. `tidings limit
  resume push:<queue>` (or resuming the subscription) lifts it; a pause of the name
  `push` holds every subscription back.
- A limit set on the key (`tidings limit set push:jobs --concurrency 5 --rate 50/s`)
  lowers the subscription's own concurrency and rate, never raises them: the concurrency
  through the shared slots (`push/slots.py`), so it holds across nodes.

The settings and pauses are read at most every `limits.book.REFRESH_S`, and only by a
pusher with work: an idle node reads nothing for them."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import NamedTuple

from tidings.clock import Clock
from tidings.errors import TidingsError
from tidings.limits.book import REFRESH_S, LimitBook
from tidings.model.push import Subscription
from tidings.runtime.bridge import Bridge
from tidings.store.base import Store

log = logging.getLogger("tidings.push")

#: The name of every subscription's limit key.
PUSH_LIMIT = "push"


def limit_key(queue: str) -> str:
    return f"{PUSH_LIMIT}:{queue}"


class Allowed(NamedTuple):
    """What a subscription may do now: its concurrency and rate (pushes a second, None:
    no rate), each the lower of its own and its limit's, and until when it is paused (0:
    not)."""

    concurrency: int
    rate_per_s: float | None
    paused_until: int


class PushLimits:
    """The node's copy of the limits, shared by its pushers."""

    def __init__(self, store: Store, clock: Clock, bridge: Bridge) -> None:
        self.book = LimitBook(store, clock, bridge)  # read here, on demand (not run)
        self.store = store
        self.bridge = bridge
        self._read_at = -REFRESH_S
        self._reading: asyncio.Future[None] | None = None

    def stale(self) -> None:
        """Read again before the next answer (a subscription changed: its resume may have
        lifted a pause)."""
        self._read_at = -REFRESH_S

    async def allowed(self, queue: str, sub: Subscription) -> Allowed:
        await self._fresh()
        book, key = self.book, limit_key(queue)
        paused = max(book.pauses.get(key, 0), book.pauses.get(PUSH_LIMIT, 0))
        setting = book.settings.get(key)
        concurrency, rate = sub.concurrency, sub.rate_per_s
        if setting is not None:
            if setting.concurrency is not None:
                concurrency = min(concurrency, setting.concurrency)
            if setting.rate is not None:
                per_s = setting.rate.count * 1000 / setting.rate.period_ms
                rate = per_s if rate is None else min(rate, per_s)
        return Allowed(concurrency, rate, paused if paused > book.clock.now_ms() else 0)

    async def pause(self, queue: str, until: int) -> None:
        """An endpoint's Retry-After: no push of the queue before `until`, on any node."""
        key = limit_key(queue)
        self.book.paused(key, until)
        try:
            await self.bridge.run(self.store.pause_limit, key, until, extend=True)
        except TidingsError as exc:
            log.warning("could not pause %s on the other nodes (this one waits): %s", key,
                        exc)

    async def _fresh(self) -> None:
        """One read for every pusher that asks while it is under way."""
        if time.monotonic() - self._read_at < REFRESH_S:
            return
        if self._reading is None:
            self._reading = asyncio.ensure_future(self._read())
        reading = self._reading
        await asyncio.shield(reading)

    async def _read(self) -> None:
        try:
            await self.bridge.run(self.book.refresh)
        except TidingsError as exc:
            log.warning("cannot read the push limits (the last ones read stand): %s", exc)
        finally:
            self._read_at = time.monotonic()
            self._reading = None
