"""Once per identity: a job's key is reserved before its handler runs. A duplicate of a
key that runs (here or on another node) waits for that run, its lease kept alive by the
heartbeat, and then tries the key again; a duplicate of a key that ran to success is
acknowledged without running, logged, counted, and told to `App.on_duplicate`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable

from tidings.errors import StoreUnavailable, TidingsError
from tidings.jobs.batches import Jobs
from tidings.jobs.consumer.work import JobState, Ledger, ServedQueue, Work
from tidings.jobs.handlers import Handlers
from tidings.runtime import metrics
from tidings.runtime.bridge import Bridge
from tidings.runtime.waits import first_of
from tidings.store.base import Reservation

log = logging.getLogger("tidings.consumers")

#: How often a waiting duplicate looks whether the job it waits for finished elsewhere.
WAIT_RECHECK_S = 0.5


class JobKeys:
    """`admit(works)`: what to do with jobs whose key is now ours (READY): run them."""

    def __init__(self, ledger: Ledger, jobs: Jobs, bridge: Bridge, app: Handlers,
                 admit: Callable[[Iterable[Work]], None]) -> None:
        self.ledger = ledger
        self.jobs = jobs
        self.bridge = bridge
        self.app = app
        self.admit = admit

    def wait(self, queue: ServedQueue, key: str, work: Work) -> None:
        """A duplicate of `key` waits for the run that holds it."""
        self.ledger.move(work, JobState.WAITING)
        queue.waiting.setdefault(key, []).append(work)

    async def reserve(self, queue: ServedQueue, items: list[tuple[str, Work]]) -> None:
        """Reserve distinct keys of jobs RESERVING: ours run, those done elsewhere are
        dropped as duplicates, those running elsewhere wait."""
        try:
            answers = await self.bridge.run(self.jobs.reserve, queue.record,
                                            [(key, w.held) for key, w in items])
        except StoreUnavailable as exc:
            log.warning("cannot reserve jobs on %s (%s); they come back after their "
                        "visibility timeout", queue.name, exc)
            self.ledger.move_all([w for _, w in items], JobState.GONE)
            return
        ready, duplicates = [], []
        for (key, work), answer in zip(items, answers, strict=True):
            if answer is Reservation.RESERVED:
                ready.append(work)
            elif answer is Reservation.DONE:
                duplicates.append(work)
            else:
                self.wait(queue, key, work)
        if ready:
            self.ledger.move_all(ready, JobState.READY)
            self.admit(ready)
        if duplicates:
            self.ledger.move_all(duplicates, JobState.DUPLICATE)
            await self._drop_duplicates(queue, duplicates)

    async def _drop_duplicates(self, queue: ServedQueue, works: list[Work]) -> None:
        for w in works:
            log.warning("job %s on %s already ran to success; acknowledging its duplicate "
                        "(message %s) without running it", w.key, queue.name,
                        w.held.message.message_id)
        metrics.JOBS.labels("duplicate").inc(len(works))
        try:
            await self.bridge.run(self.jobs.acknowledge, queue.record.id,
                                  [w.held for w in works])
        except TidingsError as exc:
            log.warning("acknowledging duplicates on %s failed: %s", queue.name, exc)
        self.ledger.move_all(works, JobState.GONE)
        if self.app.on_duplicate is not None:
            try:
                await self.app.on_duplicate([w.job for w in works if w.job is not None])
            except Exception:  # noqa: BLE001 - a record of the drop; the drop stands
                log.exception("recording duplicates on %s failed", queue.name)

    # duplicates waiting ----------------------------------------------------------------

    async def run(self, queues: list[ServedQueue], stopping: asyncio.Event) -> None:
        """Duplicates try again: at once when our run of their key ended (the ledger
        tells), and every WAIT_RECHECK_S for keys another node runs. Ends at a stop (set
        `ledger.key_released` to wake it), never mid-reservation."""
        ledger = self.ledger
        recheck_at = time.monotonic() + WAIT_RECHECK_S
        while not stopping.is_set():
            if not ledger.held:  # no duplicate waits (a waiting one is held): sleep
                await first_of(ledger.holding.wait(), stopping.wait())
                recheck_at = time.monotonic() + WAIT_RECHECK_S
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(recheck_at - time.monotonic(), 0)):
                    await ledger.key_released.wait()
            ledger.key_released.clear()
            if stopping.is_set():
                return
            released, ledger.released = ledger.released, []
            if released:
                await self._settle(released)
            if time.monotonic() >= recheck_at:
                await self._recheck(queues)
                recheck_at = time.monotonic() + WAIT_RECHECK_S

    async def _settle(self, released: list[tuple[ServedQueue, str]]) -> None:
        """Our runs of these keys ended: the first duplicate waiting for each tries the
        key now (done: acknowledged; given back after a failure: it runs); the others
        wait on."""
        by_queue: dict[ServedQueue, list[tuple[str, Work]]] = {}
        for queue, key in released:
            if key not in queue.keys and (first := self._first_waiting(queue, key)):
                by_queue.setdefault(queue, []).append((key, first))
        for queue, items in by_queue.items():
            await self.reserve(queue, items)

    async def _recheck(self, queues: list[ServedQueue]) -> None:
        """Duplicates of jobs another node runs: look again, a batch per queue."""
        for queue in queues:
            items = [(key, first) for key in list(queue.waiting) if key not in queue.keys
                     if (first := self._first_waiting(queue, key))]
            if items:
                await self.reserve(queue, items)

    def _first_waiting(self, queue: ServedQueue, key: str) -> Work | None:
        waiting = queue.waiting.get(key)
        if not waiting:
            return None
        first = waiting.pop(0)
        if not waiting:
            del queue.waiting[key]
        self.ledger.move(first, JobState.RESERVING)
        return first

    @staticmethod
    def give_up_waiting(queues: list[ServedQueue]) -> list[Work]:
        """Shutdown: every waiting duplicate, to be given back."""
        works = [w for q in queues for ws in q.waiting.values() for w in ws]
        for queue in queues:
            queue.waiting.clear()
        return works
