"""Consumers: your handlers, run by tidings itself (no worker fleet), at queue speed.

One `Consumer` serves every queue an app (`Handlers`) handles, in the parts River splits a
consumer into (`tidings.jobs.consumer`):
- a *poller* per queue receives as many messages as there are free handler slots plus a
  prefetch buffer, in one transaction, and reserves their job keys in one more (`poller`,
  `keys`);
- *admission* sizes that buffer by the handlers' pace and holds the poller back until
  there is room (`admission`);
- *runners* run `concurrency` handlers at once: sync ones on daemon threads, async ones
  on runner tasks of the loop, each pulling ready jobs one at a time (`runner`);
- the *completer* acknowledges finished jobs in group commits (many messages' deletes and
  done records per transaction, gathered for at most a few ms, each job only after its
  handler returned), through `runtime/batching.py`'s `Batcher` (`completer`).
Each held job's life cycle is a `JobState`, changed only through the `Ledger`'s
transitions table (`work`).

Guarantees (the README's "Jobs" paragraph says the same to users):
- *Once per identity*: a job key (`tidings.jobs.handlers.Job.key`) is reserved before its
  handler runs and marked done in the transaction that deletes its message. A duplicate
  that arrives while the first runs waits for it (held, its lease extended) and is then
  acknowledged without running, as is one arriving after. Each drop is logged at WARNING,
  counted in `tidings_jobs_total{outcome="duplicate"}` and told to `App.on_duplicate`.
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
import logging
import time

from tidings.jobs.batches import Jobs
from tidings.jobs.consumer.admission import Admission
from tidings.jobs.consumer.completer import Completer
from tidings.jobs.consumer.heartbeat import LeaseHeartbeat
from tidings.jobs.consumer.keys import JobKeys
from tidings.jobs.consumer.limiter import Limiter
from tidings.jobs.consumer.poller import Poller
from tidings.jobs.consumer.runner import Runner
from tidings.jobs.consumer.work import JobState, Ledger, ServedQueue
from tidings.jobs.handlers import Handlers, Job
from tidings.limits.book import LimitBook
from tidings.limits.service import LimitService
from tidings.notify.base import POLL_FALLBACK_S
from tidings.queues.service import QueueService
from tidings.runtime import metrics
from tidings.runtime.bridge import Bridge
from tidings.runtime.health import Health

log = logging.getLogger("tidings.consumers")


class Consumer:
    """Receives from every queue the app handles and runs its handlers."""

    def __init__(self, app: Handlers, queues: QueueService, bridge: Bridge, *,
                 concurrency: int, grace_s: float, health: Health | None = None,
                 poll_fallback_s: float = POLL_FALLBACK_S) -> None:
        """`poll_fallback_s`: how long an empty queue is left without a look when no
        wake-up comes (TIDINGS_POLL_FALLBACK_S)."""
        self.app = app
        self.poll_fallback_s = poll_fallback_s
        self.queues = queues
        self.bridge = bridge
        self.health = health
        self.grace_s = grace_s
        self.concurrency = concurrency = app.concurrency or concurrency
        self.jobs = jobs = Jobs(queues)
        self.stopping = asyncio.Event()
        self.ledger = ledger = Ledger()
        # The one loop in the wiring: the completer lingers for company when admission's
        # paced prefetch says jobs are short, and admission paces by the runner, whose
        # outcomes the completer writes.
        self.completer = Completer(ledger, jobs, bridge, app, queues.notifier,
                                   lingering=lambda: self.admission.lingering())
        prefetch = Admission.default_prefetch(concurrency, app.prefetch)
        kinds = {r.is_async for r in app.handlers.values()}
        self.runner = Runner(ledger, self.completer, self.stopping, concurrency=concurrency,
                             dispatch_limit=(concurrency + prefetch if len(kinds) == 1
                                             else concurrency))
        self.admission = Admission(ledger, self.runner, concurrency=concurrency,
                                   prefetch=app.prefetch)
        self.book = LimitBook(queues.store, queues.clock)
        self.limiter = Limiter(ledger, jobs, bridge, self.book, queues.clock,
                               run_ready=self.runner.admit,
                               free_slots=self.runner.free_slots,
                               count_held_back=self._count_held_back)
        self.runner.on_slot_freed = self.limiter.slot_freed
        self.book.on_change = self.limiter.limits_changed
        self.completer.limiter = self.limiter
        self.limited = any(r.limits for r in app.handlers.values())
        self.keys = JobKeys(ledger, jobs, bridge, app,
                            admit=self.limiter.admit if self.limited else self.runner.admit)
        self.served: list[ServedQueue] = []

    @property
    def handled(self) -> int:
        """Jobs whose handler returned."""
        return self.runner.handled

    @property
    def failed(self) -> int:
        """Jobs whose handler raised."""
        return self.runner.failed

    async def run(self) -> None:
        if self.app.create_queues:
            from tidings.jobs.declare import declare_queues

            await self.bridge.run(declare_queues, self.queues, self.app)
        if self.limited:
            await self.bridge.run(self._declare_limits)
        for name in self.app.queues():
            record = await self.bridge.run(self.queues.get_queue_cached, name)
            self.served.append(ServedQueue(name, record, {
                r.job_type: r for r in self.app.handlers.values() if r.queue == name}))
        pollers = [asyncio.create_task(self._poller(q).run(), name=f"poll:{q.name}")
                   for q in self.served]
        heartbeat = asyncio.create_task(
            LeaseHeartbeat(self.ledger, self.jobs, self.bridge).run(), name="heartbeat")
        pace = asyncio.create_task(self.admission.run(), name="prefetch")
        waiting = asyncio.create_task(self.keys.run(self.served, self.stopping),
                                      name="waiting")
        limits = [asyncio.create_task(self.book.run(self.bridge, self.stopping), name="book"),
                  asyncio.create_task(self.limiter.run(self.stopping), name="limiter")
                  ] if self.limited else []
        try:
            await self.stopping.wait()
        finally:
            # Pollers and the waiting duplicates' loop end by themselves (never cancelled
            # mid-receive or mid-reservation: what they hold must be held, then given
            # back); the heartbeat runs until the very end.
            await asyncio.gather(*pollers, waiting, *limits, return_exceptions=True)
            pace.cancel()
            await asyncio.gather(pace, return_exceptions=True)
            try:
                await self._shutdown()
            finally:
                heartbeat.cancel()
                await asyncio.gather(heartbeat, return_exceptions=True)

    def stop(self) -> None:
        self.stopping.set()
        self.ledger.freed.set()  # a poller waiting for room sees the stop
        self.ledger.key_released.set()  # so does the waiting duplicates' loop
        self.limiter.kick.set()  # and the limiter's
        self.runner.stop()

    def _count_held_back(self, n: int) -> None:
        self.runner.held_back += n

    def _declare_limits(self) -> None:
        """The app's declared limits, created or updated to what the code says, then read
        (so the first jobs already see them)."""
        LimitService(self.queues.store, self.queues.clock).declare(
            self.app.limit_settings(self.queues.clock.now_ms()))
        self.book.refresh()

    def _poller(self, queue: ServedQueue) -> Poller:
        return Poller(queue, ledger=self.ledger, admission=self.admission, keys=self.keys,
                      completer=self.completer, jobs=self.jobs, bridge=self.bridge,
                      notifier=self.queues.notifier, stopping=self.stopping,
                      health=self.health, fallback_s=self.poll_fallback_s)

    async def _shutdown(self) -> None:
        ledger = self.ledger
        handed = self.runner.take_back()  # READY, or STARTED that no runner began
        await self.limiter.flushed()
        unstarted = (handed + self.keys.give_up_waiting(self.served)
                     + self.limiter.take_back())
        log.info("consumers stopping: %d jobs running, %d not started given back",
                 ledger.running - sum(w.state is JobState.STARTED for w in handed),
                 len(unstarted))
        await self.completer.give_back(unstarted)
        if ledger.running:
            log.info("waiting up to %.1f s for %d running jobs", self.grace_s, ledger.running)
            ledger.idle.clear()
            try:
                await asyncio.wait_for(ledger.idle.wait(), self.grace_s)
            except TimeoutError:
                pass
        late = ledger.in_state(JobState.STARTED)
        if late:
            now = time.monotonic()
            for work in late:
                ledger.move(work, JobState.ABANDONED)
                log.warning("shutdown deadline: job %s on %s still running after %.1f s; "
                            "given back and abandoned (never acknowledged)", work.key,
                            work.queue.name, now - work.started)
            metrics.JOBS.labels("abandoned").inc(len(late))
            await self.completer.give_back(late)
        self.runner.close()
        await self.limiter.flushed()  # the slots of jobs that ended meanwhile
        await self.completer.flushed()
        log.info("consumers stopped")


__all__ = ["Consumer", "Handlers", "Job"]
