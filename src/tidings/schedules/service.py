"""The schedule service: EventBridge Scheduler semantics over any store.

Rules (documented for users in docs/schedules.md):
- The first occurrence of a recurring schedule is the first one at or after creation
  (or StartDate); an `at()` in the past fires as soon as it is created, since a one-shot
  that silently never fired would be worse than a late one.
- A flexible window moves each occurrence to a pseudo-random instant inside
  [occurrence, occurrence + window): a hash of (group, name, occurrence), so it is stable
  across restarts and nodes, and uniform across many schedules due at the same time.
- Update is a full replace, as in AWS: omitted optional fields fall back to defaults.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass, replace
from typing import Any, Protocol

from tidings.clock import Clock
from tidings.errors import (
    ConflictError,
    GroupNotFound,
    ScheduleNotFound,
    TidingsError,
    ValidationError,
)
from tidings.model.email import EmailMessage
from tidings.model.paging import compound_after, compound_token
from tidings.model.queues import INTERNAL_QUEUES, QueueRecord, check_range
from tidings.model.schedules import (
    DEFAULT_GROUP,
    Schedule,
    ScheduleSpec,
    ScheduleState,
)
from tidings.notify.base import (
    SCHEDULES_CHANNEL,
    WAKE_HORIZON_MS,
    Notifier,
    wakes_dispatchers,
)
from tidings.queues.service import named_queue
from tidings.runtime.bridge import bulk_writer
from tidings.schedules.groups import ScheduleGroups
from tidings.store.base import EmailStore, NewSchedule, QueueStore, ScheduleStore, StoreRuntime
from tidings.targets.base import TargetChecks
from tidings.targets.email_target import check_email_target
from tidings.targets.guard import WebhookGuard
from tidings.targets.registry import target_of
from tidings.triggers import Trigger
from tidings.triggers import schedule_trigger as parsed_trigger


class ScheduleServiceStore(EmailStore, QueueStore, ScheduleStore, StoreRuntime, Protocol):
    """What this module asks of the store: the schedules, the queues and templates their
    targets name, and how the store runs."""


def schedule_trigger(spec: ScheduleSpec, created_at: int) -> Trigger:
    """The schedule's parsed trigger (`triggers.schedule_trigger`, cached by expression)."""
    return parsed_trigger(spec.expression, spec.timezone, spec.start_ms, spec.end_ms, created_at)


