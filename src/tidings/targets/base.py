"""Targets as a contract: what one kind of target is (`Target`), and the registry that maps
a target's kind to it.

A schedule stores one target's settings (`tidings.model.schedules.Target`, a record: the
kind, a destination, an input, a retry policy). What a kind *does* with those settings
lives in one class per kind (`queue.py`, `webhook.py`, `function.py`, `email.py`) that
implements the `Target` protocol below and is registered in `registry.py`. Every other
place (the dispatcher, the deliveries, schedule validation, the AWS Scheduler adapter, the
native API) asks the registry, so a new kind is one class and one registration, not an
`if kind == …` in each of those modules. How to add one: docs/architecture.md, "Targets:
the contract".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, Protocol

from tidings.model.email import EmailMessage
from tidings.model.firings import FiringContext
from tidings.model.queues import QueueRecord
from tidings.model.schedules import Target as TargetSpec
from tidings.model.schedules import TargetKind
from tidings.queues.service import QueueService
from tidings.runtime.bridge import Bridge
from tidings.store.base import EmailStore

#: A function target may route to another target, which may route again: a bound on loops.
MAX_ROUTE_DEPTH = 4


class DeliveryError(Exception):
    """A target did not accept a delivery."""

    def __init__(self, code: str, message: str, *, retryable: bool = True,
                 retry_after_s: float | None = None, hold_key: str | None = None,
                 paced: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable
        #: The target pushed back (HTTP 429 or 503 with Retry-After, an SMTP relay's
        #: "slow down"): wait this long, and do not count the attempt (downstream
        #: limits, issue 33).
        self.retry_after_s = retry_after_s
        #: The limit key the push-back pauses on every node (`webhook:<host>`,
        #: `email-domain:<domain>`); None: the job's own limit keys; "": none, only this job.
        self.hold_key = hold_key
        #: Held by a schedule of our own making (an email warm-up's daily cap), not by
        #: the downstream: the wait may pass the retry policy's maximum event age, since
        #: the mail was never refused.
        self.paced = paced


@dataclass(frozen=True)
class Suppress:
    """Returned by a function target: deliver nothing (recorded as suppressed)."""

    reason: str = ""


@dataclass(frozen=True)
class Route:
    """Returned by a function target: deliver to this target instead (a queue name, or a
    `Target`), optionally with a new input."""

    target: Any
    input: Any = None


class Attempt(NamedTuple):
    """One attempt at delivering one firing: its target, its rendered input, who fired it,
    the attempt's number (1-based) and how many function routes led here."""

    target: TargetSpec
    body: str
    ctx: FiringContext
    attempt: int
    depth: int = 0


#: One outcome per attempt of a batch, in order: the outcome's word ("delivered",
#: "suppressed", "queued", "duplicate") or the DeliveryError that failed that attempt.
Outcomes = list[str | DeliveryError]


class UrlGuard(Protocol):
    """What refuses a webhook URL at creation (`targets.guard.WebhookGuard`)."""

    def check_url(self, url: str, field: str = ...) -> None: ...


@dataclass(slots=True)
class TargetChecks:
    """What checking a target's settings may consult, and the rules of this call.

    `must_exist=False` is EventBridge Scheduler's rule (the Scheduler API): what a target
    names (a queue, an email's template) is looked up only when a firing delivers to it.
    `known_templates` remembers templates found already, so a bulk creation looks each up
    once."""

    store: EmailStore  # the templates an email target names
    queue_lookup: Callable[[str], QueueRecord]
    webhook_guard: UrlGuard
    sender_check: Callable[[EmailMessage], None] | None = None
    must_exist: bool = True
    known_templates: set[str] | None = None


class Poster(Protocol):
    """What posts a webhook (`targets.webhook.WebhookSender`)."""

    async def send(self, target: TargetSpec, body: str, ctx: FiringContext,
                   attempt: int) -> int: ...

    async def close(self) -> None: ...


class Mailer(Protocol):
    """What sends an email delivery (`targets.email.EmailDelivery`)."""

    relay: str | None

    async def deliver(self, target: TargetSpec, body: str, ctx: FiringContext,
                      attempt: int) -> str: ...

    async def gave_up(self, ctx: FiringContext, failure: DeliveryError,
                      attempts: int) -> None: ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class Reach:
    """What one node delivers with, built once by the node (`jobs.deliveries.Targets`) and
    handed to every kind's `deliver`: the kinds themselves hold no state, so the
    questions asked of them when nothing is delivered (validation, the AWS adapter, the
    dispatcher's routing) need no node."""

    registry: TargetRegistry
    queues: QueueService
    bridge: Bridge
    functions: Mapping[str, Callable[..., Any]]
    webhooks: Poster
    email: Mailer | None = None

    async def deliver(self, attempt: Attempt) -> str:
        """One attempt to whichever kind its target is (a function's route goes here);
        raises its DeliveryError."""
        if attempt.depth > MAX_ROUTE_DEPTH:
            raise DeliveryError("RouteLoop", "function targets routed more than "
                                f"{MAX_ROUTE_DEPTH} times", retryable=False)
        (outcome,) = await self.registry.of(attempt.target).deliver([attempt], self)
        if isinstance(outcome, DeliveryError):
            raise outcome
        return outcome


