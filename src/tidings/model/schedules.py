"""Schedules with Amazon EventBridge Scheduler's fields, ranges and defaults.

API reference: https://docs.aws.amazon.com/scheduler/latest/APIReference/API_CreateSchedule.html
A schedule is readable text end to end (expression, zone, dates, a JSON target): no pickled
objects, so it can be read from SQL, the CLI and a dashboard alike.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any, NamedTuple

from tidings.clock import from_ms, to_ms
from tidings.errors import ValidationError
from tidings.model.queues import check_range
from tidings.model.states import ScheduleState as ScheduleState  # re-exported

NAME_RE = re.compile(r"^[0-9a-zA-Z\-_.]{1,64}$")
DEFAULT_GROUP = "default"
MAX_INPUT_CHARS = 8192  # a queue message can be larger; keep Scheduler's own limit


class ActionAfterCompletion(StrEnum):
    NONE = "NONE"
    DELETE = "DELETE"


class TargetKind(StrEnum):
    QUEUE = "queue"  # written into a tidings queue in the firing transaction
    WEBHOOK = "webhook"  # HTTP POST, delivered through the delivery queue with retries
    FUNCTION = "function"  # a registered Python callable ("Lambda before dispatch")
    EMAIL = "email"  # templated email over SMTP


def check_name(field_name: str, value: str) -> str:
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise ValidationError(field_name,
                              "must be 1-64 characters of letters, digits, '-', '_' and '.'")
    return value


@dataclass(frozen=True)
class RetryPolicy:
    maximum_retry_attempts: int = 185
    maximum_event_age_s: int = 86400

    def __post_init__(self) -> None:
        check_range("RetryPolicy.MaximumRetryAttempts", self.maximum_retry_attempts, 0, 185)
        check_range("RetryPolicy.MaximumEventAgeInSeconds", self.maximum_event_age_s, 60, 86400,
                    " seconds")

    @classmethod
    def given(cls, attempts: int | None, max_age_s: int | None) -> RetryPolicy:
        """The policy a request describes: what it leaves out takes AWS's default, never an
        earlier value (an update replaces the whole schedule)."""
        default = DEFAULT_RETRY_POLICY
        return cls(default.maximum_retry_attempts if attempts is None else attempts,
                   default.maximum_event_age_s if max_age_s is None else max_age_s)


DEFAULT_RETRY_POLICY = RetryPolicy()


@dataclass(frozen=True)
class Target:
    kind: TargetKind
    destination: str  # queue name, webhook URL, function name, or "" for email
    input: str | None = None
    message_group_id: str | None = None
    # One shared default (frozen): a Target made one call at a time checks it only once.
    retry_policy: RetryPolicy = DEFAULT_RETRY_POLICY
    dead_letter_queue: str | None = None
    role_arn: str | None = None
    options: dict[str, Any] = field(default_factory=dict)  # webhook/email specifics
    arn: str | None = None  # the ARN the AWS API was given, echoed back by GetSchedule

    def __post_init__(self) -> None:
        if not isinstance(self.kind, TargetKind):
            try:
                object.__setattr__(self, "kind", TargetKind(self.kind))
            except ValueError:
                raise ValidationError("Target.kind", "must be queue, webhook, function or email")\
                    from None
        if self.kind is not TargetKind.EMAIL and not self.destination:
            raise ValidationError("Target.Arn", "names the target: a queue, URL or function")
        if self.kind is TargetKind.WEBHOOK and not re.match(r"^https?://", self.destination):
            raise ValidationError("Target.Arn", "a webhook target is an http:// or https:// URL")
        if self.input is not None and not 1 <= len(self.input) <= MAX_INPUT_CHARS:
            raise ValidationError("Target.Input", f"must be 1-{MAX_INPUT_CHARS} characters")
        if self.options:
            timeout = self.options.get("timeout_s")
            if timeout is not None:
                check_range("Target.timeout_s", timeout, 1, 300, " seconds")

    # Named constructors: what a Python user writes (`tidings.Target.queue("jobs", {...})`).
    # An input that is not a string is sent as its JSON text.

    @classmethod
    def queue(cls, name: str, input: Any = None, *, message_group_id: str | None = None,
              **fields: Any) -> Target:
        """Write `input` as a message into queue `name` at each firing."""
        return cls(TargetKind.QUEUE, name, input=_input(input),
                   message_group_id=message_group_id, **fields)

    @classmethod
    def webhook(cls, url: str, input: Any = None, *, headers: dict[str, str] | None = None,
                secret: str | None = None, timeout_s: int | None = None,
                **fields: Any) -> Target:
        """POST `input` to `url` (signed with `secret` if given), retried on failure."""
        options = {k: v for k, v in (("headers", headers), ("secret", secret),
                                     ("timeout_s", timeout_s)) if v is not None}
        return cls(TargetKind.WEBHOOK, url, input=_input(input), options=options, **fields)

    @classmethod
    def function(cls, name: str, input: Any = None, **fields: Any) -> Target:
        """Call the app's function registered as `name` (`@app.function()`)."""
        return cls(TargetKind.FUNCTION, name, input=_input(input), **fields)

    @classmethod
    def email(cls, document: Any, *, unsubscribe: bool | None = None,
              **fields: Any) -> Target:
        """Send an email: `document` is an SES v2 SendEmail request (a dict or its JSON),
        e.g. `{"FromEmailAddress": …, "Destination": {"ToAddresses": […]},
        "Content": {"Template": {"TemplateName": …, "TemplateData": "{…}"}}}`.
        `unsubscribe`: one-click unsubscribe headers; by default only when the document
        names a contact list (`ListManagementOptions`), as SES; True or False decides."""
        options = {} if unsubscribe is None else {"unsubscribe": unsubscribe}
        return cls(TargetKind.EMAIL, "", input=_input(document), options=options, **fields)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"kind": self.kind.value, "destination": self.destination}
        for key in ("input", "message_group_id", "dead_letter_queue", "role_arn", "arn"):
            value = getattr(self, key)
            if value is not None:
                doc[key] = value
        if self.retry_policy is not DEFAULT_RETRY_POLICY \
                and self.retry_policy != DEFAULT_RETRY_POLICY:
            doc["retry_policy"] = {
                "maximum_retry_attempts": self.retry_policy.maximum_retry_attempts,
                "maximum_event_age_s": self.retry_policy.maximum_event_age_s}
        if self.options:
            doc["options"] = self.options
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Target:
        rp = doc.get("retry_policy")
        return cls(
            kind=TargetKind(doc["kind"]), destination=doc.get("destination", ""),
            input=doc.get("input"), message_group_id=doc.get("message_group_id"),
            retry_policy=RetryPolicy(rp["maximum_retry_attempts"], rp["maximum_event_age_s"])
            if rp else DEFAULT_RETRY_POLICY,
            dead_letter_queue=doc.get("dead_letter_queue"), role_arn=doc.get("role_arn"),
            options=dict(doc.get("options") or {}), arn=doc.get("arn"))