def flex_offset_ms(group: str, name: str, occurrence: int, window_minutes: int | None) -> int:
    if not window_minutes:
        return 0
    digest = hashlib.blake2b(f"{group}/{name}/{occurrence}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % (window_minutes * 60_000)


def first_occurrence(trigger: Trigger, now: int) -> int | None:
    if not trigger.recurring:
        return trigger.next_fire_after(-(2**62))  # an at() in the past still fires, once
    return trigger.next_fire_after(now - 1)


@dataclass(slots=True)
class CreateResult:
    """One item's outcome in `create_many` (not frozen: bulk creation makes millions, and a
    frozen dataclass's __init__ costs several times more)."""

    index: int
    name: str
    group: str
    created: bool  # False: it already existed (left untouched)
    error: TidingsError | None = None


Placed = tuple[int, ScheduleSpec] | CreateResult


class ScheduleService(ScheduleGroups):
    store: ScheduleServiceStore

    def __init__(self, store: ScheduleServiceStore, clock: Clock, notifier: Notifier, *,
                 arn_prefix: str = "arn:aws:scheduler:us-east-1:000000000000",
                 queue_lookup: Callable[[str], QueueRecord] | None = None,
                 webhook_guard: WebhookGuard | None = None,
                 sender_check: Callable[[EmailMessage], None] | None = None,
                 wake_horizon_ms: int = WAKE_HORIZON_MS) -> None:
        """`webhook_guard` refuses, at creation, webhook URLs that name an address
        webhooks may not reach (its deliveries check again after resolving);
        `sender_check` refuses email targets whose From is not a verified identity;
        schedules due within `wake_horizon_ms` wake the dispatchers."""
        self.store = store
        self.wake_horizon_ms = wake_horizon_ms
        self.sender_check = sender_check
        self.webhook_guard = webhook_guard or WebhookGuard(enabled=False)
        self.clock = clock
        self.notifier = notifier
        self.arn_prefix = arn_prefix
        # How a queue target is checked: the queue service's short-lived record cache
        # spares a read per schedule created one call at a time.
        self.queue_lookup = queue_lookup or store.get_queue

    def schedule_arn(self, group: str, name: str) -> str:
        return f"{self.arn_prefix}:schedule/{group}/{name}"

    # schedules --------------------------------------------------------------------------

    def _check_target(self, spec: ScheduleSpec,
                      known_templates: set[str] | None = None, *,
                      target_must_exist: bool = True) -> None:
        target = spec.target
        if not target_of(target).validate(target, TargetChecks(
                self.store, self.queue_lookup, self.webhook_guard, self.sender_check,
                target_must_exist, known_templates)):
            return  # left to the first delivery, with what else it names
        if target.dead_letter_queue is not None:
            if target.dead_letter_queue in INTERNAL_QUEUES:
                raise ValidationError("Target.DeadLetterConfig.Arn",
                                      f"queue {target.dead_letter_queue!r} is tidings' own")
            dlq = named_queue(self.store, target.dead_letter_queue,
                              "Target.DeadLetterConfig.Arn")
            if dlq.attributes.fifo:
                raise ValidationError("Target.DeadLetterConfig.Arn",
                                      "must be a standard queue (FIFO is not supported)")

    def _row(self, spec: ScheduleSpec, now: int, created_at: int) -> NewSchedule:
        trigger = schedule_trigger(spec, created_at)
        occurrence = first_occurrence(trigger, now)
        due = None
        if occurrence is not None and spec.state is ScheduleState.ENABLED:
            due = occurrence + flex_offset_ms(spec.group, spec.name, occurrence,
                                              spec.flexible_window_minutes)
        return NewSchedule(spec, occurrence, due)

    def create(self, spec: ScheduleSpec, *, connection: Any = None,
               target_must_exist: bool = True) -> Schedule:
        """`connection`: the application's own PostgreSQL connection, whose transaction
        the schedule then commits or rolls back with. `target_must_exist=False` is
        EventBridge Scheduler's rule (the Scheduler API): what a target names (a queue
        target's queue, an email target's template) is only looked up when a firing
        delivers to it; the shape of the target and its input is still checked now."""
        spec = spec.validated()
        now = self.clock.now_ms()
        self._check_target(spec, target_must_exist=target_must_exist)
        row = self._row(spec, now, now)
        made = self.store.create_schedule(row, now, connection)
        if made is None:
            self.store.get_group(spec.group)  # GroupNotFound, or the name is taken:
            try:
                existing = self.store.get_schedule(spec.group, spec.name)
            except ScheduleNotFound:  # taken, then deleted (a one-shot that fired)
                raise ConflictError(f"Schedule {spec.name} already exists.") from None
            if spec.client_token and existing.spec.client_token == spec.client_token:
                return existing  # the same request retried: idempotent
            raise ConflictError(f"Schedule {spec.name} already exists.")
        self._wake(row.due_at, now)
        return made

    def create_many(self, specs: Iterable[ScheduleSpec], *, chunk: int = 5000,
                    ) -> Iterator[CreateResult]:
        """Bulk creation: validates each item, reports per-item errors, never aborts the
        batch; existing names are left untouched (so a re-run resumes, creating nothing
        twice). Results are yielded per chunk, in input order.

        Pipelined on PostgreSQL: while the store writes one chunk (in its own thread; the
        database works in its own process), the next chunk is validated here. On SQLite
        the chunks are written inline (`bulk_writer` says why).
        """
        checked: dict[str, ValidationError | None] = {}
        templates: set[str] = set()
        with bulk_writer(self.store.max_concurrency) as writer:
            pending: tuple[Future[list[bool]], Sequence[Placed], bool] | None = None
            batch: list[tuple[int, ScheduleSpec]] = []
            for item in enumerate(specs):
                batch.append(item)
                if len(batch) >= chunk:
                    nxt = self._prepare_chunk(batch, checked, templates, writer)
                    if pending is not None:
                        yield from self._finish_chunk(*pending)
                    pending, batch = nxt, []
            if batch:
                nxt = self._prepare_chunk(batch, checked, templates, writer)
                if pending is not None:
                    yield from self._finish_chunk(*pending)
                pending = nxt
            if pending is not None:
                yield from self._finish_chunk(*pending)

    def _prepare_chunk(self, batch: list[tuple[int, ScheduleSpec]],
                       checked: dict[str, ValidationError | None], templates: set[str],
                       writer: Executor,
                       ) -> tuple[Future[list[bool]], Sequence[Placed], bool]:
        now = self.clock.now_ms()
        rows: list[NewSchedule] = []
        placed: list[Placed] = []
        seen: dict[int, str] = {}  # id(target) → key, for this chunk (its specs keep them alive)
        for index, spec in batch:
            try:
                spec = spec.validated()
                # Targets are checked once per distinct target, not once per schedule: a
                # fan-out of a million rows usually names one queue.
                if target_of(spec.target).checks_input:
                    # Each recipient's document is its own: parsed every time (cheap); only
                    # the template lookups are remembered, so the cache stays small.
                    self._check_target(spec, templates)
                else:
                    # Most specs of a bulk creation share one Target object: look it up by
                    # identity first, by content only for a target not seen yet.
                    key = seen.get(id(spec.target)) or seen.setdefault(
                        id(spec.target), self._target_key(spec))
                    if key not in checked:
                        try:
                            self._check_target(spec)
                            checked[key] = None
                        except ValidationError as exc:
                            checked[key] = exc
                    failure = checked[key]
                    if failure is not None:
                        raise failure
                rows.append(self._row(spec, now, now))
                placed.append((index, spec))
            except TidingsError as exc:
                placed.append(CreateResult(index, getattr(spec, "name", ""),
                                           getattr(spec, "group", ""), False, exc))
        wake = any(wakes_dispatchers(r.due_at, now, self.wake_horizon_ms) for r in rows)
        return writer.submit(self.store.insert_schedules, rows, now), placed, wake

    def _finish_chunk(self, future: Future[list[bool]], placed: Sequence[Placed],
                      wake: bool) -> list[CreateResult]:
        try:
            inserted = iter(future.result())
        except GroupNotFound as exc:
            return [p if isinstance(p, CreateResult) else
                    CreateResult(p[0], p[1].name, p[1].group, False, exc) for p in placed]
        out = []
        for p in placed:
            if isinstance(p, CreateResult):
                out.append(p)
            else:
                out.append(CreateResult(p[0], p[1].name, p[1].group, next(inserted)))
        if wake:
            self.notifier.notify(SCHEDULES_CHANNEL)
        return out

    @staticmethod
    def _target_key(spec: ScheduleSpec) -> str:
        t = spec.target
        return f"{t.kind}|{t.destination}|{t.dead_letter_queue}|{t.message_group_id}"

    def get(self, name: str, group: str = DEFAULT_GROUP) -> Schedule:
        return self.store.get_schedule(group, name)

    def list(self, *, group: str | None = None, prefix: str = "", state: str | None = None,
             limit: int = 100, next_token: str | None = None,
             ) -> tuple[list[Schedule], str | None]:
        check_range("MaxResults", limit, 1, 1000)
        if state is not None and state not in ("ENABLED", "DISABLED"):
            raise ValidationError("State", "must be ENABLED or DISABLED")
        after = None
        if next_token:
            parts = compound_after(next_token)
            if len(parts) != 2:
                raise ValidationError("NextToken", "is not a token this API returned")
            after = (parts[0], parts[1])
        rows = self.store.list_schedules(group, prefix, state, after, limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        return rows, (compound_token([rows[-1].group, rows[-1].name]) if more else None)

    def update(self, spec: ScheduleSpec, *, target_must_exist: bool = True) -> Schedule:
        """Full replace (AWS UpdateSchedule): the next occurrence is recomputed from now."""
        spec = spec.validated()
        existing = self.store.get_schedule(spec.group, spec.name)
        self._check_target(spec, target_must_exist=target_must_exist)
        spec = replace(spec, client_token=existing.spec.client_token)
        now = self.clock.now_ms()
        row = self._row(spec, now, existing.created_at)
        updated = self.store.replace_schedule(row, now)
        self._wake(row.due_at, now)
        return updated

    def put(self, spec: ScheduleSpec) -> Schedule:
        """Create or replace: what a setup script re-run, or an app declaring its
        periodic jobs at every start, wants. A schedule already stored as given is left
        untouched (its next occurrence is not recomputed), so N nodes starting together
        agree and nothing fires twice."""
        try:
            return self.create(spec)
        except ConflictError:
            pass
        try:
            existing = self.store.get_schedule(spec.group, spec.name)
        except ScheduleNotFound:  # deleted in between: create it again
            return self.create(spec)
        if replace(existing.spec, client_token=None) == replace(spec.validated(),
                                                                client_token=None):
            return existing
        return self.update(spec)

    def set_state(self, name: str, state: ScheduleState, group: str = DEFAULT_GROUP) -> Schedule:
        existing = self.store.get_schedule(group, name)
        return self.update(replace(existing.spec, state=ScheduleState(state)))

    def delete(self, name: str, group: str = DEFAULT_GROUP) -> None:
        self.store.delete_schedule(group, name)

    def _wake(self, due_at: int | None, now: int) -> None:
        """A schedule due soon must not wait for the dispatcher's current sleep."""
        if wakes_dispatchers(due_at, now, self.wake_horizon_ms):
            self.notifier.notify(SCHEDULES_CHANNEL)


__all__ = ["ScheduleService", "CreateResult", "ScheduleNotFound", "check_email_target",
           "flex_offset_ms"]
