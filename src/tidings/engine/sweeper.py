"""Periodic maintenance: retention expiry, idempotency-record expiry, message move tasks."""

from __future__ import annotations

import asyncio
import logging
import time

from tidings.engine import metrics
from tidings.engine.backoff import Backoff
from tidings.engine.bridge import Bridge
from tidings.engine.internal_queues import EMAIL_QUEUE, backlog
from tidings.engine.queues import QueueService
from tidings.errors import StoreUnavailable

log = logging.getLogger("tidings.sweeper")


class Sweeper:
    def __init__(self, queues: QueueService, bridge: Bridge, *, interval_s: float,
                 job_memory_s: int) -> None:
        self.queues = queues
        self.bridge = bridge
        self.interval_s = interval_s
        self.job_memory_s = job_memory_s
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        last = time.monotonic()
        backoff = Backoff()
        while not self._stopping.is_set():
            now = time.monotonic()
            try:
                expired = await self.bridge.run(self.queues._sweep, self.job_memory_s)
                metrics.EMAIL_WAITING.set(await self.bridge.run(backlog, self.queues,
                                                                EMAIL_QUEUE))
                moved = await self.bridge.run(self.queues._advance_move_tasks, now - last)
                backoff.reset()
            except StoreUnavailable as exc:
                await backoff.wait(log, "sweeper", exc, self._stopping)
                continue
            last = now
            if expired or moved:
                log.info("sweep: %d messages expired, %d moved by move tasks", expired, moved)
            # Move tasks advance at their rate once a second; the rest runs at the interval.
            try:
                await asyncio.wait_for(self._stopping.wait(), min(self.interval_s, 1.0))
            except TimeoutError:
                pass

    def stop(self) -> None:
        self._stopping.set()
