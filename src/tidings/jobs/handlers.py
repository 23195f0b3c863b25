"""Your application as tidings sees it: job handlers by type, function targets, the queues
it consumes (declared with their attributes and dead-letter queues), and how jobs are
recognised.

A message is a job when its body is JSON `{"type": …, "id": …, …}`. A job's identity (its
key) is `type:id` on its queue; a job fired by a schedule whose id does not name the
occurrence is also told apart by the occurrence (`type:id@<scheduled time>`), so a
recurring schedule's job runs at every occurrence while retries of one occurrence are
still recognised; `"once": true` in the body says the id alone is the identity (a task
sent for later through a one-shot schedule runs once per id, like one sent now). A message
that can never succeed (not JSON, no type, a type no handler on its queue takes) is
poison: by default it goes to the dead-letter queue at once.
"""

from __future__ import annotations

import functools
import inspect
import json
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from tidings.clock import iso
from tidings.errors import ValidationError
from tidings.model.limits import Limit, LimitSetting
from tidings.model.queues import QueueAttributes, RedrivePolicy

Handler = Callable[["Job"], Any]

@dataclass(frozen=True, slots=True)
class Job:
    """What a handler receives."""

    id: str
    type: str
    payload: dict[str, Any]
    queue: str
    attempt: int  # 1 on the first delivery
    message_id: str
    sent_at: int
    scheduled_time: str | None = None  # set when a schedule fired it: its occurrence

    @property
    def key(self) -> str:
        """The job's identity on its queue: what runs to success at most once."""
        base = f"{self.type}:{self.id}"
        if (self.scheduled_time is None or self.scheduled_time in self.id
                or self.payload.get("once") is True):
            return base
        return f"{base}@{self.scheduled_time}"


def occurrence_text(ms: int) -> str:
    """An occurrence as AWS prints a scheduled time (`2026-12-01T02:00:00Z`), with its
    milliseconds when it has any."""
    return iso(ms).replace(".000Z", "Z")


class PoisonMessage(Exception):
    """A message that can never succeed as a job: retrying cannot help."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class JobMessage(Protocol):
    """What a job is read from: a received message, as the API or a consumer holds it."""

    @property
    def message_id(self) -> str: ...
    @property
    def body(self) -> str: ...
    @property
    def receive_count(self) -> int: ...
    @property
    def sent_at(self) -> int: ...
    @property
    def scheduled_at(self) -> int | None: ...


_decode = json.JSONDecoder().raw_decode


def _json(body: str) -> Any:
    # `raw_decode` reads the value a body starts with: for a small object it costs a third
    # of `json.loads` (no whitespace regexes around it). Anything but a bare JSON value
    # filling the whole body (whitespace, trailing text, bad JSON) takes `json.loads`,
    # which accepts or rejects it exactly as it always did.
    try:
        value, end = _decode(body)
    except ValueError:
        end = -1
    return value if end == len(body) else json.loads(body)


def parse_job(queue: str, msg: JobMessage) -> Job:
    try:
        payload = _json(msg.body)
    except json.JSONDecodeError:
        raise PoisonMessage("NotAJob", "the body is not JSON: a job is "
                            '{"type": …, "id": …}') from None
    except RecursionError:
        # JSON nested deeper than the interpreter's stack: raised out of the poller, it
        # ended the queue's receiving on every node that took the message.
        raise PoisonMessage("NotAJob", "the body is JSON nested too deep to read") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("type"), str):
        raise PoisonMessage("NotAJob", "a job body is a JSON object with a string type")
    job_id = payload.get("id")
    scheduled_at = msg.scheduled_at
    return Job(str(job_id) if job_id is not None else msg.message_id, payload["type"],
               payload, queue, msg.receive_count, msg.message_id, msg.sent_at,
               None if scheduled_at is None else occurrence_text(scheduled_at))


@dataclass(frozen=True, slots=True)
class BoundLimit:
    """A declared `Limit` on one handler: its name, and how a job gives its key's value
    (None: one key, the name, for every job)."""

    name: str
    value_of: Callable[[Job], Any] | None
    declared: Limit

    def key(self, job: Job) -> str | None:
        """`name`, or `name:value`; None when the job has no value for it (a limit keyed
        per tenant does not hold back a job without a tenant)."""
        if self.value_of is None:
            return self.name
        try:
            value = self.value_of(job)
        except Exception:  # noqa: BLE001 - a job the callable cannot read: not limited here
            return None
        return None if value is None else f"{self.name}:{value}"


def _read(value_of: Callable[[Job, Any], Any], key: Any, job: Job) -> Any:
    return value_of(job, key)


Limits = Limit | list[Limit] | tuple[Limit, ...] | None


def body_field(job: Job, key: str | Callable[..., Any]) -> Any:
    """A handler's limit key: a field of the job body, or a callable of the body."""
    return key(job.payload) if callable(key) else job.payload.get(key)


