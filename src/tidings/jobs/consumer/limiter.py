"""Downstream limits in a consumer: a job whose handler declares limits (or whose key an
operator limited or paused) runs only once the store granted it a start of each rate and
a slot of each concurrency (`Store.acquire_limits`: shared by every node).

Waiting is not failing. A job refused for more than HOLD_HERE_MS goes back to its queue
(HELD_BACK) until its key should have room, its receive not counted and its job key given
back, so it takes no handler slot and other jobs, of keys with room, go past it: one hot
tenant does not stall the queue. The refusals of one key are spread over the times its
window frees starts, not sent back all at once. A refusal that ends sooner waits here.
A handler raising `RetryAfter` pauses its keys on every node and goes back the same way.
When a key's limit changes or its pause ends (`LimitBook.on_change`), the jobs this node
held back under it come back at once, to be measured against the new setting.

Claims are made for at most as many jobs as there are free handler slots, so a start
granted is a start made at once (a rate counts starts, not jobs waiting here)."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import random
from collections import deque
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, NamedTuple

from tidings.clock import Clock
from tidings.errors import TidingsError
from tidings.jobs.batches import Jobs
from tidings.jobs.consumer.work import JobState, Ledger, ServedQueue, Work
from tidings.limits.book import LimitBook, covers
from tidings.model.limits import RetryAfter
from tidings.runtime import metrics
from tidings.runtime.bridge import Bridge
from tidings.store.contract.limits import KeyRule, LimitAnswer, LimitClaim

log = logging.getLogger("tidings.limits")

#: A refusal that ends within this waits here; a longer one goes back to the queue.
HOLD_HERE_MS = 100
#: How often the node's gauge of slots in use is read from the store.
GAUGE_S = 1.0


class Waiting(NamedTuple):
    """A job this node held back: until when, and the spent receipt that finds it."""

    until: int
    queue_id: int
    row_id: int
    lease_token: int


def holder(work: Work) -> str:
    """Who holds a slot: this receive of this message (a fresh lease token each)."""
    return f"{work.held.message.message_id}.{work.held.receipt.lease_token}"


class Limiter:
    """`run_ready(works)`: the runner's admission; `free_slots()`: its free handler
    slots."""

    def __init__(self, ledger: Ledger, jobs: Jobs, bridge: Bridge, book: LimitBook,
                 clock: Clock, *, run_ready: Callable[[Iterable[Work]], None],
                 free_slots: Callable[[], int],
                 count_held_back: Callable[[int], None] = lambda n: None) -> None:
        self.ledger = ledger
        self.jobs = jobs
        self.bridge = bridge
        self.book = book
        self.clock = clock
        self.run_ready = run_ready
        self.free_slots = free_slots
        self.count_held_back = count_held_back
        self.pending: deque[Work] = deque()  # LIMITED, in the order they came
        self._later: list[tuple[int, int, Work]] = []  # LIMITED: (retry at, seq, work)
        self._seq = itertools.count()
        #: Keys refused in this process: key → (until, refusals since, its rule), so the
        #: rest of a backlog goes back without a store call, spread over the window.
        self._refused: dict[str, tuple[int, int, KeyRule]] = {}
        self._waiting: dict[str, dict[str, Waiting]] = {}  # key → message id → job
        self.kick = asyncio.Event()
        self._to_release: list[tuple[str, str]] = []
        self._tasks: set[asyncio.Future[None]] = set()

    # jobs whose key is reserved ----------------------------------------------------------

    def admit(self, works: Iterable[Work]) -> None:
        plain: list[Work] = []
        limited: list[Work] = []
        book = self.book
        for work in works:
            job = work.job
            assert job is not None
            bound = work.queue.registrations[job.type].limits
            rules: list[KeyRule] = []
            for limit in bound:
                key = limit.key(job)
                if key is not None and (rule := book.rule(key, limit.name)) is not None:
                    rules.append(rule)
            if rules:
                work.rules = tuple(rules)
                limited.append(work)
            else:
                plain.append(work)
        if plain:
            self.run_ready(plain)
        if limited:
            self.ledger.move_all(limited, JobState.LIMITED)
            self.pending.extend(limited)
            self.kick.set()

    def slot_freed(self) -> None:
        if self.pending:
            self.kick.set()

    def finished(self, works: Iterable[Work]) -> None:
        """Handlers returned: their concurrency slots go back now, not after their
        acknowledgement's group commit, in the transaction that claims room for the next
        jobs (a slot held a few ms longer per job is a few per cent of a concurrency
        limit's throughput). A slot not given back runs out with its lease."""
        for work in works:
            if work.slots:
                self._to_release.extend(work.slots)
                work.slots = ()
        if self._to_release:
            self.kick.set()

    async def _release(self) -> None:
        """Slots to give back while no job waits to claim: on their own."""
        batch, self._to_release = self._to_release, []
        try:
            await self.bridge.run(self.jobs.release_slots, batch)
        except TidingsError as exc:
            log.warning("could not give back %d limit slots (they run out with their "
                        "lease): %s", len(batch), exc)

    # the loop ------------------------------------------------------------------------

    async def run(self, stopping: asyncio.Event) -> None:
        gauge_at = 0.0
        loop = asyncio.get_running_loop()
        while not stopping.is_set():
            now = self.clock.now_ms()
            timeout = GAUGE_S
            if self._later:
                timeout = min(timeout, max(self._later[0][0] - now, 0) / 1000)
            if not self.kick.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await self.kick.wait()
            self.kick.clear()
            if stopping.is_set():
                return
            now = self.clock.now_ms()
            while self._later and self._later[0][0] <= now:
                self.pending.appendleft(heapq.heappop(self._later)[2])
            try:
                await self._claim_pending()
                if self._to_release:
                    await self._release()
            except TidingsError as exc:
                log.warning("cannot take limits (jobs wait and try again): %s", exc)
                await asyncio.sleep(0.1)
                self.kick.set()
            if loop.time() >= gauge_at:
                gauge_at = loop.time() + GAUGE_S
                await self._gauges()

    async def _claim_pending(self) -> None:
        while self.pending:
            now = self.clock.now_ms()
            free = self.free_slots()
            batch: list[Work] = []
            back: list[tuple[Work, int]] = []
            pending = self.pending
            for _ in range(len(pending)):
                work = pending.popleft()
                until = self._known_refusal(work, now)
                if until:
                    back.append((work, until))
                elif len(batch) < free:
                    batch.append(work)
                else:
                    pending.append(work)
            if back:
                await self._hold_back(back)
            if not batch:
                return  # no free slot: a finished job kicks the loop
            claims = [LimitClaim(holder(w), w.rules, self.jobs.lease_until(w.queue.record))
                      for w in batch]
            release, self._to_release = self._to_release, []
            try:
                answers = await self.bridge.run(self.jobs.store.acquire_limits, claims, now,
                                                release)
            except TidingsError:
                pending.extendleft(reversed(batch))
                self._to_release.extend(release)
                raise
            self._answered(batch, answers, now)

    def _answered(self, batch: list[Work], answers: list[LimitAnswer], now: int) -> None:
        granted: list[Work] = []
        back: list[tuple[Work, int]] = []
        for work, answer in zip(batch, answers, strict=True):
            if answer.granted:
                h = holder(work)
                work.slots = tuple((r.key, h) for r in work.rules if r.concurrency)
                granted.append(work)
                continue
            if len(work.rules) == 1:
                rule = work.rules[0]
                self._refused[rule.key] = (answer.retry_at, 0, rule)
            if answer.retry_at - now <= HOLD_HERE_MS and not answer.paused:
                heapq.heappush(self._later, (answer.retry_at, next(self._seq), work))
            else:
                back.append((work, answer.retry_at))
        if granted:
            self.ledger.move_all(granted, JobState.READY)
            self.run_ready(granted)
        if back:
            self._spawn(self._hold_back(back))

    def _known_refusal(self, work: Work, now: int) -> int:
        """When a job of a key refused here lately should look again (0: ask the store),
        each one more a rate step later than the one before."""
        until = 0
        for rule in work.rules:
            known = self._refused.get(rule.key)
            if known is None:
                continue
            at, count, seen = known
            if at - now <= HOLD_HERE_MS:
                del self._refused[rule.key]
                continue
            step = (seen.rate.period_ms // seen.rate.count if seen.rate
                    else 10 * (1 + count // max(seen.concurrency or 1, 1)))
            self._refused[rule.key] = (at, count + 1, seen)
            until = max(until, at + (count + 1) * step)
        return until

    # going back to the queue -----------------------------------------------------------

    async def _hold_back(self, items: list[tuple[Work, int]],
                         error: str | None = None) -> None:
        works = [w for w, _ in items]
        limited = [w for w in works if w.state is JobState.LIMITED]
        if limited:
            self.ledger.move_all(limited, JobState.HELD_BACK)
        by_queue: dict[ServedQueue, list[tuple[Work, int]]] = {}
        for work, until in items:
            by_queue.setdefault(work.queue, []).append((work, until + random.randint(0, 5)))
        for queue, group in by_queue.items():
            try:
                await self.bridge.run(self.jobs.hold_back, queue.record.id, [
                    (w.held, w.key, until, error) for w, until in group],
                    [s for w, _ in group for s in w.slots])
            except TidingsError as exc:
                log.warning("could not hold back %d jobs on %s (they come back after their "
                            "visibility timeout): %s", len(group), queue.name, exc)
            for work, until in group:
                for rule in work.rules:
                    receipt = work.held.receipt
                    self._waiting.setdefault(rule.key, {})[work.held.message.message_id] = (
                        Waiting(until, queue.record.id, receipt.row_id, receipt.lease_token))
        self.ledger.move_all(works, JobState.GONE)
        self.count_held_back(len(works))

    def retry_after(self, work: Work, exc: RetryAfter) -> None:
        """The handler said the downstream pushed back (STARTED): pause its keys on every
        node, and send the job back until then without burning an attempt."""
        now = self.clock.now_ms()
        until = now + int(exc.seconds * 1000)
        keys = ([exc.key] if exc.key else [r.key for r in work.rules]) if exc.pause else []
        for key in keys:
            self.book.paused(key, until)
            rule = next((r for r in work.rules if r.key == key), KeyRule(key, None, None, None))
            self._refused[key] = (until, 0, rule)
        log.info("job %s on %s: the downstream asked to wait %.3g s%s", work.key,
                 work.queue.name, exc.seconds, f" (keys {', '.join(keys)} paused)" if keys
                 else "")
        self.ledger.move(work, JobState.HELD_BACK)
        self._spawn(self._pause_and_hold_back(keys, work, until))

    async def _pause_and_hold_back(self, keys: list[str], work: Work, until: int) -> None:
        try:
            for key in keys:
                await self.bridge.run(self.jobs.store.pause_limit, key, until, extend=True)
        except TidingsError as exc:
            log.warning("could not pause %s: %s", ", ".join(keys), exc)
        await self._hold_back([(work, until)], f"RetryAfter: {(until - self.clock.now_ms())} ms")

    def limits_changed(self, names: set[str]) -> None:
        """Keys whose setting changed or whose pause ended: what was learnt of their
        refusals is forgotten, and the jobs held back under them come back now."""
        for key in [k for k in self._refused if covers(names, k)]:
            del self._refused[key]
        now = self.clock.now_ms()
        wake: dict[int, dict[str, Waiting]] = {}
        for key in [k for k in self._waiting if covers(names, k)]:
            for message_id, waiting in self._waiting.pop(key).items():
                if waiting.until > now:
                    wake.setdefault(waiting.queue_id, {})[message_id] = waiting
        if wake:
            self._spawn(self._wake(wake, now))

    async def _wake(self, wake: dict[int, dict[str, Waiting]], now: int) -> None:
        for queue_id, waiting in wake.items():
            try:
                await self.bridge.run(self.jobs.store.wake_held_back, queue_id, [
                    (w.row_id, w.lease_token) for w in waiting.values()], now)
            except TidingsError as exc:
                log.warning("could not bring back %d held-back jobs (they come back at "
                            "their time): %s", len(waiting), exc)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def flushed(self) -> None:
        """Every hold-back started is written and every slot given back (shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        if self._to_release:
            await self._release()

    def take_back(self) -> list[Work]:
        """Shutdown: every job still waiting for its limits, to be given back."""
        works = [*self.pending, *(w for _, _, w in self._later)]
        self.pending.clear()
        self._later.clear()
        return works

    async def _gauges(self) -> None:
        now = self.clock.now_ms()
        for key, waits in list(self._waiting.items()):
            for message_id in [m for m, w in waits.items() if w.until <= now]:
                del waits[message_id]
            metrics.LIMIT_WAITING.labels(key).set(len(waits))
            if not waits:
                del self._waiting[key]
        try:
            slots, _ = await self.bridge.run(self.jobs.store.limit_usage, now, now)
        except TidingsError:
            return
        keys = {r.key for w in self.ledger.held for r in w.rules} | set(slots)
        for key in keys:
            metrics.LIMIT_IN_USE.labels(key).set(slots.get(key, 0))
