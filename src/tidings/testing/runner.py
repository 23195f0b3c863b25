"""Runs the jobs that are visible now, to completion, one batch after another: the
time-travel kit's consumer.

It takes the same steps as the engine's `Consumer`, through the same `Jobs` calls (a
receive that leases, job-key reservations, acknowledgement with the done record, a
failure released with its backoff and error, poison to the dead-letter queue), minus what
only real time needs: no heartbeat, no prefetch, no waiting for duplicates held
elsewhere. So what a test sees (retries, dead-lettering, a job id running once) is what
production does.
"""

from __future__ import annotations

import asyncio
import inspect
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tidings.clock import from_ms
from tidings.errors import QueueNotFound
from tidings.jobs.batches import Failure, Held, Jobs
from tidings.jobs.handlers import Handlers, Job, PoisonMessage, parse_job
from tidings.model.queues import QueueRecord
from tidings.store.base import Reservation

#: A receive takes up to this many messages (the engine's consumer batch).
BATCH = 256


@dataclass(frozen=True)
class JobRun:
    """One run of a handler or task, at its simulated instant."""

    type: str  # the task's name or the job type
    id: str
    queue: str
    args: dict[str, Any]  # a task's arguments (as sent, JSON); a handler job's payload
    at: datetime  # the simulated instant it ran at
    attempt: int
    ok: bool
    error: str | None = None
    scheduled_time: str | None = None


class Runner:
    def __init__(self, jobs: Jobs, on_run: Callable[[JobRun], None] | None = None) -> None:
        self.jobs = jobs
        self.on_run = on_run

    async def run_visible(self, app: Handlers) -> int:
        """One batch from each queue the app handles; how many messages were taken."""
        taken = 0
        for name in app.queues():
            try:
                record = self.jobs.queues.get_queue_cached(name)
            except QueueNotFound:
                continue
            got = self.jobs.receive(record, BATCH)
            if got:
                taken += len(got)
                await self._batch(app, record, got)
        return taken

    async def _batch(self, app: Handlers, record: QueueRecord, got: list[Held]) -> None:
        registrations = {r.job_type: r for r in app.handlers.values() if r.queue == record.name}
        candidates: dict[str, tuple[Held, Job]] = {}
        later: list[Held] = []  # a second copy of a key in this batch: back, for next round
        poison: list[tuple[Held, str]] = []
        for held in got:
            try:
                job = parse_job(record.name, held.message)
                if job.type not in registrations:
                    raise PoisonMessage("NoHandler", f"no handler registered for job type "
                                        f"{job.type!r} on queue {record.name!r}")
            except PoisonMessage as exc:
                poison.append((held, f"{exc.code}: {exc.message}"))
                continue
            if job.key in candidates:
                later.append(held)
            else:
                candidates[job.key] = (held, job)
        if later:
            self.jobs.release(record.id, [(h, None) for h in later])
        if poison:
            dlq = self.jobs.dead_letter_queue(record)
            if app.poison == "dead-letter" and dlq is not None:
                self.jobs.reject(record, dlq, poison)
            else:
                self.jobs.fail(record.id, [Failure(h, None, app.backoff_s(
                    h.message.receive_count), error) for h, error in poison])
        if not candidates:
            return
        answers = self.jobs.reserve(record, [(k, h) for k, (h, _) in candidates.items()])
        runs, duplicates, busy = [], [], []
        for (key, (held, job)), answer in zip(candidates.items(), answers, strict=True):
            if answer is Reservation.RESERVED:
                runs.append((key, held, job))
            elif answer is Reservation.DONE:
                duplicates.append(held)
            else:
                busy.append((held, None))
        if duplicates:
            self.jobs.acknowledge(record.id, duplicates)
        if busy:
            self.jobs.release(record.id, busy)
        outcomes = await asyncio.gather(*(self._run(registrations[job.type].fn, job)
                                          for _, _, job in runs))
        done = [(held, key) for (key, held, _), ok in zip(runs, outcomes, strict=True)
                if ok is None]
        failed = [Failure(held, key, app.backoff_s(held.message.receive_count), error)
                  for (key, held, _), error in zip(runs, outcomes, strict=True)
                  if error is not None]
        if done:
            self.jobs.complete(record.id, done)
        if failed:
            self.jobs.fail(record.id, failed)

    async def _run(self, fn: Callable[[Job], Any], job: Job) -> str | None:
        """Run one handler; None, or the error as the consumer records it."""
        error = None
        try:
            result = fn(job)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:  # noqa: BLE001 - a failing job is retried, as in production
            error = f"{type(exc).__name__}: {exc}"
            self._trace = traceback.format_exc()
        if self.on_run is not None:
            args = job.payload.get("args")
            self.on_run(JobRun(
                type=job.type, id=job.id, queue=job.queue,
                args=args if isinstance(args, dict) else job.payload,
                at=from_ms(self.jobs.clock.now_ms()), attempt=job.attempt, ok=error is None,
                error=error, scheduled_time=job.scheduled_time))
        return error
