"""A queue's poller: receives as many messages as there is room for (free handler slots
plus the prefetch buffer), in one transaction, holds them, and sorts them: jobs whose keys
to reserve, duplicates of keys held here, poison. An empty queue is looked at again when
a notification says a message arrived, when its next delayed message becomes visible, or
after its fallback (TIDINGS_POLL_FALLBACK_S: a lost notification costs latency, never
correctness). Idle, it wakes for nothing else."""

from __future__ import annotations

import asyncio
import logging
import time

from tidings.errors import StoreUnavailable
from tidings.jobs.batches import Held, Jobs
from tidings.jobs.consumer.admission import Admission
from tidings.jobs.consumer.completer import Completer
from tidings.jobs.consumer.heartbeat import extend_at
from tidings.jobs.consumer.keys import JobKeys
from tidings.jobs.consumer.work import JobState, Ledger, ServedQueue, Work
from tidings.jobs.handlers import PoisonMessage, parse_job
from tidings.notify.base import POLL_FALLBACK_S, Notifier, queue_channel
from tidings.runtime.backoff import Backoff
from tidings.runtime.bridge import Bridge
from tidings.runtime.health import Health
from tidings.runtime.waits import first_of

log = logging.getLogger("tidings.consumers")


class Poller:
    def __init__(self, queue: ServedQueue, *, ledger: Ledger, admission: Admission,
                 keys: JobKeys, completer: Completer, jobs: Jobs, bridge: Bridge,
                 notifier: Notifier, stopping: asyncio.Event,
                 health: Health | None = None, fallback_s: float = POLL_FALLBACK_S) -> None:
        """`fallback_s`: how long an empty queue waits before looking again (wake-ups
        end the wait at once; this only bounds a lost one)."""
        self.queue = queue
        self.fallback_s = fallback_s
        self.ledger = ledger
        self.admission = admission
        self.keys = keys
        self.completer = completer
        self.jobs = jobs
        self.bridge = bridge
        self.notifier = notifier
        self.stopping = stopping
        self.health = health
        self._admitting: asyncio.Future[None] | None = None  # the last batch's reservation

    async def run(self) -> None:
        """Until the consumer stops; never cancelled mid-receive (what a receive took must
        be held, then run or given back)."""
        try:
            await self._receive_until_stopped()
        finally:
            if self._admitting is not None:
                await self._admitting  # what it holds is given back or run, not lost

    async def _receive_until_stopped(self) -> None:
        queue, admission, stopping = self.queue, self.admission, self.stopping
        backoff = Backoff(health=self.health, component=f"consumer of {queue.name}")
        channel = queue_channel(queue.record.id)
        while not stopping.is_set():
            room = admission.room()
            if admission.must_wait(room):
                await admission.wait_for_room()
                continue
            seen = self.notifier.version(channel)
            try:
                got = await self.bridge.run(self.jobs.receive, queue.record, room)
                admission.received(len(got), room)
                backoff.reset()
            except StoreUnavailable as exc:
                await backoff.wait(log, f"consumer of {queue.name}", exc, stopping)
                continue
            if got:
                # Pipelined: this batch's job keys are reserved (a round trip and a
                # commit of their own) while the next receive is on its way; one
                # reservation at a time per queue, in the order of the receives.
                candidates, poison = self._hold(got)
                if self._admitting is not None:
                    await self._admitting
                self._admitting = asyncio.ensure_future(self._admit(candidates, poison))
                continue
            try:
                pause = await self.bridge.run(self.jobs.next_visible_in, queue.record)
            except StoreUnavailable:
                pause = None  # the next receive meets it and backs off
            timeout = self.fallback_s if pause is None else min(self.fallback_s, pause)
            await first_of(self.notifier.wait(channel, seen, timeout), stopping.wait())

    def _hold(self, got: list[Held]) -> tuple[list[tuple[str, Work]],
                                               list[tuple[Work, PoisonMessage]]]:
        """Hold a received batch (counted against the room at once) and sort it: keys to
        reserve (RESERVING), duplicates of keys held here (WAITING), poison."""
        queue, ledger = self.queue, self.ledger
        registrations, name, waiting, keys = (queue.registrations, queue.name, queue.waiting,
                                              queue.keys)
        renew_at = extend_at(queue, time.monotonic())
        works: list[Work] = []
        candidates: dict[str, Work] = {}
        duplicates: list[tuple[str, Work]] = []
        poison: list[tuple[Work, PoisonMessage]] = []
        for held in got:
            try:
                job = parse_job(name, held.message)
                if job.type not in registrations:
                    raise PoisonMessage("NoHandler", f"no handler registered for job type "
                                        f"{job.type!r} on queue {name!r}")
            except PoisonMessage as exc:
                work = Work(queue, held, None, None, renew_at)
                works.append(work)
                poison.append((work, exc))
                continue
            key = job.key
            work = Work(queue, held, job, key, renew_at)
            works.append(work)
            if key in candidates or key in waiting or key in keys:
                duplicates.append((key, work))  # waits for our own run
            else:
                candidates[key] = work
        ledger.hold(works)
        ledger.move_all(candidates.values(), JobState.RESERVING)
        ledger.move_all([w for w, _ in poison], JobState.POISON)
        for key, work in duplicates:
            self.keys.wait(queue, key, work)
        return list(candidates.items()), poison

    async def _admit(self, candidates: list[tuple[str, Work]],
                     poison: list[tuple[Work, PoisonMessage]]) -> None:
        if poison:
            await self.completer.poison(self.queue, poison)
        if candidates:
            await self.keys.reserve(self.queue, candidates)
