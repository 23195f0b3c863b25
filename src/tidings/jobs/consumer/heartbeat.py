"""The heartbeat: every held message (running, buffered or waiting) gets a fresh
visibility timeout, and its job key a fresh lease, once EXTEND_AFTER of the current one
has passed (the rest is the margin for a late heartbeat on a busy machine)."""

from __future__ import annotations

import asyncio
import logging
import time

from tidings.errors import TidingsError
from tidings.jobs.batches import Jobs
from tidings.jobs.consumer.work import HOLDS_KEY, Ledger, ServedQueue, Work
from tidings.runtime.bridge import Bridge

log = logging.getLogger("tidings.consumers")

EXTEND_AFTER = 1 / 3  # of the visibility timeout
BEAT_S = 0.25


def extend_at(queue: ServedQueue, now: float) -> float:
    """When the heartbeat must renew a lease taken (or renewed) at `now` (monotonic)."""
    return now + queue.visibility_s * EXTEND_AFTER


class LeaseHeartbeat:
    def __init__(self, ledger: Ledger, jobs: Jobs, bridge: Bridge) -> None:
        self.ledger = ledger
        self.jobs = jobs
        self.bridge = bridge

    async def run(self) -> None:
        """Until cancelled; asleep while nothing is held (an idle node wakes for nothing)."""
        while True:
            await self.ledger.holding.wait()
            await asyncio.sleep(BEAT_S)
            await self.beat(time.monotonic())

    async def beat(self, now: float) -> None:
        due: dict[ServedQueue, list[Work]] = {}
        for work in list(self.ledger.held):
            if work.queue.visibility_s > 1 and work.extend_at <= now:
                due.setdefault(work.queue, []).append(work)
        for queue, items in due.items():
            try:
                await self.bridge.run(self.jobs.extend, queue.record, [
                    (w.held, w.key if w.state in HOLDS_KEY else None) for w in items],
                    [s for w in items for s in w.slots])
            except TidingsError as exc:
                log.warning("heartbeat of %d jobs on %s failed: %s", len(items),
                            queue.name, exc)
                continue
            renewed = extend_at(queue, time.monotonic())
            for w in items:
                w.extend_at = renewed
