"""A token bucket: the pace of a relay (`TIDINGS_SMTP_MAX_RATE`) or of a recipient domain
(`TIDINGS_SMTP_DOMAIN_RATES`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


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