#: The limit names of schedule targets (docs/limits.md): `queue:<name>`,
#: `webhook:<host>`, `function:<name>`, `smtp:<relay host>`, `email-domain:<domain>`.
TARGET_LIMITS = ("queue", "webhook", "function", "smtp", "email-domain")


class LimitPlace(NamedTuple):
    """What the node delivering knows that a target's limit keys may name."""

    smtp_relay: str | None = None  # the host of TIDINGS_SMTP_URL


class Target(Protocol):
    """One kind of target: the rules every schedule, delivery and face asks of it.

    The flags are facts about the kind that callers branch on, so none of them names a
    kind; the methods take one target's settings (`TargetSpec`)."""

    kind: ClassVar[TargetKind]
    #: A firing writes its message into a tidings queue (the destination) in the firing's
    #: own transaction; the other kinds travel as delivery jobs of `delivery_queue`.
    writes_queue: ClassVar[bool]
    #: The internal queue its delivery jobs travel in (tidings.model.queues).
    delivery_queue: ClassVar[str]
    #: Its check reads the input (email: one document per recipient), so a bulk creation
    #: checks every schedule's target instead of one verdict per distinct destination,
    #: and a check's complaint about an unprefixed field is about the input.
    checks_input: ClassVar[bool]
    #: Each delivery has a row in the email delivery log (the console lists them).
    logs_deliveries: ClassVar[bool]
    #: The limit names whose key it reads from each firing's input (email: the first
    #: recipient's domain), not from its destination: the forecast reads those inputs.
    input_limits: ClassVar[tuple[str, ...]]
    #: Made from plain fields (kind, destination, input) by the native API and the CLI;
    #: email targets are made from a SendEmail document by the email service instead.
    native_fields: ClassVar[bool]

    def validate(self, target: TargetSpec, checks: TargetChecks) -> bool:
        """Raise ValidationError (naming the field) if a schedule may not have it. False:
        what it names is not there yet and `checks.must_exist` is False, so the check is
        left to the first delivery, with the rest of what the target names (its DLQ)."""
        ...

    def limit_keys(self, target: TargetSpec, body: str | None, place: LimitPlace,
                   wanted: Container[str]) -> dict[str, str]:
        """The downstream limits a firing or delivery to it counts against, each a limit's
        name (one of TARGET_LIMITS) → its key's value (the key is `name:value`): the
        queue, the webhook's host, the function, the node's SMTP relay and the recipient's
        domain. Only the names in `wanted` (those a limit or pause exists for) are worked
        out: a delivery nothing limits parses nothing. `body`: the rendered input."""
        ...

    def aws_arn(self, target: TargetSpec, region: str, account: str) -> str:
        """The ARN the AWS Scheduler API names it by, for a target made natively."""
        ...

    async def deliver(self, batch: Sequence[Attempt], reach: Reach) -> Outcomes:
        """Deliver a batch of attempts (targets of this kind); one outcome each. Only an
        error that is no delivery's own (the store unavailable) is raised."""
        ...

    async def gave_up(self, attempt: Attempt, failure: DeliveryError, reach: Reach) -> None:
        """Told when a delivery is abandoned (its retry policy ran out)."""
        ...


class TargetRegistry:
    """Kind → the `Target` that implements it. The built-in kinds are registered in
    `tidings.targets.registry`, which every caller imports."""

    def __init__(self, targets: Iterable[Target] = ()) -> None:
        self._by_kind: dict[str, Target] = {}
        for target in targets:
            self.register(target)

    def register(self, target: Target) -> None:
        self._by_kind[target.kind] = target

    def of(self, target: TargetSpec) -> Target:
        """The kind of `target` (one dict lookup: the dispatcher asks once per firing)."""
        return self._by_kind[target.kind]

    def get(self, kind: str) -> Target:
        return self._by_kind[kind]

    def kinds(self) -> tuple[Target, ...]:
        return tuple(self._by_kind.values())


async def one_by_one(batch: Sequence[Attempt],
                     deliver: Callable[[Attempt], Awaitable[str]]) -> Outcomes:
    """A batch delivered one attempt after another, each failure kept as its outcome."""
    out: Outcomes = []
    for attempt in batch:
        try:
            out.append(await deliver(attempt))
        except DeliveryError as exc:
            out.append(exc)
    return out