def bind_limits(limits: Limits, default_name: str,
                value_of: Callable[[Job, str | Callable[..., Any]], Any] = body_field,
                ) -> tuple[BoundLimit, ...]:
    declared = [limits] if isinstance(limits, Limit) else list(limits or ())
    bound: dict[str, BoundLimit] = {}
    for limit in declared:
        if not isinstance(limit, Limit):
            raise ValidationError("limit", "a tidings.Limit, or a list of them")
        name = limit.name or default_name
        if name in bound:
            raise ValidationError("limit", f"two limits named {name!r}: give each a name=")
        key = limit.key
        reader = None if key is None else functools.partial(_read, value_of, key)
        bound[name] = BoundLimit(name, reader, limit)
    return tuple(bound.values())


@dataclass(frozen=True)
class Registration:
    job_type: str
    queue: str
    fn: Handler
    is_async: bool
    limits: tuple[BoundLimit, ...] = ()


@dataclass(frozen=True)
class QueueDeclaration:
    """A queue the app consumes, as it should be created: `attributes` are QueueAttributes'
    names (visibility_timeout_s, retention_s, delay_s, …); `dead_letter_queue` (None: no
    DLQ) receives what failed `max_receive_count` times, and poison messages at once."""

    name: str
    attributes: dict[str, Any] = field(default_factory=dict)
    dead_letter_queue: str | None = None
    max_receive_count: int = 5

    def queue_attributes(self) -> QueueAttributes:
        policy = (RedrivePolicy(self.dead_letter_queue, self.max_receive_count)
                  if self.dead_letter_queue else None)
        return QueueAttributes.build(fifo=self.name.endswith(".fifo"), redrive_policy=policy,
                                     **self.attributes)


def default_dead_letter_queue(name: str) -> str:
    return f"{name[:-5]}-dlq.fifo" if name.endswith(".fifo") else f"{name}-dlq"


