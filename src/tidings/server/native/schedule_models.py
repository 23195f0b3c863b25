"""Request and response models of the native schedules API (its OpenAPI document).

As for queues, the models check shapes and types only; EventBridge Scheduler's ranges and
rules live in the engine (`model/schedules.py`, `triggers/`), so a bad value gets the same
message from the HTTP API, the CLI and the Python API. Ranges are repeated in descriptions
for the documentation.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue
from pydantic.config import JsonDict

from tidings.errors import ValidationError
from tidings.model.schedules import DEFAULT_GROUP, ScheduleSpec, Target, at_expression
from tidings.server.native.rules import In, ScheduleName, Tags
from tidings.server.native.schedule_views import make_spec, make_target

_DATE_TIME: JsonDict = {"format": "date-time"}


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RetryPolicyModel(_In):
    maximum_retry_attempts: int | None = Field(
        default=None, description="Delivery retries after the first attempt (0-185; default 185).")
    maximum_event_age_s: int | None = Field(
        default=None, description="Give up on an occurrence this many seconds after its "
        "scheduled time (60-86400; default 86400).")


class ThenTargetModel(_In):
    kind: Literal["queue", "webhook", "function"]
    destination: str = Field(description="Queue name, webhook URL or function name.")
    message_group_id: str | None = None
    options: TargetOptionsModel | None = None

    def to_target(self) -> Target:
        return make_target(self.kind, self.destination, message_group_id=self.message_group_id,
                           options=self.options.to_options() if self.options else None)


class TargetOptionsModel(_In):
    timeout_s: int | None = Field(
        default=None, description="Webhook: seconds to wait for an answer (1-300; default 10).")
    secret: str | None = Field(
        default=None, description="Webhook: HMAC-SHA256 signing key (default: the node's "
        "webhook secret). Never shown back: responses say `secret_set`.")
    headers: dict[str, str] | None = Field(
        default=None, description="Webhook: extra request headers.")
    then: ThenTargetModel | None = Field(
        default=None, description="Function: where its return value is delivered next.")

    def to_options(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in ("timeout_s", "secret", "headers"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.then is not None:
            out["then"] = self.then.to_target().to_json()
        return out


class TargetModel(_In):
    kind: Literal["queue", "webhook", "function"] = Field(
        description="queue: a message in a tidings queue, written in the firing transaction; "
        "webhook: an HTTP POST; function: a Python callable registered on the node's app.")
    destination: str = Field(description="Queue name, webhook URL or function name.")
    input: JsonValue = Field(
        default=None, description="The payload (up to 8192 characters): a string is sent as "
        "is, any other JSON value as its JSON text. Default: an event document.")
    message_group_id: str | None = Field(
        default=None, description="Required for a FIFO queue target.")
    retry_policy: RetryPolicyModel | None = None
    dead_letter_queue: str | None = Field(
        default=None, description="A standard queue that receives occurrences whose delivery "
        "failed for good.")
    options: TargetOptionsModel | None = None

    def to_target(self) -> Target:
        retry = self.retry_policy or RetryPolicyModel()
        return make_target(
            self.kind, self.destination, input=self.input,
            message_group_id=self.message_group_id,
            max_retries=retry.maximum_retry_attempts, max_event_age_s=retry.maximum_event_age_s,
            dead_letter_queue=self.dead_letter_queue,
            options=self.options.to_options() if self.options else None)


class ScheduleFieldsIn(_In):
    """Every setting of a schedule. An update is a full replace: omitted fields take their
    defaults, as in EventBridge Scheduler's UpdateSchedule."""

    expression: str | None = Field(
        default=None, description="at(yyyy-mm-ddThh:mm:ss[.fff]), rate(value unit) or "
        "cron(minutes hours day-of-month month day-of-week year); or give `at`.")
    at: datetime | None = Field(
        default=None, description="Instead of an expression: a one-time schedule due at this "
        "RFC 3339 instant (with its offset; fractions of a second honoured).")
    timezone: str = Field(default="UTC", description="IANA zone the expression is read in.")
    start: str | None = Field(
        default=None, json_schema_extra=_DATE_TIME,
        description="ISO 8601 with a UTC offset (naive times are rejected): no occurrence "
        "before it.")
    end: str | None = Field(default=None, json_schema_extra=_DATE_TIME,
                            description="ISO 8601 with a UTC offset: no occurrence after it.")
    state: Literal["ENABLED", "DISABLED"] = "ENABLED"
    flexible_window_minutes: int | None = Field(
        default=None, description="Fire at a stable pseudo-random instant within this many "
        "minutes after each occurrence (1-1440); null: exactly on time.")
    action_after_completion: Literal["NONE", "DELETE"] = Field(
        default="NONE", description="DELETE: remove the schedule after its last occurrence.")
    description: str | None = Field(default=None, description="Up to 512 characters.")
    target: TargetModel

    def to_spec(self, name: str, group: str, client_token: str | None = None) -> ScheduleSpec:
        if (self.at is None) == (self.expression is None):
            raise ValidationError("expression", "give an expression or `at`, not both")
        expression, timezone = self.expression or "", self.timezone
        if self.at is not None:
            expression, timezone = at_expression(self.at, "at"), "UTC"
        return make_spec(
            name, group, expression, self.target.to_target(), timezone=timezone,
            start=self.start, end=self.end, state=self.state,
            flexible_window_minutes=self.flexible_window_minutes,
            action_after_completion=self.action_after_completion,
            description=self.description, client_token=client_token)


class ScheduleCreateIn(ScheduleFieldsIn):
    name: str = Field(description="1-64 characters of letters, digits, - _ and ., unique in "
                      "its group.")
    group: str = Field(default=DEFAULT_GROUP, description="The schedule group (must exist).")
    client_token: str | None = Field(
        default=None, description="1-64 characters: a retried create with the same token "
        "returns the existing schedule instead of a conflict.")

    def spec(self) -> ScheduleSpec:
        return self.to_spec(self.name, self.group, self.client_token)


class ScheduleBatchIn(_In):
    schedules: list[ScheduleCreateIn] = Field(description="1 to 10,000 schedules.")


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


ThenTargetModel.model_rebuild()
