"""Writes what became of each held job: acknowledgements with their done records and
failures with their backoff through group commits (`runtime/batching.py`'s `Batcher`, one
transaction per queue and group), poison to the dead-letter queue, and what a shutdown
gives back. A job leaves the consumer (GONE) once its outcome is written, or once writing
it failed: its lease then runs out and the message comes back."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from tidings.errors import TidingsError
from tidings.jobs.batches import Failure, Jobs
from tidings.jobs.consumer.work import HOLDS_KEY, JobState, Ledger, ServedQueue, Work
from tidings.jobs.handlers import Handlers, PoisonMessage
from tidings.model.limits import RetryAfter
from tidings.notify.base import Notifier, queue_channel
from tidings.runtime import metrics
from tidings.runtime.batching import Batcher
from tidings.runtime.bridge import Bridge

if TYPE_CHECKING:
    from tidings.jobs.consumer.limiter import Limiter

log = logging.getLogger("tidings.consumers")

#: With short jobs, an acknowledgement waits at most this long for others to join its
#: group commit, unless FLUSH_BATCH are already waiting or no other handler is running.
FLUSH_LINGER_S = 0.002
FLUSH_BATCH = 128

Retry = tuple[Work, Failure]


class Completer:
    """`lingering()`: whether acknowledgements may wait FLUSH_LINGER_S for company."""

    def __init__(self, ledger: Ledger, jobs: Jobs, bridge: Bridge, app: Handlers,
                 notifier: Notifier, lingering: Callable[[], bool]) -> None:
        self.ledger = ledger
        self.jobs = jobs
        self.bridge = bridge
        self.app = app
        self.notifier = notifier
        self.lingering = lingering
        self.limiter: Limiter | None = None  # set by the consumer
        # Every outcome gathered goes in one group (at most what the consumer holds): on
        # PostgreSQL each group is a commit, and its WAL flush, of its own.
        self._acks: Batcher[ServedQueue, Work, None] = Batcher(
            bridge, self._write_acks, None, linger=self._linger, on_written=self._acked)
        self._retries: Batcher[ServedQueue, Retry, None] = Batcher(
            bridge, self._write_retries, None, on_written=self._retried)

    # what runners report (Outcomes) ----------------------------------------------------

    def succeeded(self, works: list[Work]) -> None:
        if self.limiter is not None:
            self.limiter.finished(works)
        queue = works[0].queue
        if all(w.queue is queue for w in works):
            self._acks.put_many(queue, works)
            return
        for work in works:
            self._acks.put(work.queue, work)

    def failed(self, work: Work, error: str) -> None:
        if self.limiter is not None:
            self.limiter.finished((work,))
        self._retry(work, work.key, error)

    def held_back(self, work: Work, pushback: RetryAfter) -> None:
        if self.limiter is None:  # no limiter: a retry after the handler's delay
            self.ledger.move(work, JobState.FAILED)
            self._retries.put(work.queue, (work, Failure(
                work.held, work.key, int(pushback.seconds), f"RetryAfter: {pushback}")))
            return
        self.limiter.retry_after(work, pushback)

    async def flushed(self) -> None:
        """Every outcome reported so far is written."""
        await self._acks.flushed()
        await self._retries.flushed()

    def _retry(self, work: Work, key: str | None, error: str) -> None:
        delay = self.app.backoff_s(work.held.message.receive_count)
        self._retries.put(work.queue, (work, Failure(work.held, key, delay, error)))

    def _linger(self, pending: int) -> float:
        # Short jobs (the paced prefetch grew to a full receive: thousands a second) and
        # more about to return: a few ms buy a bigger commit. Slower jobs are written at
        # once: a crash re-runs every job that finished and was not yet acknowledged.
        return FLUSH_LINGER_S if pending < FLUSH_BATCH and self.lingering() else 0.0

    def _write_acks(self, queue: ServedQueue, works: Sequence[Work]) -> list[None]:
        try:
            self.jobs.complete(queue.record.id, [(w.held, w.key) for w in works
                                                 if w.key is not None])
        finally:
            self._release_slots(works)
        return [None] * len(works)

    def _release_slots(self, works: Iterable[Work]) -> None:
        slots = [s for w in works for s in w.slots]
        if slots:
            try:
                self.jobs.release_slots(slots)
            except TidingsError as exc:  # they run out with their lease
                log.warning("could not give back %d limit slots: %s", len(slots), exc)

    async def _acked(self, queue: ServedQueue, works: list[Work],
                     outcome: Sequence[None | BaseException] | BaseException) -> None:
        if isinstance(outcome, BaseException):
            # Their leases run out and the jobs come back; no done record.
            self._log_failure(outcome, "could not acknowledge %d jobs on %s", len(works),
                              queue.name)
        else:
            metrics.JOBS.labels("succeeded").inc(len(works))
        self.ledger.move_all(works, JobState.GONE)

    def _write_retries(self, queue: ServedQueue, items: Sequence[Retry]) -> list[None]:
        try:
            self.jobs.fail(queue.record.id, [f for _, f in items])
        finally:
            self._release_slots(w for w, _ in items)
        return [None] * len(items)

    async def _retried(self, queue: ServedQueue, items: list[Retry],
                       outcome: Sequence[None | BaseException] | BaseException) -> None:
        metrics.JOBS.labels("failed").inc(len(items))
        if isinstance(outcome, BaseException):
            self._log_failure(outcome, "could not release %d failed jobs on %s", len(items),
                              queue.name)
        self.ledger.move_all([w for w, _ in items], JobState.GONE)

    @staticmethod
    def _log_failure(exc: BaseException, message: str, *args: object) -> None:
        if isinstance(exc, TidingsError):
            log.warning(message + ": %s", *args, exc)
        else:
            log.error(message, *args, exc_info=exc)

    # poison ----------------------------------------------------------------------------

    async def poison(self, queue: ServedQueue, items: list[tuple[Work, PoisonMessage]]) -> None:
        """Messages that can never be jobs (POISON): to the dead-letter queue at once, or
        retried like a failing job (`App.poison`, or a queue without a DLQ)."""
        metrics.JOBS.labels("poison").inc(len(items))
        dlq = await self.bridge.run(self.jobs.dead_letter_queue, queue.record)
        if self.app.poison != "dead-letter" or dlq is None:
            for work, poison in items:
                log.warning("message %s on %s cannot be a job (%s: %s); retried%s",
                            work.held.message.message_id, queue.name, poison.code,
                            poison.message, "" if dlq else " (the queue has no DLQ)")
                self._retry(work, None, f"{poison.code}: {poison.message}")
            return
        for work, poison in items:
            log.warning("message %s on %s cannot be a job (%s: %s); moved to %s",
                        work.held.message.message_id, queue.name, poison.code,
                        poison.message, dlq.name)
        try:
            await self.bridge.run(self.jobs.reject, queue.record, dlq, [
                (w.held, f"{e.code}: {e.message}") for w, e in items])
            self.notifier.notify(queue_channel(dlq.id))
        except TidingsError as failure:
            log.warning("moving poison messages of %s failed: %s", queue.name, failure)
        self.ledger.move_all([w for w, _ in items], JobState.GONE)

    # shutdown --------------------------------------------------------------------------

    async def give_back(self, works: list[Work]) -> None:
        """Back to their queues at once, their keys released: jobs not started (READY,
        WAITING, or STARTED that no runner began) and ABANDONED ones."""
        by_queue: dict[int, list[Work]] = {}
        for w in works:
            by_queue.setdefault(w.queue.record.id, []).append(w)
        for queue_id, items in by_queue.items():
            release = [(w.held, w.key if w.state in HOLDS_KEY else None) for w in items]
            for w in items:
                if w.state is not JobState.ABANDONED:
                    self.ledger.move(w, JobState.RETURNING)
            try:
                await self.bridge.run(self.jobs.release, queue_id, release)
                self.notifier.notify(queue_channel(queue_id))
            except TidingsError as exc:
                log.warning("could not give back %d messages (they return after their "
                            "visibility timeout): %s", len(items), exc)
            self.ledger.move_all(items, JobState.GONE)