@dataclass
class Handlers:
    """What the engine runs of an app: job handlers by queue and type, function targets,
    the queues it consumes and how its jobs are retried. `tidings.App` (tasks, periodic
    jobs, the database its sends go to) is one; the node's own delivery consumers run one
    built in `jobs/deliveries.py`.

    >>> handlers = Handlers(queue="jobs")
    >>> @handlers.handler("invoice.generate")
    ... def generate(job: Job) -> None: ...
    """

    queue: str = "jobs"
    concurrency: int | None = None  # default: Settings.concurrency
    # Received ahead of free slots. Default: what the handlers finish in 0.1 s, at least
    # 4 × concurrency (at most 256), at most 512 (short jobs are received and acknowledged
    # in big batches).
    prefetch: int | None = None
    retry_base_s: float = 1.0
    retry_max_s: float = 900.0
    create_queues: bool = True  # create the queues it consumes (and their DLQs) at start
    #: What a poison message does: "dead-letter" (at once, if the queue has a DLQ) or
    #: "retry" (like a failing job: backoff, then the DLQ after maxReceiveCount).
    poison: Literal["dead-letter", "retry"] = "dead-letter"
    #: Told of the jobs acknowledged without running because their identity already ran
    #: to success (each is also logged and counted): the delivery app writes them into
    #: the firing history, so no delivery is dropped without a trace.
    on_duplicate: Callable[[list[Job]], Awaitable[None]] | None = None
    #: Told of the jobs a limit sent back to their queue to wait (not an attempt): the
    #: delivery app counts them as held firings.
    on_held_back: Callable[[list[Job]], None] | None = None
    handlers: dict[tuple[str, str], Registration] = field(default_factory=dict)
    functions: dict[str, Callable[..., Any]] = field(default_factory=dict)
    declarations: dict[str, QueueDeclaration] = field(default_factory=dict)

    def function(self, name: str | None = None) -> Callable[[Callable[..., Any]],
                                                             Callable[..., Any]]:
        """Register a function target: a schedule with target `function:<name>` calls it
        at the due time (see `tidings.targets.function`)."""

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            key = name or fn.__name__
            if key in self.functions:
                raise ValidationError("function", f"{key!r} is already registered")
            self.functions[key] = fn
            return fn

        return register

    def handler(self, job_type: str, *, queue: str | None = None, limit: Limits = None,
                ) -> Callable[[Handler], Handler]:
        """`limit`: a `tidings.Limit` (or a list): keyed by a field of the job body, or a
        callable of the body."""
        if not job_type:
            raise ValidationError("job_type", "must be a non-empty string")
        return self._handler(job_type, queue, bind_limits(limit, job_type))

    def _handler(self, job_type: str, queue: str | None, limits: tuple[BoundLimit, ...],
                 ) -> Callable[[Handler], Handler]:
        self._check_limits(limits)

        def register(fn: Handler) -> Handler:
            target = queue or self.queue
            if (target, job_type) in self.handlers:
                raise ValidationError("job_type",
                                      f"{job_type!r} already has a handler on queue {target!r}")
            self.handlers[(target, job_type)] = Registration(
                job_type, target, fn, inspect.iscoroutinefunction(fn), limits)
            return fn

        return register

    def declare_queue(self, name: str, *, dead_letter_queue: str | None | Literal[True] = True,
                      max_receive_count: int = 5, **attributes: Any) -> QueueDeclaration:
        """Say how a queue this app consumes is to be created (before `tidings serve`
        starts it): e.g. `app.declare_queue("jobs", visibility_timeout_s=120,
        max_receive_count=3)`. `dead_letter_queue=True` (the default) names it
        `<name>-dlq`; None declares no DLQ. Attributes are validated now."""
        dlq = default_dead_letter_queue(name) if dead_letter_queue is True else dead_letter_queue
        declaration = QueueDeclaration(name, dict(attributes), dlq, max_receive_count)
        declaration.queue_attributes()  # a bad attribute fails at import, not at start
        self.declarations[name] = declaration
        return declaration

    def declaration(self, name: str) -> QueueDeclaration:
        """The queue's declaration; an undeclared queue gets the defaults (a DLQ named
        `<name>-dlq` after 5 receives)."""
        return self.declarations.get(name) or QueueDeclaration(
            name, {}, default_dead_letter_queue(name), 5)

    def _check_limits(self, limits: tuple[BoundLimit, ...]) -> None:
        """Handlers may share a named limit (`Limit(name="partner-api", …)`), declared
        alike by each."""
        for bound in limits:
            for reg in self.handlers.values():
                for other in reg.limits:
                    if other.name == bound.name and (
                            (other.declared.rate, other.declared.concurrency,
                             other.declared.burst) != (bound.declared.rate,
                                                       bound.declared.concurrency,
                                                       bound.declared.burst)):
                        raise ValidationError("limit", f"limit {bound.name!r} is declared "
                                              "twice with different settings")

    def limit_settings(self, now: int) -> list[LimitSetting]:
        """What the app declares, written at its start (`LimitService.declare`)."""
        found = {b.name: b.declared.setting(b.name, now)
                 for reg in self.handlers.values() for b in reg.limits}
        return [s for s in found.values() if s.limits_anything]

    def queues(self) -> list[str]:
        return sorted({r.queue for r in self.handlers.values()})

    def backoff_s(self, attempt: int) -> int:
        """Exponential with "equal jitter": half fixed, half random, so retries of many jobs
        that failed together spread out instead of returning in lockstep."""
        ceiling = min(self.retry_max_s, self.retry_base_s * 2 ** max(attempt - 1, 0))
        return max(int(round(ceiling / 2 + random.uniform(0, ceiling / 2))), 0)
