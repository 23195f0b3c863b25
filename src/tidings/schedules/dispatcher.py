"""The dispatcher: fires due schedules, in batches, exactly once into their queues.

One pass claims up to `batch` due schedules (earliest first), plans each firing in Python
(next occurrence, target message), then completes them all in one transaction that
advances or deletes each schedule *and* writes its messages, through the pass's handle
(`with store.firing_pass(…) as p`). The claim marks no row: on SQLite (one writer) it is
a plain read and planning holds no lock, so other writers go on meanwhile; on PostgreSQL
the pass is one transaction whose claim locks the rows (`SKIP LOCKED`: other nodes take
others) and which the server ends if the node stalls for `claim_ms`. The completion is a
compare-and-set on what the pass read, so a node that lost its rows (stalled past
`claim_ms`, or killed) writes nothing, and the node that took over fires the occurrence
once. When
nothing is due the loop sleeps until the next due instant, at most `idle_poll_s`
(TIDINGS_POLL_FALLBACK_S), woken early when a schedule due within the wake horizon (twice
that) is created (`notify.base.wakes_dispatchers`; one due later is found by that poll in
time): idle costs one indexed query per fallback poll.

Missed occurrences (after downtime): a one-shot always fires; a recurring schedule fires
only its latest missed occurrence, and only if it is younger than its maximum event age.

Limits (issue 33): a firing into a queue whose key (`queue:<name>`) a limit or a pause
holds asks the store for a start, in one acquisition per pass; one refused keeps its
occurrence and is due again later (`schedules/held.py`: when the key should have room, or,
for a schedule with a flexible window, at the next start the pass's `WindowPlan` has free
for the key's rate, so a burst is spread over its window), not fired, not counted as an
attempt, counted in `tidings_limit_held_firings`. Other kinds are held as deliveries, in
their queue; with a flexible window, a delivery into a key with a rate is written to
become visible at the plan's next start for the key (`held.pace_deliveries`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tidings.clock import Clock
from tidings.errors import QueueNotFound, StoreUnavailable, ValidationError
from tidings.limits.book import LimitBook
from tidings.model.digests import MessageAttributeValue
from tidings.model.firings import FiringContext, delivery_job, render_input
from tidings.model.queues import INTERNAL_QUEUES, QueueRecord
from tidings.model.schedules import ActionAfterCompletion, Schedule
from tidings.notify.base import POLL_FALLBACK_S, SCHEDULES_CHANNEL, Notifier, queue_channel
from tidings.queues.internal import ensure_internal_queues
from tidings.queues.service import QueueService
from tidings.runtime import metrics
from tidings.runtime.backoff import Backoff
from tidings.runtime.bridge import Bridge
from tidings.runtime.health import Health
from tidings.runtime.waits import first_of
from tidings.schedules.firing_log import Outcome, outcome_row
from tidings.schedules.held import NO_PLACE, Planned, WindowPlan, hold_limited, pace_deliveries
from tidings.schedules.service import (
    ScheduleService,
    flex_offset_ms,
    schedule_trigger,
)
from tidings.store.base import Firing, FiringOutcome, Store, TargetMessage
from tidings.targets.base import LimitPlace, Target
from tidings.targets.deadletter import dead_letter_attributes
from tidings.targets.registry import target_of
from tidings.triggers import one_time

log = logging.getLogger("tidings.dispatcher")

IDLE_POLL_S = POLL_FALLBACK_S  # bounds the wait for a schedule no wake-up announced
MAX_CATCH_UP_STEPS = 1_000_000
FIRST_BATCH = 32
#: Warming up for a burst (`Store.warm_due`). After a quiet spell the pages a burst's
#: firings read and update may have left memory (the OS drops cached pages nobody touched,
#: a VM's memory balloon within a minute or two), and reading them from disk inside the
#: passes made the first second of a burst of 10,000 firings/s 0.4-0.8 s late. So once the
#: next due instant of a quiet dispatcher is WARM_LEAD_MS away, the rows due in its first
#: WARM_SPAN_MS are read ahead, in chunks, stopping at the due instant: a read, which
#: changes nothing and which other writers go on beside.
QUIET_MS = 5_000
WARM_LEAD_MS = 3_000
WARM_SPAN_MS = 2_000
WARM_CHUNK = 500
WARM_MAX = 50_000
DELIVERED = Outcome.DELIVERED.value

@dataclass
class _Batch:
    now: int
    queues: dict[str, QueueRecord | None]
    # schedule id -> why its queue target refused the message (dead-lettered or dropped)
    refused: dict[int, str] = field(default_factory=dict)


class Dispatcher:
    def __init__(self, schedules: ScheduleService, queues: QueueService, store: Store,
                 clock: Clock, notifier: Notifier, bridge: Bridge, *, batch: int = 1000,
                 claim_ms: int = 10_000, idle_poll_s: float = IDLE_POLL_S,
                 health: Health | None = None, book: LimitBook | None = None,
                 place: LimitPlace = NO_PLACE) -> None:
        """`book`: the node's limits, for queue targets and the flexible windows of the
        others (None: none apply); `place`: where this node delivers (its SMTP relay)."""
        self.schedules = schedules
        self.queues = queues
        self.store = store
        self.clock = clock
        self.notifier = notifier
        self.bridge = bridge
        self.batch = batch
        self.claim_ms = claim_ms
        self.idle_poll_s = idle_poll_s
        self.health = health
        self.book = book
        self.place = place
        self.window_plan = WindowPlan()  # flexible windows spread to fit a limit's rate
        # A burst starts with a small batch, so its earliest firings are committed (and
        # their handlers start) within milliseconds of the due instant; the batch then
        # doubles while the burst lasts, up to `batch`, for throughput.
        self.first_batch = min(FIRST_BATCH, batch)
        self._limit = self.first_batch
        self._stopping = asyncio.Event()
        self._last_fired_ms = 0  # wall time of the last pass that claimed anything
        self._warmed_until = 0  # due instants before this were warmed (or fired) already
        self.fired = 0
        self.warmed = 0  # rows read ahead of their due instant
        self.on_fired: Callable[[list[int]], None] | None = None  # lateness probe (bench)

    # the loop ------------------------------------------------------------------------------

    async def run(self) -> None:
        await self.bridge.run(ensure_internal_queues, self.queues)
        backoff = Backoff(health=self.health, component="dispatcher")
        while not self._stopping.is_set():
            seen = self.notifier.version(SCHEDULES_CHANNEL)
            try:
                limit = self._limit
                n, nxt = await self.bridge.run(self._fire_and_peek, limit)
                backoff.reset()  # (also while a backlog keeps the batches full)
                if n:
                    self._last_fired_ms = self.clock.now_ms()
                if n >= limit:
                    self._limit = min(limit * 2, self.batch)
                    continue  # more may be due right now
                self._limit = self.first_batch
            except StoreUnavailable as exc:
                await backoff.wait(log, "dispatcher", exc, self._stopping)
                continue
            if nxt is not None and self._wants_warm_up(nxt):
                await self._warm_up(nxt)
                continue  # time went by: look again what is due
            pause = self.idle_poll_s
            if nxt is not None:
                until = nxt - self.clock.now_ms()
                if until > WARM_LEAD_MS and nxt >= self._warmed_until:
                    until -= WARM_LEAD_MS  # awake when its warm-up may be due
                pause = min(max(until / 1000, 0.0), self.idle_poll_s)
            if pause > 0:
                await first_of(self.notifier.wait(SCHEDULES_CHANNEL, seen, pause),
                               self._stopping.wait())

    def stop(self) -> None:
        self._stopping.set()

    def _wants_warm_up(self, due: int) -> bool:
        now = self.clock.now_ms()
        return (due >= self._warmed_until and now < due <= now + WARM_LEAD_MS
                and now - self._last_fired_ms >= QUIET_MS)

    async def _warm_up(self, due: int) -> None:
        """Read the rows due in [due, due + WARM_SPAN_MS) before `due` (see QUIET_MS). A
        failure is left to the next pass, which meets it and backs off."""
        start, until, read = due, due + WARM_SPAN_MS, 0
        self._warmed_until = until
        while read < WARM_MAX and not self._stopping.is_set() and self.clock.now_ms() < due:
            try:
                n, last = await self.bridge.run(self.store.warm_due, start, until,
                                                WARM_CHUNK)
            except StoreUnavailable:
                return
            read += n
            self.warmed += n
            if n < WARM_CHUNK or last is None:
                return
            start = max(last, start + 1)  # (rows sharing `last` are read twice: cheap)

    # one pass -----------------------------------------------------------------------------

    def _fire_and_peek(self, limit: int) -> tuple[int, int | None]:
        """One pass and, when it emptied what was due, the next due instant: one hop to
        the store thread instead of two."""
        n = self.fire_due(limit)
        return n, (self.store.next_due_at() if n < limit else None)

    def fire_due(self, limit: int | None = None) -> int:
        """Claim, plan and complete one batch (of at most `limit`, default `batch`);
        returns how many schedules were claimed."""
        now = self.clock.now_ms()
        with self.store.firing_pass(now, limit or self.batch, self.claim_ms) as firing_pass:
            claimed = firing_pass.schedules
            if not claimed:
                return 0
            batch = _Batch(now, {})
            planned = [self._plan(s, batch) for s in claimed]
            if self.book is not None and "queue" in self.book.names:
                hold_limited(self.book, self.store, self.window_plan, claimed, planned, now)
            if self.book is not None and self.book.names - {"queue"}:
                pace_deliveries(self.book, self.window_plan, self.place, claimed, planned,
                                now)
            held = firing_pass.complete([p.firing for p in planned], self.clock.now_ms())
        committed = self.clock.now_ms()  # lateness counts until the firing is durable
        lateness: list[int] = []
        touched: set[int] = set()
        fired_by_kind: dict[str, int] = {}
        in_target_by_kind: dict[str, int] = {}
        skipped = held_back = 0
        past_window: dict[str, int] = {}
        for (firing, due, delivered, limited, _, past), schedule, ok in zip(
                planned, claimed, held, strict=True):
            if not ok:
                log.warning("schedule %s/%s changed or fired elsewhere while this pass planned "
                            "it; this pass did not fire it",
                            schedule.group, schedule.name)
                continue
            if firing.fired:
                kind = schedule.spec.target.kind.value
                fired_by_kind[kind] = fired_by_kind.get(kind, 0) + 1
                if delivered:
                    in_target_by_kind[kind] = in_target_by_kind.get(kind, 0) + 1
                lateness.append(committed - due)
                if past:
                    past_window[kind] = past_window.get(kind, 0) + 1
                for m in firing.messages:
                    touched.add(m.queue_id)
            elif limited:
                held_back += 1
            else:
                skipped += 1
        if held_back:
            metrics.LIMIT_HELD_FIRINGS.labels("queue").inc(held_back)
        for kind, count in past_window.items():
            metrics.LIMIT_PAST_WINDOW.labels(kind).inc(count)
        metrics.LATENESS.observe_many([max(late, 0) / 1000 for late in lateness])
        for kind, count in fired_by_kind.items():  # one increment per batch, not per firing
            metrics.FIRED.labels(kind).inc(count)
        # (the others are counted where they are delivered, or fail)
        for kind, count in in_target_by_kind.items():
            metrics.DELIVERED.labels(kind).inc(count)
        if skipped:
            metrics.SKIPPED.inc(skipped)
        for queue_id in touched:
            self.notifier.notify(queue_channel(queue_id))
        self.fired += len(lateness)
        if self.on_fired is not None and lateness:
            self.on_fired(lateness)
        return len(claimed)

    def _queue(self, batch: _Batch, name: str) -> QueueRecord | None:
        if name not in batch.queues:
            try:
                batch.queues[name] = self.store.get_queue(name)
            except QueueNotFound:
                batch.queues[name] = None
        return batch.queues[name]

    def _plan(self, s: Schedule, batch: _Batch) -> Planned:
        spec, now = s.spec, batch.now
        occurrence = s.next_fire_at
        assert occurrence is not None  # a claimed row has one (CHECK constraint)
        window = spec.flexible_window_minutes

        def due_of(at: int) -> int:
            return at + flex_offset_ms(spec.group, spec.name, at, window)

        fire_at = occurrence
        # A one-shot's only occurrence is the one claimed: its at() needs no parsing here.
        if not one_time(spec.expression):
            trigger = schedule_trigger(spec, s.created_at)
            steps = 0
            nxt = trigger.next_fire_after(fire_at)
            while nxt is not None and due_of(nxt) <= now and steps < MAX_CATCH_UP_STEPS:
                fire_at, nxt = nxt, trigger.next_fire_after(nxt)
                steps += 1
            max_age = spec.target.retry_policy.maximum_event_age_s * 1000
            fired = now - due_of(fire_at) <= max_age
        else:
            nxt, fired = None, True
        kind = target_of(spec.target)
        messages = self._messages(s, kind, fire_at, batch) if fired else []
        delete = nxt is None and spec.action_after_completion is ActionAfterCompletion.DELETE
        # Delivered by this firing itself: written into its target queue (not into the DLQ,
        # nor handed to the delivery queue because the queue is missing).
        target_queue = (batch.queues.get(spec.target.destination)
                        if kind.writes_queue
                        and spec.target.destination not in INTERNAL_QUEUES else None)
        in_target = bool(messages) and target_queue is not None \
            and messages[0].queue_id == target_queue.id
        # The firing history: what this firing's outcome is, when it is known now (a
        # delivery through the delivery queue records its own when it ends); none for a
        # firing that deletes its schedule, whose history no page could show.
        outcome = None
        if delete:
            pass
        elif not fired:
            outcome = outcome_row(s.id, fire_at, now, Outcome.SKIPPED, 0,
                                  "older than the maximum event age")
        elif in_target:  # the usual case
            outcome = FiringOutcome(s.id, fire_at, now, DELIVERED, 1, None)
        elif s.id in batch.refused:
            outcome = outcome_row(s.id, fire_at, now, Outcome.DEAD_LETTERED if messages
                                  else Outcome.DROPPED, 1, batch.refused[s.id])
        firing = Firing(s.id, occurrence, nxt, None if nxt is None else due_of(nxt), delete,
                        fired, messages, outcome)
        return Planned(firing, due_of(fire_at), in_target,
                       window_end=None if window is None else fire_at + window * 60_000)

    def _context(self, s: Schedule, fire_at: int) -> FiringContext:
        spec = s.spec
        return FiringContext.of(s.id, s.created_at, spec.group, spec.name, fire_at,
                                self.schedules.schedule_arn(spec.group, spec.name))

    def _messages(self, s: Schedule, kind: Target, fire_at: int,
                  batch: _Batch) -> list[TargetMessage]:
        target = s.spec.target
        if kind.writes_queue:
            text = target.input or "{}"
            # The engine's own queues take no client's messages: such a target (only one
            # stored before they were refused at creation) goes the delivery path, which
            # refuses it and dead-letters the event with the reason.
            queue = (None if target.destination in INTERNAL_QUEUES
                     else self._queue(batch, target.destination))
            # The usual firing (a standard queue, an input without context attributes)
            # needs no context: its execution id (a SHA-1) would only be a FIFO dedup id.
            ctx = (None if queue is not None and not queue.attributes.fifo
                   and "<aws.scheduler." not in text else self._context(s, fire_at))
            body = text if ctx is None else render_input(text, ctx, 1)
            if queue is not None:
                try:
                    return [self._message(queue, body, target.message_group_id,
                                          None if ctx is None else ctx.execution_id,
                                          batch.now, scheduled_at=fire_at)]
                except ValidationError as exc:
                    error = ("InvalidParameterValue", str(exc))
                return self._dead_letter(s, ctx or self._context(s, fire_at), body, error,
                                         batch)
            # EventBridge Scheduler checks a target when it invokes it: a queue missing now
            # fails this invocation, and the delivery queue retries it by the target's retry
            # policy (the queue may appear meanwhile) before dead-lettering it.
            return self._delivery(s, kind, delivery_job(self._context(s, fire_at), target,
                                                        text), batch)
        ctx = self._context(s, fire_at)
        delivery = delivery_job(ctx, target, render_input(target.input, ctx, None)
                                if target.input else None)
        return self._delivery(s, kind, delivery, batch)

    def _delivery(self, s: Schedule, kind: Target, job: dict[str, Any],
                  batch: _Batch) -> list[TargetMessage]:
        job["schedule_id"] = s.id  # where the delivery records its outcome
        queue = self._queue(batch, kind.delivery_queue)
        assert queue is not None, "the dispatcher creates the delivery queues at start"
        return [self._message(queue, json.dumps(job), None, None, batch.now)]

    def _dead_letter(self, s: Schedule, ctx: FiringContext, body: str,
                     error: tuple[str, str], batch: _Batch) -> list[TargetMessage]:
        """A queue target that cannot take the message: the schedule's DLQ gets it (in the
        same transaction), or it is dropped with a log line and a metric."""
        metrics.FAILED.labels("queue").inc()
        batch.refused[s.id] = f"{error[0]}: {error[1]}"
        dlq_name = s.spec.target.dead_letter_queue
        dlq = self._queue(batch, dlq_name) if dlq_name else None
        metrics.DEAD_LETTERED.labels("queue").inc()
        if dlq is None:
            log.error("schedule %s/%s: %s; no dead-letter queue, dropped", s.group, s.name,
                      error[1])
            return []
        attrs = dead_letter_attributes(ctx, s.spec.target, error[0], error[1], attempts=1,
                                       exhausted="MaximumRetryAttempts")
        return [self._message(dlq, body, None, None, batch.now, attrs)]

    def _message(self, queue: QueueRecord, body: str, group_id: str | None,
                 dedup: str | None, now: int,
                 attributes: dict[str, MessageAttributeValue] | None = None, *,
                 scheduled_at: int | None = None) -> TargetMessage:
        return TargetMessage(queue.id, queue.attributes.fifo, self.queues.ops.new_message(
            queue, body, now=now, group_id=group_id, deduplication_id=dedup,
            attributes=attributes, scheduled_at=scheduled_at))
