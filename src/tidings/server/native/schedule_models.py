"""Request and response models of the native schedules API (its OpenAPI document).

Every rule of a schedule's shape is typed with `rules.py` (names, the expression grammar,
time zones, ranges, a target's destination and options by its kind, "expression or at"),
so the document states it and pydantic refuses a request that breaks it before the engine
runs. What only the stored state decides (the group exists, the target queue exists and
is FIFO or not, the node's webhook allow-list) stays the engine's (`model/schedules.py`,
`targets/`), which checks every value again for the CLI and the Python API.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from tidings.model.schedules import DEFAULT_GROUP, ScheduleSpec, Target, at_expression
from tidings.server.errors import FieldRule
from tidings.server.native.rules import (
    AwareInstant,
    ClientToken,
    EventAge,
    Expression,
    FlexibleWindow,
    FunctionName,
    HeaderName,
    HeaderValue,
    In,
    InputText,
    MessageGroupId,
    QueueName,
    RetryAttempts,
    ScheduleDescription,
    ScheduleName,
    Tags,
    TimeZone,
    WebhookTimeout,
    WebhookUrl,
    exactly_one_of,
)
from tidings.server.native.schedule_views import make_spec, make_target

#: One request creates at most this many schedules: about 10 MB of JSON, validated and
#: inserted in a few seconds; bigger fan-outs are sent as several requests.
MAX_BATCH = 10_000

#: A target's input: text (1-8192 characters) is sent as is, any other JSON value as its
#: JSON text (which must fit the same 8192).
TargetInput = InputText | dict[str, JsonValue] | list[JsonValue] | int | float | bool | None


class RetryPolicyModel(In):
    maximum_retry_attempts: RetryAttempts | None = Field(
        default=None, description="Delivery retries after the first attempt (0-185; default 185).")
    maximum_event_age_s: EventAge | None = Field(
        default=None, description="Give up on an occurrence this many seconds after its "
        "scheduled time (60-86400; default 86400).")


class WebhookOptionsModel(In):
    timeout_s: WebhookTimeout | None = Field(
        default=None, description="Seconds to wait for an answer (1-300; default 10).")
    secret: str | None = Field(
        default=None, description="HMAC-SHA256 signing key (default: the node's webhook "
        "secret). Never shown back: responses say `secret_set`.")
    headers: dict[HeaderName, HeaderValue] | None = Field(
        default=None, json_schema_extra={"additionalProperties": False},
        description="Extra request headers.")

    def to_options(self) -> dict[str, Any]:
        return {k: v for k, v in (("timeout_s", self.timeout_s), ("secret", self.secret),
                                  ("headers", self.headers)) if v is not None}


class FunctionOptionsModel(In):
    then: ThenTarget | None = Field(
        default=None, description="Where the function's return value is delivered next.")

    def to_options(self) -> dict[str, Any]:
        return {} if self.then is None else {"then": self.then.to_target().to_json()}


class _Then(In):
    def to_target(self) -> Target:
        options = getattr(self, "options", None)
        return make_target(self.kind, self.destination,  # type: ignore[attr-defined]
                           message_group_id=getattr(self, "message_group_id", None),
                           options=options.to_options() if options else None)


class ThenQueue(_Then):
    kind: Literal["queue"]
    destination: QueueName
    message_group_id: MessageGroupId | None = None


class ThenWebhook(_Then):
    kind: Literal["webhook"]
    destination: WebhookUrl
    options: WebhookOptionsModel | None = None


class ThenFunction(_Then):
    kind: Literal["function"]
    destination: FunctionName


ThenTarget = Annotated[ThenQueue | ThenWebhook | ThenFunction, Field(discriminator="kind")]


class _TargetFields(In):
    input: TargetInput = Field(
        default=None, description="The payload: text (1-8192 characters) is sent as is, any "
        "other JSON value as its JSON text (up to 8192 characters). Default: an event "
        "document.")
    retry_policy: RetryPolicyModel | None = None
    dead_letter_queue: QueueName | None = Field(
        default=None, description="A standard queue that receives occurrences whose delivery "
        "failed for good.")

    def to_target(self) -> Target:
        retry = self.retry_policy or RetryPolicyModel()
        options = getattr(self, "options", None)
        return make_target(
            self.kind, self.destination, input=self.input,  # type: ignore[attr-defined]
            message_group_id=getattr(self, "message_group_id", None),
            max_retries=retry.maximum_retry_attempts, max_event_age_s=retry.maximum_event_age_s,
            dead_letter_queue=self.dead_letter_queue,
            options=options.to_options() if options else None)


class QueueTargetModel(_TargetFields):
    """A message in a tidings queue, written in the firing transaction."""

    kind: Literal["queue"]
    destination: QueueName = Field(description="The queue's name (it must exist).")
    message_group_id: MessageGroupId | None = Field(
        default=None, description="Required for a FIFO queue target.")


class WebhookTargetModel(_TargetFields):
    """An HTTP POST, retried on failure."""

    kind: Literal["webhook"]
    destination: WebhookUrl = Field(description="The http:// or https:// URL.")
    options: WebhookOptionsModel | None = None


class FunctionTargetModel(_TargetFields):
    """A Python callable registered on the node's app."""

    kind: Literal["function"]
    destination: FunctionName = Field(description="The function's registered name.")
    options: FunctionOptionsModel | None = None


TargetModel = Annotated[QueueTargetModel | WebhookTargetModel | FunctionTargetModel,
                        Field(discriminator="kind")]


