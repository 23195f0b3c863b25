"""Consumers: your handlers, run by tidings itself (no worker fleet), at queue speed.

One `Consumer` serves every queue an app (`Handlers`) handles. For each queue a poller receives as
many messages as there are free handler slots plus a prefetch buffer (sized by the
handlers' pace), in one transaction, and reserves their job keys in one more; handlers run
`concurrency` at once (sync ones on daemon threads, async ones on runner tasks of the
loop, each pulling ready jobs one at a time); finished jobs are acknowledged in group
commits (many messages' deletes and done records per transaction, gathered for at most a
few ms, each job only after its handler returned).

Guarantees (the README's "Jobs" paragraph says the same to users):
- *Once per identity*: a job key (`tidings.engine.app.Job.key`) is reserved before its
  handler runs and marked done in the transaction that deletes its message. A duplicate
  that arrives while the first runs waits for it (held, its lease extended) and is then
  acknowledged without running, as is one arriving after. Each drop is logged at WARNING
  and counted in `tidings_jobs_total{outcome="duplicate"}`.
- *Heartbeat*: every held message (running, buffered or waiting) gets a fresh visibility
  timeout, and its key a fresh lease, once a third of the current one has passed (the rest
  is the margin for a late heartbeat on a busy machine).
- *Retries*: a failure releases the key and makes the message visible again after an
  exponential backoff with jitter, its error recorded; after the queue's maxReceiveCount
  the next receive moves it to the dead-letter queue. A poison message (not a job, or a
  type no handler takes) goes to the DLQ at once with its reason (`App.poison`).
- *Shutdown*: stop receiving, give back what has not started, let running jobs finish up
  to the grace period; at the deadline, log each job still running, give it back and
  abandon it: it will not be acknowledged, and the process does not wait for it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, cast

from tidings.engine import metrics
from tidings.engine.app import Handlers, Job, PoisonMessage, Registration, parse_job
from tidings.engine.backoff import Backoff
from tidings.engine.bridge import Bridge
from tidings.engine.handler_threads import HandlerThreads
from tidings.engine.health import Health
from tidings.engine.jobs import MAX_BATCH, Failure, Held, Jobs
from tidings.engine.queues import QueueService
from tidings.errors import StoreUnavailable, TidingsError
from tidings.model.queues import QueueRecord
from tidings.notify.base import queue_channel
from tidings.store.base import Reservation

log = logging.getLogger("tidings.consumers")

#: How often a waiting duplicate looks whether the job it waits for finished elsewhere.
WAIT_RECHECK_S = 0.5
#: How long an empty receive waits before looking again (notifications wake it at once;
#: this only bounds a lost one).
POLL_S = 1.0


@dataclass(eq=False, slots=True)
class Work:
    """One held message on its way through the consumer."""

    queue: QueueState
    held: Held
    job: Job | None = None
    key: str | None = None  # the job key this consumer holds for it
    extend_at: float = 0.0  # monotonic: when the heartbeat must renew its lease
    started: float = 0.0
    begun: bool = False  # its handler was entered
    handler_done: bool = False
    skip: bool = False  # abandoned: never start it, never acknowledge it


@dataclass(eq=False)
class QueueState:
    name: str
    record: QueueRecord
    registrations: dict[str, Registration]
    keys: set[str] = field(default_factory=set)  # job keys this consumer holds here
    waiting: dict[str, list[Work]] = field(default_factory=dict)  # job key → duplicates
    to_ack: list[Work] = field(default_factory=list)
    to_fail: list[tuple[Work, str]] = field(default_factory=list)
    admitting: asyncio.Future[None] | None = None  # the last batch's reservation

    @property
    def visibility_s(self) -> int:
        return self.record.attributes.visibility_timeout_s


MAX_PREFETCH = 256
PACED_PREFETCH = 2 * MAX_BATCH
PREFETCH_WINDOW_S = 0.1
#: Group commits: with short jobs, an acknowledgement waits at most this long for others
#: to join it, unless FLUSH_BATCH are already waiting or no other handler is running.
FLUSH_LINGER_S = 0.002
FLUSH_BATCH = 128
EXTEND_AFTER = 1 / 3  # of the visibility timeout: when the heartbeat renews a lease


class Consumer:
    """Receives from every queue the app handles and runs its handlers."""

    def __init__(self, app: Handlers, queues: QueueService, bridge: Bridge, *, concurrency: int,
                 grace_s: float, health: Health | None = None) -> None:
        self.app = app
        self.health = health
        self.queues = queues
        self.jobs = Jobs(queues)
        self.bridge = bridge
        self.concurrency = app.concurrency or concurrency
        # Celery's default prefetch (4 × concurrency): batches big enough that a queue of
        # short jobs runs at the store's speed, small enough to share a queue fairly. Capped:
        # beyond a few hundred held messages (high concurrency, e.g. email deliveries) the
        # batches are no faster, and each held message costs memory.
        self.prefetch = (app.prefetch if app.prefetch is not None
                         else min(4 * self.concurrency, MAX_PREFETCH))
        self.capacity = self.concurrency + self.prefetch
        self.grace_s = grace_s
        self.threads = HandlerThreads(self.concurrency, self._handler_done,
                                      settled=self._start_ready)
        # Sync handlers run on `concurrency` threads and async ones on as many runner
        # tasks, each pulling one job at a time: when all handlers are of one kind, that
        # bounds how many run at once, and every held job can be handed over as soon as it
        # is ready (no hop back to the loop per job). A mixed app could run `concurrency`
        # of each kind, so there the loop counts.
        kinds = {r.is_async for r in app.handlers.values()}
        self._dispatch_limit = self.capacity if len(kinds) == 1 else self.concurrency
        self._async_ready: deque[tuple[Work, Registration]] = deque()
        self._runners = 0  # async runner tasks alive
        self._taken_back: list[Work] = []
        self._finished = 0  # held jobs whose handler returned, their outcome not yet written
        self._stopping = asyncio.Event()
        self._space = asyncio.Event()
        self._backlog = False  # the last receive was full: the queue may hold more
        self._idle = asyncio.Event()
        self._ready: deque[Work] = deque()
        self._held: set[Work] = set()
        self._tasks: set[asyncio.Future[Any]] = set()
        self._busy = 0  # handlers dispatched and not finished
        self._flusher: asyncio.Task[None] | None = None
        self._states: list[QueueState] = []
        self.handled = 0
        self.failed = 0

    # the loops -------------------------------------------------------------------------

    async def run(self) -> None:
        if self.app.create_queues:
            from tidings.engine.declare import declare_queues

            await self.bridge.run(declare_queues, self.queues, self.app)
        for name in self.app.queues():
            record = await self.bridge.run(self.queues.get_queue_cached, name)
            self._states.append(QueueState(name, record, {
                r.job_type: r for r in self.app.handlers.values() if r.queue == name}))
        pollers = [asyncio.create_task(self._poll(s), name=f"poll:{s.name}")
                   for s in self._states]
        heartbeat = asyncio.create_task(self._heartbeat(), name="heartbeat")
        recheck = asyncio.create_task(self._recheck_waiting(), name="waiting")
        try:
            await self._stopping.wait()
        finally:
            # Pollers end by themselves (never cancelled mid-receive: what a receive took
            # must be held, then given back); the heartbeat runs until the very end.
            await asyncio.gather(*pollers, return_exceptions=True)
            recheck.cancel()
            await asyncio.gather(recheck, return_exceptions=True)
            try:
                await self._shutdown()
            finally:
                heartbeat.cancel()
                await asyncio.gather(heartbeat, return_exceptions=True)

    def stop(self) -> None:
        self._stopping.set()
        self._space.set()
        # Jobs handed over but not taken by a thread have not started: they are given
        # back, not run.
        self._taken_back.extend(cast(list[Work], self.threads.take_back()))

    async def _poll(self, state: QueueState) -> None:
        try:
            await self._receive_until_stopped(state)
        finally:
            if state.admitting is not None:
                await state.admitting  # what it holds is given back or run, not lost

    async def _receive_until_stopped(self, state: QueueState) -> None:
        backoff = Backoff(health=self.health, component=f"consumer of {state.name}")
        channel = queue_channel(state.record.id)
        notifier = self.queues.notifier
        while not self._stopping.is_set():
            # Jobs whose handler returned wait for a group commit: they leave room for
            # the next batch (held still, for their heartbeat, until it is written).
            room = self.capacity - len(self._held) + self._finished
            # Receive in batches: wait for half the room unless nothing is left to run.
            if room <= 0 or (room < self.capacity // 2 and self._unstarted()):
                self._space.clear()
                await self._space.wait()
                continue
            seen = notifier.version(channel)
            try:
                got = await self.bridge.run(self.jobs.receive, state.record, room)
                self._backlog = len(got) >= min(room, MAX_BATCH)
                backoff.reset()
            except StoreUnavailable as exc:
                await backoff.wait(log, f"consumer of {state.name}", exc, self._stopping)
                continue
            if got:
                # Pipelined: this batch's job keys are reserved (a round trip and a
                # commit of their own) while the next receive is on its way; one
                # reservation at a time per queue, in the order of the receives.
                candidates, poison = self._hold(state, got)
                if state.admitting is not None:
                    await state.admitting
                state.admitting = asyncio.ensure_future(
                    self._admit(state, candidates, poison))
                continue
            waiter = asyncio.ensure_future(notifier.wait(channel, seen, POLL_S))
            stopper = asyncio.ensure_future(self._stopping.wait())
            await asyncio.wait([waiter, stopper], return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            stopper.cancel()

    def _unstarted(self) -> int:
        # (a batch being reserved is not counted: the next receive goes out meanwhile)
        return len(self._ready) + len(self._async_ready) + self.threads.waiting()

    def _size_prefetch(self, ran: int, seconds: float) -> None:
        """The default prefetch follows the handlers' pace: what they finish in
        PREFETCH_WINDOW_S, at least 4 × concurrency, at most PACED_PREFETCH. Slow jobs keep
        a small buffer (a job waiting here is one another node could have run); a stream
        of short jobs is received and acknowledged in batches big enough that each
        transaction's fixed cost (a WAL flush on PostgreSQL) is shared by hundreds of jobs.
        The poller receives once half the room is free, so twice the largest receive
        (MAX_BATCH) keeps each receive full."""
        if self.app.prefetch is None and seconds > 0:
            pace = min(int(ran / seconds * PREFETCH_WINDOW_S), PACED_PREFETCH)
            # Grows at once, shrinks gently: one slow quarter-second (a stalled database,
            # a busy machine) does not halve the batches that follow.
            current = self.capacity - self.concurrency
            if self._backlog and not self._unstarted():
                # The handlers ran out of work while the queue held more than the last
                # receive took: the store is the slow side (say, a firing burst sharing
                # SQLite's one writer), not the handlers. Each receive, reservation and
                # acknowledgement waits its turn there, so take more per turn: doubling
                # (not following the starved pace down) is what lets them catch up.
                grown = min(max(current * 2, pace), PACED_PREFETCH)
                self.capacity = self.concurrency + max(current, grown)
                return
            self.capacity = self.concurrency + max(self.prefetch, pace, current * 3 // 4)

    async def _heartbeat(self) -> None:
        ran, then = self.handled + self.failed, time.monotonic()
        while True:
            await asyncio.sleep(0.25)
            now = time.monotonic()
            self._size_prefetch(self.handled + self.failed - ran, now - then)
            ran, then = self.handled + self.failed, now
            due: dict[int, list[Work]] = {}
            for work in list(self._held):
                if work.queue.visibility_s > 1 and work.extend_at <= now:
                    due.setdefault(work.queue.record.id, []).append(work)
            for items in due.values():
                state = items[0].queue
                try:
                    await self.bridge.run(self.jobs.extend, state.record,
                                          [(w.held, w.key) for w in items])
                except TidingsError as exc:
                    log.warning("heartbeat of %d jobs on %s failed: %s", len(items),
                                state.name, exc)
                    continue
                for w in items:
                    w.extend_at = time.monotonic() + state.visibility_s * EXTEND_AFTER

    # admitting a batch -----------------------------------------------------------------

    def _let_go(self, work: Work) -> None:
        if work.key is not None:
            work.queue.keys.discard(work.key)
        self._held.discard(work)
        if not self._space.is_set():
            self._space.set()

    def _hold(self, state: QueueState, got: list[Held],
              ) -> tuple[dict[str, Work], list[tuple[Work, PoisonMessage]]]:
        """Hold a received batch (counted against the room at once) and sort it: job keys
        to reserve, duplicates of keys held here, poison."""
        candidates: dict[str, Work] = {}
        poison: list[tuple[Work, PoisonMessage]] = []
        extend_at = time.monotonic() + state.visibility_s * EXTEND_AFTER
        held_now, registrations, name = self._held, state.registrations, state.name
        for held in got:
            work = Work(state, held, None, None, extend_at)
            held_now.add(work)
            try:
                work.job = job = parse_job(name, held.message)
                if job.type not in registrations:
                    raise PoisonMessage("NoHandler", f"no handler registered for job type "
                                        f"{job.type!r} on queue {name!r}")
            except PoisonMessage as exc:
                poison.append((work, exc))
                continue
            key = job.key
            if key in candidates or key in state.waiting or key in state.keys:
                state.waiting.setdefault(key, []).append(work)  # waits for our own run
            else:
                candidates[key] = work
        return candidates, poison

    async def _admit(self, state: QueueState, candidates: dict[str, Work],
                     poison: list[tuple[Work, PoisonMessage]]) -> None:
        if poison:
            await self._poison(state, poison)
        if candidates:
            await self._reserve(state, list(candidates.items()))
        self._start_ready()

    async def _reserve(self, state: QueueState, items: list[tuple[str, Work]]) -> None:
        try:
            answers = await self.bridge.run(self.jobs.reserve, state.record,
                                            [(key, w.held) for key, w in items])
        except StoreUnavailable as exc:
            log.warning("cannot reserve jobs on %s (%s); they come back after their "
                        "visibility timeout", state.name, exc)
            for _, work in items:
                self._let_go(work)
            return
        duplicates = []
        for (key, work), answer in zip(items, answers, strict=True):
            if answer is Reservation.RESERVED:
                work.key = key
                state.keys.add(key)
                self._ready.append(work)
            elif answer is Reservation.DONE:
                duplicates.append(work)
            else:
                state.waiting.setdefault(key, []).append(work)
        if duplicates:
            await self._drop_duplicates(state, duplicates)

    async def _drop_duplicates(self, state: QueueState, works: list[Work]) -> None:
        for w in works:
            assert w.job is not None
            log.warning("job %s on %s already ran to success; acknowledging its duplicate "
                        "(message %s) without running it", w.job.key, state.name,
                        w.held.message.message_id)
        metrics.JOBS.labels("duplicate").inc(len(works))
        try:
            await self.bridge.run(self.jobs.acknowledge, state.record.id,
                                  [w.held for w in works])
        except TidingsError as exc:
            log.warning("acknowledging duplicates on %s failed: %s", state.name, exc)
        for w in works:
            self._let_go(w)
        if self.app.on_duplicate is not None:
            try:
                await self.app.on_duplicate([w.job for w in works if w.job is not None])
            except Exception:  # noqa: BLE001 - a record of the drop; the drop stands
                log.exception("recording duplicates on %s failed", state.name)

    async def _poison(self, state: QueueState, items: list[tuple[Work, PoisonMessage]]) -> None:
        metrics.JOBS.labels("poison").inc(len(items))
        dlq = await self.bridge.run(self.jobs.dead_letter_queue, state.record)
        if self.app.poison != "dead-letter" or dlq is None:
            for work, poison in items:
                log.warning("message %s on %s cannot be a job (%s: %s); retried%s",
                            work.held.message.message_id, state.name, poison.code,
                            poison.message, "" if dlq else " (the queue has no DLQ)")
                state.to_fail.append((work, f"{poison.code}: {poison.message}"))
            self._kick_flusher()
            return
        for work, poison in items:
            log.warning("message %s on %s cannot be a job (%s: %s); moved to %s",
                        work.held.message.message_id, state.name, poison.code,
                        poison.message, dlq.name)
        try:
            await self.bridge.run(self.jobs.reject, state.record, dlq, [
                (w.held, f"{e.code}: {e.message}") for w, e in items])
            self.queues.notifier.notify(queue_channel(dlq.id))
        except TidingsError as failure:
            log.warning("moving poison messages of %s failed: %s", state.name, failure)
        for work, _ in items:
            self._let_go(work)

    # running ---------------------------------------------------------------------------

    def _start_ready(self) -> None:
        if self._stopping.is_set():
            return
        ready = self._ready
        threaded = []
        now = time.monotonic()
        while ready and self._busy < self._dispatch_limit:
            work = ready.popleft()
            assert work.job is not None
            reg = work.queue.registrations[work.job.type]
            self._busy += 1
            work.started = now
            if reg.is_async:
                self._async_ready.append((work, reg))
            else:
                threaded.append((reg.fn, work.job, work))
        if self._busy:
            self._idle.clear()
        if threaded:
            self.threads.submit(threaded)
        while self._async_ready and self._runners < min(len(self._async_ready),
                                                         self.concurrency):
            self._runners += 1
            self._track(asyncio.ensure_future(self._run_async()))

    def _track(self, task: asyncio.Future[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_async(self) -> None:
        """One of at most `concurrency` runners: async handlers one after another, with no
        task per job."""
        pending = self._async_ready
        try:
            while not self._stopping.is_set():
                if not pending:
                    self._start_ready()
                    if not pending:
                        return
                work, reg = pending.popleft()
                assert work.job is not None
                work.begun = True
                try:
                    result = await reg.fn(work.job)
                except Exception as exc:  # noqa: BLE001 - any handler failure is a retry
                    self._handler_done(work, False, exc)
                else:
                    self._handler_done(work, True, result)
        finally:
            self._runners -= 1

    def _handler_done(self, work: Work, ok: bool, value: Any) -> None:
        """A handler returned or raised (on the loop, for sync handlers too)."""
        if ok and value is not None and inspect.isawaitable(value):
            # a sync-looking function returned a coroutine: await it on the loop
            async def finish() -> None:
                try:
                    await value
                except Exception as exc:  # noqa: BLE001
                    self._handler_done(work, False, exc)
                else:
                    self._handler_done(work, True, None)
                self._start_ready()

            self._track(asyncio.ensure_future(finish()))
            return
        work.handler_done = True
        self._busy -= 1
        if self._busy == 0:
            self._idle.set()
        state, job = work.queue, work.job
        assert job is not None
        if not work.skip:
            self._finished += 1  # room for the next receive
            if not self._space.is_set():
                self._space.set()
            if ok:
                self.handled += 1
                state.to_ack.append(work)
            else:
                self.failed += 1
                log.warning("job %s on %s failed (attempt %d)", job.key, state.name,
                            job.attempt, exc_info=value)
                state.to_fail.append((work, f"{type(value).__name__}: {value}"))
            self._kick_flusher()

    # group commits of outcomes ---------------------------------------------------------

    def _kick_flusher(self) -> None:
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.ensure_future(self._flush())

    async def _flush(self) -> None:
        """Write outcomes as they gather: acknowledgements with their done records, and
        failures with their backoff, each batch one transaction per queue."""
        while any(s.to_ack or s.to_fail for s in self._states):
            if (self._busy and self.capacity - self.concurrency >= MAX_BATCH
                    and sum(len(s.to_ack) for s in self._states) < FLUSH_BATCH):
                # Short jobs (the paced prefetch grew to a full receive: thousands a
                # second) and more about to return: a few ms buy a bigger commit. Slower
                # jobs are written at once: a crash re-runs every job that finished and
                # was not yet acknowledged.
                await asyncio.sleep(FLUSH_LINGER_S)
            for state in self._states:
                if state.to_ack:
                    works, state.to_ack = state.to_ack, []
                    try:
                        await self.bridge.run(self.jobs.complete, state.record.id,
                                              [(w.held, w.key) for w in works
                                               if w.key is not None])
                        metrics.JOBS.labels("succeeded").inc(len(works))
                    except TidingsError as exc:
                        # Their leases run out and the jobs come back; no done record.
                        log.warning("could not acknowledge %d jobs on %s: %s", len(works),
                                    state.name, exc)
                    await self._release(state, works)
                if state.to_fail:
                    failed, state.to_fail = state.to_fail, []
                    metrics.JOBS.labels("failed").inc(len(failed))
                    try:
                        await self.bridge.run(self.jobs.fail, state.record.id, [
                            Failure(w.held, w.key,
                                    self.app.backoff_s(w.held.message.receive_count), error)
                            for w, error in failed])
                    except TidingsError as exc:
                        log.warning("could not release %d failed jobs on %s: %s",
                                    len(failed), state.name, exc)
                    await self._release(state, [w for w, _ in failed])

    async def _release(self, state: QueueState, works: list[Work]) -> None:
        keys = [w.key for w in works if w.key is not None]
        for w in works:
            if w.handler_done:
                self._finished -= 1
            self._let_go(w)
        for key in keys:
            if key in state.waiting:
                await self._settle_waiting(state, key)

    # duplicates waiting for a running job ----------------------------------------------

    async def _settle_waiting(self, state: QueueState, key: str) -> None:
        """Our run of `key` ended: its first waiting duplicate tries the key now (done:
        acknowledged; given back after a failure: it runs); the others wait on."""
        waiting = state.waiting.pop(key, [])
        if waiting:
            state.waiting.setdefault(key, []).extend(waiting[1:])
            if not state.waiting[key]:
                del state.waiting[key]
            await self._reserve(state, [(key, waiting[0])])
            self._start_ready()

    async def _recheck_waiting(self) -> None:
        """Duplicates of jobs another node runs: look again, a batch per queue."""
        while True:
            await asyncio.sleep(WAIT_RECHECK_S)
            for state in self._states:
                items = []
                for key, works in list(state.waiting.items()):
                    if key not in state.keys:
                        items.append((key, works.pop(0)))
                        if not works:
                            del state.waiting[key]
                if items:
                    await self._reserve(state, items)
                    self._start_ready()

    # shutdown --------------------------------------------------------------------------

    async def _shutdown(self) -> None:
        waiting = [w for s in self._states for ws in s.waiting.values() for w in ws]
        handed = self._taken_back + [w for w, _ in self._async_ready]
        self._taken_back = []
        self._async_ready.clear()
        for work in handed:  # handed over to run, never begun
            work.started = 0.0
            self._busy -= 1
        if self._busy == 0:
            self._idle.set()
        unstarted = list(self._ready) + handed + waiting
        self._ready.clear()
        for state in self._states:
            state.waiting.clear()
        log.info("consumers stopping: %d jobs running, %d not started given back",
                 self._busy, len(unstarted))
        await self._give_back(unstarted)
        if self._busy:
            log.info("waiting up to %.1f s for %d running jobs", self.grace_s, self._busy)
            try:
                await asyncio.wait_for(self._idle.wait(), self.grace_s)
            except TimeoutError:
                pass
        late = [w for w in self._held if w.started and not w.handler_done]
        if late:
            now = time.monotonic()
            for work in late:
                assert work.job is not None
                work.skip = True
                if work.begun:
                    log.warning("shutdown deadline: job %s on %s still running after "
                                "%.1f s; given back and abandoned (never acknowledged)",
                                work.job.key, work.queue.name, now - work.started)
            metrics.JOBS.labels("abandoned").inc(sum(w.begun for w in late))
            await self._give_back(late)
        for task in list(self._tasks):
            task.cancel()  # abandoned async handlers
        if self._flusher is not None:
            await asyncio.gather(self._flusher, return_exceptions=True)
        self.threads.close()
        log.info("consumers stopped")

    async def _give_back(self, works: list[Work]) -> None:
        by_queue: dict[int, list[Work]] = {}
        for w in works:
            by_queue.setdefault(w.queue.record.id, []).append(w)
        for queue_id, items in by_queue.items():
            try:
                await self.bridge.run(self.jobs.release, queue_id,
                                      [(w.held, w.key) for w in items])
                self.queues.notifier.notify(queue_channel(queue_id))
            except TidingsError as exc:
                log.warning("could not give back %d messages (they return after their "
                            "visibility timeout): %s", len(items), exc)
            for w in items:
                self._let_go(w)


__all__ = ["Consumer", "Handlers", "Job"]
