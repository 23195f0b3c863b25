"""Runs the jobs whose key is reserved: sync handlers on `HandlerThreads`, async ones on
at most `concurrency` runner tasks of the loop, each pulling ready jobs one at a time
(no task per job). Each outcome goes to the completer."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from tidings.jobs.consumer.work import JobState, Ledger, Work
from tidings.jobs.handlers import Registration
from tidings.model.limits import RetryAfter
from tidings.runtime.handler_threads import HandlerThreads, Outcome
from tidings.targets.base import DeliveryError

log = logging.getLogger("tidings.consumers")


class Outcomes(Protocol):
    """Where a runner sends each job whose handler returned or raised."""

    def succeeded(self, works: list[Work]) -> None: ...
    def failed(self, work: Work, error: str) -> None: ...
    def held_back(self, work: Work, pushback: RetryAfter) -> None: ...


class Runner:
    """`dispatch_limit`: how many jobs may be handed to runners at once. When every
    handler is of one kind, the runners themselves bound how many run at once, and every
    held job can be handed over as soon as it is ready (no hop back to the loop per job);
    a mixed app could run `concurrency` of each kind, so there the loop counts."""

    def __init__(self, ledger: Ledger, outcomes: Outcomes, stopping: asyncio.Event, *,
                 concurrency: int, dispatch_limit: int) -> None:
        self.ledger = ledger
        self.outcomes = outcomes
        self.stopping = stopping
        self.concurrency = concurrency
        self.dispatch_limit = dispatch_limit
        self.ready: deque[Work] = deque()  # READY, in the order their keys were reserved
        self.threads: HandlerThreads[Work] = HandlerThreads(concurrency, self._threads_done)
        self.handled = 0  # handlers that returned
        self.failed = 0  # handlers that raised
        #: Jobs a limit sent back to their queue (counted by the limiter): a backlog of a
        #: key with no room passes through as fast as short jobs, and the prefetch grows
        #: to match, so the jobs of other keys behind it are reached sooner.
        self.held_back = 0
        self._async_ready: deque[tuple[Work, Registration]] = deque()
        self._runners = 0  # async runner tasks alive
        self._async_outcomes: list[Outcome[Work]] = []
        self._taken_back: list[Work] = []
        self._tasks: set[asyncio.Future[Any]] = set()
        #: Told when handlers returned (slots freed): the limiter's jobs may go.
        self.on_slot_freed: Callable[[], None] | None = None

    def admit(self, works: Iterable[Work]) -> None:
        """Jobs whose key is now ours (READY): run them as slots allow."""
        self.ready.extend(works)
        self.start_ready()

    def free_slots(self) -> int:
        """Handler slots no job holds or is about to take."""
        return self.concurrency - self.ledger.running - len(self.ready)

    def unstarted(self) -> int:
        """Jobs ready or handed to a runner that has not taken them yet."""
        return len(self.ready) + len(self._async_ready) + self.threads.waiting()

    def start_ready(self) -> None:
        if self.stopping.is_set():
            return
        ready = self.ready
        count = min(len(ready), self.dispatch_limit - self.ledger.running)
        if count <= 0:
            return
        starting = [ready.popleft() for _ in range(count)]
        self.ledger.move_all(starting, JobState.STARTED)
        now = time.monotonic()
        threaded = []
        for work in starting:
            work.started = now
            job = work.job
            assert job is not None
            reg = work.queue.registrations[job.type]
            if reg.is_async:
                self._async_ready.append((work, reg))
            else:
                threaded.append((reg.fn, job, work))
        if threaded:
            self.threads.submit(threaded)
        while self._async_ready and self._runners < min(len(self._async_ready),
                                                         self.concurrency):
            self._runners += 1
            self._track(asyncio.ensure_future(self._run_async()))

    def stop(self) -> None:
        """Jobs handed to threads but not taken by one have not started: they are kept to
        be given back, not run."""
        self._taken_back.extend(self.threads.take_back())

    def take_back(self) -> list[Work]:
        """Shutdown: every job not started, out of the runners' hands (READY or STARTED
        that no runner began)."""
        works = [*self.ready, *self._taken_back, *(w for w, _ in self._async_ready)]
        self.ready.clear()
        self._taken_back = []
        self._async_ready.clear()
        return works

    def close(self) -> None:
        """The end of a shutdown: async handlers still running (abandoned) are cancelled;
        idle threads end, and one still running a handler ends with the process."""
        for task in list(self._tasks):
            task.cancel()
        self.threads.close()

    def _track(self, task: asyncio.Future[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_async(self) -> None:
        """One of at most `concurrency` runners: async handlers one after another."""
        pending = self._async_ready
        try:
            while not self.stopping.is_set():
                if not pending:
                    self._record_async()  # frees the slots of the jobs just run
                    if not pending:
                        return
                work, reg = pending.popleft()
                assert work.job is not None
                try:
                    result = await reg.fn(work.job)
                except Exception as exc:  # noqa: BLE001 - any handler failure is a retry
                    self._async_done(work, False, exc)
                else:
                    self._async_done(work, True, result)
        finally:
            self._runners -= 1

    def _async_done(self, work: Work, ok: bool, value: Any) -> None:
        # Recorded together once the runners yield: a move and a group commit request
        # per job cost more than the job itself.
        self._async_outcomes.append((work, ok, value))
        if len(self._async_outcomes) == 1:
            asyncio.get_running_loop().call_soon(self._record_async)

    def _record_async(self) -> None:
        outcomes, self._async_outcomes = self._async_outcomes, []
        if outcomes:
            self._record(outcomes)
        self.start_ready()  # their slots are free

    def _threads_done(self, outcomes: Iterable[Outcome[Work]]) -> None:
        self._record(outcomes)
        self.start_ready()

    def _record(self, outcomes: Iterable[Outcome[Work]]) -> None:
        """Handlers returned or raised (on the loop, for sync handlers too)."""
        succeeded = []
        for work, ok, value in outcomes:
            if ok and value is not None and inspect.isawaitable(value):
                self._track(asyncio.ensure_future(self._finish(work, value)))
            elif work.state is not JobState.STARTED:
                continue  # abandoned at the shutdown deadline: no longer ours
            elif ok:
                succeeded.append(work)
            elif isinstance(value, RetryAfter):
                self.handled += 1  # not a failure: the job waits for its downstream
                self.outcomes.held_back(work, value)
            else:
                self._fail(work, value)
        if succeeded:
            self.handled += len(succeeded)
            self.ledger.move_all(succeeded, JobState.SUCCEEDED)
            self.outcomes.succeeded(succeeded)
        if self.on_slot_freed is not None:
            self.on_slot_freed()

    async def _finish(self, work: Work, value: Awaitable[Any]) -> None:
        """A sync-looking function returned a coroutine: await it on the loop."""
        try:
            await value
        except Exception as exc:  # noqa: BLE001 - any handler failure is a retry
            self._record(((work, False, exc),))
        else:
            self._record(((work, True, None),))
        self.start_ready()

    def _fail(self, work: Work, exc: BaseException) -> None:
        self.failed += 1
        if isinstance(exc, DeliveryError):
            # A target's refusal explains itself (an SMTP reply, an HTTP status): one
            # line, not a traceback of the delivery code per attempt.
            log.warning("job %s on %s failed (attempt %d): %s: %s", work.key,
                        work.queue.name, work.held.message.receive_count, exc.code,
                        exc.message)
        else:
            log.warning("job %s on %s failed (attempt %d)", work.key, work.queue.name,
                        work.held.message.receive_count, exc_info=exc)
        self.ledger.move(work, JobState.FAILED)
        self.outcomes.failed(work, f"{type(exc).__name__}: {exc}")
