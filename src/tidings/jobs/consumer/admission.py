"""How many messages a consumer may hold: `concurrency` handler slots plus a prefetch
buffer, whose size follows the handlers' pace. A poller receives once there is room (half
the buffer, unless nothing is left to run), so receives come in batches."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from tidings.jobs.batches import MAX_BATCH
from tidings.jobs.consumer.work import Ledger

MAX_PREFETCH = 256
PACED_PREFETCH = 2 * MAX_BATCH
PREFETCH_WINDOW_S = 0.1
#: How often the prefetch is sized anew.
PACE_S = 0.25


class Pace(Protocol):
    """What the prefetch is sized by: the runner."""

    handled: int  # handlers that returned so far
    failed: int  # handlers that raised so far
    held_back: int  # jobs a limit sent back to their queue so far (they pass quickly too)

    def unstarted(self) -> int:
        """Jobs held ready that no handler has begun."""
        ...


class Admission:
    """`prefetch`: the app's fixed buffer, or None to follow the pace."""

    def __init__(self, ledger: Ledger, pace: Pace, *, concurrency: int,
                 prefetch: int | None) -> None:
        self.ledger = ledger
        self.pace = pace
        self.concurrency = concurrency
        self.paced = prefetch is None
        self.floor = self.default_prefetch(concurrency, prefetch)
        self.capacity = concurrency + self.floor
        #: The last receive was full: the queue may hold more.
        self.backlog = False

    @staticmethod
    def default_prefetch(concurrency: int, prefetch: int | None) -> int:
        """The app's, else Celery's default (4 × concurrency): batches big enough that a
        queue of short jobs runs at the store's speed, small enough to share a queue
        fairly. Capped: beyond a few hundred held messages (high concurrency, e.g. email
        deliveries) the batches are no faster, and each held message costs memory. The
        paced prefetch grows from it (`size_prefetch`)."""
        return prefetch if prefetch is not None else min(4 * concurrency, MAX_PREFETCH)

    @property
    def prefetch(self) -> int:
        """The buffer now, beyond the handler slots."""
        return self.capacity - self.concurrency

    def room(self) -> int:
        """How many messages the next receive may take. Jobs whose handler returned wait
        for a group commit: they leave room for the next batch (held still, for their
        heartbeat, until it is written)."""
        return self.capacity - len(self.ledger.held) + self.ledger.finished

    def must_wait(self, room: int) -> bool:
        """Receive in batches: wait for half the room unless nothing is left to run. (A
        batch whose keys are being reserved is not counted as unstarted: the next
        receive goes out meanwhile.)"""
        return room <= 0 or (room < self.capacity // 2 and self.pace.unstarted() > 0)

    async def wait_for_room(self) -> None:
        freed = self.ledger.freed
        freed.clear()
        await freed.wait()

    def received(self, got: int, asked: int) -> None:
        self.backlog = got >= min(asked, MAX_BATCH)

    def lingering(self) -> bool:
        """Short jobs, more about to return: worth a few ms for a bigger group commit."""
        return self.ledger.running > 0 and self.prefetch >= MAX_BATCH

    async def run(self) -> None:
        """Sizes the prefetch every PACE_S by the handlers' pace."""
        pace = self.pace
        ran, then = pace.handled + pace.failed + pace.held_back, time.monotonic()
        while True:
            if not self.ledger.held and not self.backlog and self.prefetch == self.floor:
                # Idle, and the prefetch shrunk back to its floor: each tick would change
                # nothing until a receive holds a job again.
                await self.ledger.holding.wait()
                then = time.monotonic()
            await asyncio.sleep(PACE_S)
            now = time.monotonic()
            done = pace.handled + pace.failed + pace.held_back
            self.size_prefetch(done - ran, now - then)
            ran, then = done, now

    def size_prefetch(self, ran: int, seconds: float) -> None:
        """The default prefetch follows the handlers' pace: what they finish in
        PREFETCH_WINDOW_S, at least 4 × concurrency, at most PACED_PREFETCH. Slow jobs keep
        a small buffer (a job waiting here is one another node could have run); a stream
        of short jobs is received and acknowledged in batches big enough that each
        transaction's fixed cost (a WAL flush on PostgreSQL) is shared by hundreds of jobs.
        The poller receives once half the room is free, so twice the largest receive
        (MAX_BATCH) keeps each receive full."""
        if not self.paced or seconds <= 0:
            return
        pace = min(int(ran / seconds * PREFETCH_WINDOW_S), PACED_PREFETCH)
        # Grows at once, shrinks gently: one slow quarter-second (a stalled database, a
        # busy machine) does not halve the batches that follow.
        current = self.prefetch
        if self.backlog and not self.pace.unstarted():
            # The handlers ran out of work while the queue held more than the last receive
            # took: the store is the slow side (say, a firing burst sharing SQLite's one
            # writer), not the handlers. Each receive, reservation and acknowledgement
            # waits its turn there, so take more per turn: doubling (not following the
            # starved pace down) is what lets them catch up.
            grown = min(max(current * 2, pace), PACED_PREFETCH)
            self.capacity = self.concurrency + max(current, grown)
            return
        self.capacity = self.concurrency + max(self.floor, pace, current * 3 // 4)