def _input(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        raise ValidationError("Target.Input", "must be a string or a JSON-serialisable value")\
            from None


@dataclass(slots=True)
class ScheduleSpec:
    """What a user gives to create or (fully) replace a schedule, and what the store gives
    back of one. Checked by `validated`, not on construction: the store builds one per row
    it reads (the dispatcher, one per firing), from what was checked when it was written.
    Not frozen: on Python 3.11 a frozen dataclass's `__init__` sets each field through
    `object.__setattr__`, which tripled what building a claimed schedule cost. Treat it
    as immutable all the same; `dataclasses.replace` makes a changed copy."""

    name: str
    expression: str
    target: Target
    group: str = DEFAULT_GROUP
    timezone: str = "UTC"
    start_ms: int | None = None
    end_ms: int | None = None
    state: ScheduleState = ScheduleState.ENABLED
    flexible_window_minutes: int | None = None  # None = Mode OFF
    action_after_completion: ActionAfterCompletion = ActionAfterCompletion.NONE
    description: str | None = None
    client_token: str | None = None
    kms_key_arn: str | None = None

    @classmethod
    def once(cls, name: str, when: datetime, target: Target, **fields: Any) -> ScheduleSpec:
        """A one-time schedule due at `when` (an aware datetime, milliseconds honoured)."""
        return cls(name, at_expression(when), target, timezone="UTC", **fields)

    def validated(self) -> ScheduleSpec:
        check_name("Name", self.name)
        check_name("GroupName", self.group)
        if self.description is not None and len(self.description) > 512:
            raise ValidationError("Description", "must be at most 512 characters")
        if not 1 <= len(self.timezone or "") <= 50:
            raise ValidationError("ScheduleExpressionTimezone", "must be 1-50 characters")
        if self.flexible_window_minutes is not None:
            check_range("FlexibleTimeWindow.MaximumWindowInMinutes",
                        self.flexible_window_minutes, 1, 1440, " minutes")
        if self.client_token is not None and not 1 <= len(self.client_token) <= 64:
            raise ValidationError("ClientToken", "must be 1-64 characters")
        if (self.start_ms is not None and self.end_ms is not None
                and self.end_ms <= self.start_ms):
            raise ValidationError("EndDate", "must be after StartDate")
        if (isinstance(self.state, ScheduleState)
                and isinstance(self.action_after_completion, ActionAfterCompletion)):
            return self  # already typed: no copy (create_many validates millions of these)
        try:
            state = ScheduleState(self.state)
        except ValueError:
            raise ValidationError("State", "must be ENABLED or DISABLED") from None
        try:
            action = ActionAfterCompletion(self.action_after_completion)
        except ValueError:
            raise ValidationError("ActionAfterCompletion", "must be NONE or DELETE") from None
        return replace(self, state=state, action_after_completion=action)


def at_expression(when: datetime, field_name: str = "at") -> str:
    """`at(…)` for an aware datetime, in UTC, to the millisecond (read it with timezone
    "UTC"); a naive datetime is ambiguous, so refused."""
    ms = to_ms(when, field_name)
    # isoformat (C) gives yyyy-mm-ddThh:mm:ss.fff+00:00 for any year, four digits
    # included; six f-string fields cost a third of a one-at-a-time create's model work.
    text = from_ms(ms).isoformat(timespec="milliseconds")
    return f"at({text[:23]})" if ms % 1000 else f"at({text[:19]})"


@dataclass(slots=True)
class Schedule:
    """A stored schedule, with what the dispatcher keeps about it. Not frozen, for the
    reason `ScheduleSpec` gives; treat it as immutable all the same."""

    spec: ScheduleSpec
    id: int
    next_fire_at: int | None  # the next occurrence (scheduled time); None once completed
    due_at: int | None  # when it will actually fire (occurrence + flexible offset)
    last_fired_at: int | None
    created_at: int
    modified_at: int
    #: Every write to the row adds one: what a firing pass compares (a compare-and-set).
    version: int = 0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def group(self) -> str:
        return self.spec.group


@dataclass(frozen=True)
class ScheduleGroup:
    name: str
    created_at: int
    modified_at: int
    tags: dict[str, str] = field(default_factory=dict)
    client_token: str | None = None  # the create's ClientToken: a retry is idempotent


class ScheduleKey(NamedTuple):
    """What a search reads of a schedule it walks past: its keys, state and target (JSON
    text, parsed only when a filter asks)."""

    id: int
    group: str
    name: str
    state: str
    target: str
    due_at: int | None


class ScheduleRow(NamedTuple):
    """A schedule as the bulk path writes it (fan-out), valid by construction: a tuple in
    the store's column order, so it goes to `executemany` or COPY as it is."""

    group: str
    name: str
    state: str
    expression: str
    timezone: str
    start_ms: int | None
    end_ms: int | None
    flexible_window_minutes: int | None
    target: str  # `target_text` of the Target
    action_after_completion: str
    description: str | None
    client_token: str | None
    next_fire_at: int | None
    due_at: int | None
    created_at: int
    modified_at: int


#: json.dumps with these options would build a new encoder on every call.
_encode_target = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode


def target_text(target: Target) -> str:
    return _encode_target(target.to_json())
