"""Back off while the database is unreachable, then carry on: a restart of PostgreSQL
pauses a node's loops instead of killing the node."""

from __future__ import annotations

import asyncio
import logging
import random


class Backoff:
    def __init__(self, first_s: float = 0.2, max_s: float = 10.0) -> None:
        self.first_s = first_s
        self.max_s = max_s
        self._next = first_s

    def reset(self) -> None:
        self._next = self.first_s

    async def wait(self, log: logging.Logger, who: str, exc: BaseException,
                   stopping: asyncio.Event) -> None:
        delay = self._next * random.uniform(0.8, 1.2)
        log.warning("%s: %s; retrying in %.1f s", who, exc, delay)
        self._next = min(self._next * 2, self.max_s)
        try:
            await asyncio.wait_for(stopping.wait(), delay)
        except TimeoutError:
            pass
