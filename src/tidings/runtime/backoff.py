"""Back off while the database is unreachable, then carry on: a restart of PostgreSQL
pauses a node's loops instead of killing the node. Given a `Health`, a backoff also says
that its loop is failing, and why, until the next `reset` (its next success)."""

from __future__ import annotations

import asyncio
import logging
import random
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tidings.runtime.health import Health


class Backoff:
    def __init__(self, first_s: float = 0.2, max_s: float = 10.0, *,
                 health: Health | None = None, component: str | None = None) -> None:
        self.first_s = first_s
        self.max_s = max_s
        self._next = first_s
        self.health = health
        self.component = component
        self._failing: str | None = None  # the component reported failing

    def reset(self) -> None:
        self._next = self.first_s
        if self._failing is not None and self.health is not None:  # (one test when well)
            self.health.recovered(self._failing)
            self._failing = None

    async def wait(self, log: logging.Logger, who: str, exc: BaseException,
                   stopping: asyncio.Event) -> None:
        delay = self._next * random.uniform(0.8, 1.2)
        log.warning("%s: %s; retrying in %.1f s", who, exc, delay)
        if self.health is not None:
            self._failing = self.component or who
            self.health.failing(self._failing, str(exc))
        self._next = min(self._next * 2, self.max_s)
        try:
            await asyncio.wait_for(stopping.wait(), delay)
        except TimeoutError:
            pass