class ScheduleFieldsIn(In):
    """Every setting of a schedule. An update is a full replace: omitted fields take their
    defaults, as in EventBridge Scheduler's UpdateSchedule."""

    model_config = ConfigDict(json_schema_extra=exactly_one_of("expression", "at"))

    expression: Expression | None = Field(
        default=None, description="at(yyyy-mm-ddThh:mm:ss[.fff]), rate(value unit) or "
        "cron(minutes hours day-of-month month day-of-week year); or give `at`.")
    at: AwareInstant | None = Field(
        default=None, description="Instead of an expression: a one-time schedule due at this "
        "RFC 3339 instant (with its offset; fractions of a second honoured).")
    timezone: TimeZone = Field(default="UTC", description="IANA zone the expression is read "
                               "in (with `at`, the instant carries its own offset).")
    start: AwareInstant | None = Field(
        default=None, description="RFC 3339 with its offset: no occurrence before it.")
    end: AwareInstant | None = Field(
        default=None, description="RFC 3339 with its offset: no occurrence after it (it must "
        "be after `start`).")
    state: Literal["ENABLED", "DISABLED"] = "ENABLED"
    flexible_window_minutes: FlexibleWindow | None = Field(
        default=None, description="Fire at a stable pseudo-random instant within this many "
        "minutes after each occurrence (1-1440); null: exactly on time.")
    action_after_completion: Literal["NONE", "DELETE"] = Field(
        default="NONE", description="DELETE: remove the schedule after its last occurrence.")
    description: ScheduleDescription | None = Field(default=None,
                                                    description="Up to 512 characters.")
    target: TargetModel

    @model_validator(mode="after")
    def _expression_or_at(self) -> ScheduleFieldsIn:
        if (self.at is None) == (self.expression is None):
            raise FieldRule("expression", "give an expression or `at`, not both")
        return self

    def to_spec(self, name: str, group: str, client_token: str | None = None) -> ScheduleSpec:
        expression, timezone = self.expression or "", self.timezone
        if self.at is not None:
            expression, timezone = at_expression(self.at, "at"), "UTC"
        return make_spec(
            name, group, expression, self.target.to_target(), timezone=timezone,
            start=_text(self.start), end=_text(self.end), state=self.state,
            flexible_window_minutes=self.flexible_window_minutes,
            action_after_completion=self.action_after_completion,
            description=self.description, client_token=client_token)


def _text(value: Any) -> str | None:
    return None if value is None else value.isoformat()


class ScheduleCreateIn(ScheduleFieldsIn):
    name: ScheduleName = Field(description="1-64 characters of letters, digits, - _ and ., "
                               "unique in its group.")
    group: ScheduleName = Field(default=DEFAULT_GROUP,
                                description="The schedule group (must exist).")
    client_token: ClientToken | None = Field(
        default=None, description="1-64 characters: a retried create with the same token "
        "returns the existing schedule instead of a conflict.")

    def spec(self) -> ScheduleSpec:
        return self.to_spec(self.name, self.group, self.client_token)


class ScheduleBatchIn(In):
    schedules: list[ScheduleCreateIn] = Field(min_length=1, max_length=MAX_BATCH,
                                              description="1 to 10,000 schedules.")


class RetryPolicyOut(BaseModel):
    maximum_retry_attempts: int
    maximum_event_age_s: int


class TargetOut(BaseModel):
    kind: str
    destination: str
    input: str | None
    message_group_id: str | None
    retry_policy: RetryPolicyOut
    dead_letter_queue: str | None
    options: dict[str, Any] = Field(description="timeout_s, headers, then; `secret_set` "
                                    "instead of the webhook secret.")


class ScheduleOut(BaseModel):
    name: str
    group: str
    arn: str
    state: str
    expression: str
    timezone: str
    start: str | None
    end: str | None
    flexible_window_minutes: int | None
    action_after_completion: str
    description: str | None
    target: TargetOut
    next_fire_at: str | None = Field(description="The next occurrence, ISO 8601 UTC; null "
                                     "once the schedule has no more.")
    due_at: str | None = Field(description="When it will fire: the occurrence plus its "
                               "flexible-window offset; null while disabled or completed.")
    last_fired_at: str | None
    created_at: str
    modified_at: str


class ScheduleListOut(BaseModel):
    schedules: list[ScheduleOut]
    next_token: str | None = Field(default=None, description="Pass back to get the next page.")


class ErrorOut(BaseModel):
    code: str
    message: str
    field: str | None = None


class BatchItemOut(BaseModel):
    index: int = Field(description="Position of the item in the request.")
    name: str
    group: str
    created: bool = Field(description="False when it failed, or already existed (left as is).")
    error: ErrorOut | None = None


class ScheduleBatchOut(BaseModel):
    results: list[BatchItemOut]
    created: int = Field(description="How many schedules this request created.")
    failed: int = Field(description="How many items had an error.")


class GroupIn(In):
    name: ScheduleName = Field(description="1-64 characters of letters, digits, - _ and .")
    tags: Tags = Field(default_factory=dict, description="Up to 50 tags.")


class GroupOut(BaseModel):
    name: str
    arn: str
    tags: dict[str, str]
    created_at: str
    modified_at: str


class GroupListOut(BaseModel):
    groups: list[GroupOut]
    next_token: str | None = None


class GroupDeletedOut(BaseModel):
    name: str
    deleted_schedules: int = Field(description="Schedules deleted with the group.")


class OccurrenceOut(BaseModel):
    utc: str = Field(description="ISO 8601 UTC.")
    local: str = Field(description="ISO 8601 in the expression's zone, with its offset.")


class OccurrencesOut(BaseModel):
    expression: str
    timezone: str
    after: str
    occurrences: list[OccurrenceOut]


FunctionOptionsModel.model_rebuild()
