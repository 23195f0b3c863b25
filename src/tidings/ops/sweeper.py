"""Periodic maintenance: retention expiry, idempotency-record expiry, message move tasks,
the firing history's trim, and reclaiming deleted rows' space where the database does not
(`Store.reclaim_space`).

A sweep runs every `interval_s` (TIDINGS_SWEEP_INTERVAL_S), and once a second while a move
task moves messages (they advance at their rate); a move task started by this process, or
by any process of its SQLite file, wakes it (`MOVES_CHANNEL`; on PostgreSQL one started on
another node starts at that node's sweep, or this one's). A sweep that finds nothing to do
doubles the wait for the next, up to `IDLE_STRETCH` intervals (30 s by default): an idle
PostgreSQL node spent a third of its statements on sweeps that found nothing, and nothing
waits on a sweep (a receive already skips messages past their retention, a job id is
remembered for hours). The first sweep that finds work brings the interval back."""

from __future__ import annotations

import asyncio
import logging
import time

from tidings.errors import StoreUnavailable
from tidings.notify.base import MOVES_CHANNEL
from tidings.queues.service import QueueService
from tidings.runtime.backoff import Backoff
from tidings.runtime.bridge import Bridge
from tidings.runtime.health import Health
from tidings.runtime.waits import first_of
from tidings.schedules.firing_log import TRIM_LIMIT, TRIM_STEP, FiringLog

log = logging.getLogger("tidings.sweeper")

#: How often the sweeper makes deleted rows' space reusable when the database does not do
#: it by itself (PostgreSQL with autovacuum off): a soak at 4,000 rows/s stays bounded.
RECLAIM_EVERY_S = 30.0
#: Expired messages and forgotten job ids per transaction: 1,000 expired messages hold
#: SQLite's writer ~5 ms of CPU, 5,000 (one pass's worth before) ~26 ms, which every
#: firing and send in the meantime waited out.
EXPIRE_STEP = 1_000
#: Transactions of expiry per pass at most (passes come a second apart while there is
#: more: 10,000 messages/s).
EXPIRE_STEPS = 10
#: How often move tasks advance while they run.
MOVE_TICK_S = 1.0
#: How often the starts and slots of limit keys gone quiet are deleted: an acquisition
#: already expires its own key's, and what is left counts for nothing (every count reads
#: only what is inside its window or lease), so this only keeps the tables small; a sweep
#: every interval cost an idle node 4 statements every 5 s for nothing.
FORGET_LIMIT_ROWS_EVERY_S = 60.0
#: The longest wait after sweeps that found nothing, in intervals.
IDLE_STRETCH = 6


class SweepPace:
    """How long a sweeper rests after a pass (module docstring): a second while a move
    task runs or expiry has a backlog, the interval after a pass that did something, and
    twice the last rest after one that did nothing, up to `IDLE_STRETCH` intervals."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._idle = interval_s

    def after(self, *, worked: bool, more: bool) -> float:
        if worked:
            self._idle = self.interval_s
        else:
            self._idle = min(self._idle * 2, self.interval_s * IDLE_STRETCH)
        return min(self.interval_s, MOVE_TICK_S) if more else self._idle


class Sweeper:
    def __init__(self, queues: QueueService, bridge: Bridge, *, interval_s: float,
                 job_memory_s: int, firings: FiringLog | None = None,
                 health: Health | None = None) -> None:
        self.queues = queues
        self.health = health
        self.bridge = bridge
        self.interval_s = interval_s
        self.job_memory_s = job_memory_s
        self.firings = firings
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        last = time.monotonic()
        reclaim_at = last + RECLAIM_EVERY_S
        forget_limits_at = last
        warned = False
        moved = 0
        pace = SweepPace(self.interval_s)
        backoff = Backoff(health=self.health, component="sweeper")
        notifier = self.queues.notifier
        while not self._stopping.is_set():
            seen = notifier.version(MOVES_CHANNEL)
            now = time.monotonic()
            # A task's first step after a rest moves one second's worth, not a rest's.
            elapsed = now - last if moved else min(now - last, MOVE_TICK_S)
            try:
                expired, forgotten, more = await self._expire()
                if now >= forget_limits_at:
                    forget_limits_at = now + FORGET_LIMIT_ROWS_EVERY_S
                    await self.bridge.run(self._forget_limit_rows)
                moved = await self.bridge.run(self.queues.ops.advance_move_tasks, elapsed)
                trimmed = 0
                if self.firings is not None:
                    trimmed, trim_more = await self._trim_firings(self.firings)
                    more = more or trim_more
                if now >= reclaim_at:
                    reclaim_at = now + RECLAIM_EVERY_S
                    if await self._reclaim() and not warned:
                        warned = True
                        log.warning("PostgreSQL autovacuum is off: tidings vacuums its busiest"
                                    " tables itself every %g s; turn autovacuum on",
                                    RECLAIM_EVERY_S)
                backoff.reset()
            except StoreUnavailable as exc:
                await backoff.wait(log, "sweeper", exc, self._stopping)
                continue
            last = now
            if expired or moved:
                log.info("sweep: %d messages expired, %d moved by move tasks", expired, moved)
            # Move tasks advance at their rate once a second (a task that moved nothing
            # has ended), and a backlog of expiry goes on a second later (SweepPace).
            pause = pace.after(worked=bool(expired or forgotten or moved or trimmed),
                               more=bool(moved or more))
            await first_of(notifier.wait(MOVES_CHANNEL, seen, pause), self._stopping.wait())

    async def _expire(self) -> tuple[int, int, bool]:
        """Messages past retention and job ids past their memory, `EXPIRE_STEP` rows per
        transaction, so the writer is free between two of them: (messages expired, job ids
        forgotten, whether more may be left)."""
        expired = forgotten = 0
        for _ in range(EXPIRE_STEPS):
            if self._stopping.is_set():
                break
            n, f = await self.bridge.run(self._expire_step)
            expired, forgotten = expired + n, forgotten + f
            if n < EXPIRE_STEP and f < EXPIRE_STEP:
                return expired, forgotten, False
        return expired, forgotten, True

    def _expire_step(self) -> tuple[int, int]:
        store, now = self.queues.store, self.queues.clock.now_ms()
        return (store.expire_messages(now, EXPIRE_STEP),
                store.forget_jobs(now - self.job_memory_s * 1000, EXPIRE_STEP))

    def _forget_limit_rows(self) -> None:
        """Downstream limits: starts older than the longest rate's window (a tenant that
        went quiet leaves its last window's starts behind) and slots whose lease ran out."""
        store, now = self.queues.store, self.queues.clock.now_ms()
        longest = max((s.rate.period_ms for s in store.limit_settings() if s.rate), default=0)
        store.forget_limit_rows(now - longest, now)

    async def _trim_firings(self, firings: FiringLog) -> tuple[int, bool]:
        """The history's old rows, `TRIM_STEP` per transaction: between two of them the
        dispatcher and the senders get the (SQLite: only) writer. (Rows trimmed, whether
        more may be left.)"""
        done = 0
        while done < TRIM_LIMIT and not self._stopping.is_set():
            n = await self.bridge.run(firings.trim)
            done += n
            if n < TRIM_STEP:
                return done, False
        return done, True

    async def _reclaim(self) -> bool:
        """Maintenance that must not stop the node: a refused VACUUM (say, a role that
        does not own the tables) is logged, and tried again next time."""
        try:
            return await self.bridge.run(self.queues.store.reclaim_space)
        except StoreUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001
            log.error("could not reclaim the space of deleted rows: %s", exc)
            return False

    def stop(self) -> None:
        self._stopping.set()
