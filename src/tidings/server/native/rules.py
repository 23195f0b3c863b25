"""The rules of the native API's input, each stated once: as an annotated type that FastAPI
both enforces (pydantic, before the handler runs) and writes into the OpenAPI document.

The document is the API's contract: a client generated from it must not send a request the
server refuses for its shape, and the server must refuse every request the document does not
allow (tests/integration/test_fuzz_native.py runs schemathesis with every check to hold both
to that). So a rule never lives in a description alone: the numbers come from the engine's
own constants (`model/`), the engine still checks every value (the CLI and the AWS faces call
it too), and the native API refuses a value the engine would refuse before it gets there.

A new endpoint joins by typing its parameters and body fields with these (or with a new
one added here, from the engine's constant), and its body models on `In` (unknown fields
refused, JSON types exact). What only the server's state decides (does the queue exist, is
this receipt handle still this message's) is a documented status, not a schema rule.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StringConstraints,
    WithJsonSchema,
)

from tidings.email.service import TEMPLATE_NAME
from tidings.model import digests
from tidings.model import queues as q
from tidings.model import schedules as sch
from tidings.model.email import SuppressionReason
from tidings.model.states import DeliveryState


class In(BaseModel):
    """A request body: unknown fields are refused (`additionalProperties: false`) and JSON
    types are exact (no "5" for 5, no 0 for false), as the document says."""

    model_config = ConfigDict(extra="forbid", strict=True)


def _json_integer(value: Any) -> Any:
    # JSON Schema's integer is a number with no fraction (5 and 5.0), never a string or a
    # boolean; pydantic's strict int would refuse 5.0, its lax one take "5" and true.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a JSON integer")
    return value


#: An integer in a JSON body. A range goes before these two (`Annotated[int, Field(ge=…),
#: _LAX, _JSON]`): after the validator, pydantic would write it with keywords JSON Schema
#: lacks (`ge`, not `minimum`).
_LAX, _JSON = Strict(False), BeforeValidator(_json_integer)
JsonInt = Annotated[int, _LAX, _JSON]


def _text(value: Any) -> Any:
    if not isinstance(value, str | datetime):
        raise ValueError("must be an RFC 3339 date-time string")
    return value


#: An instant in a JSON body: an RFC 3339 string with its offset (strict mode would take only
#: a Python datetime, which JSON cannot carry).
Instant = Annotated[datetime, Strict(False), BeforeValidator(_text)]


#: SQS queue names: 1-80 of A-Z a-z 0-9 - _, a FIFO queue's ending .fifo (counted in the 80).
QUEUE_NAME_PATTERN = r"^[A-Za-z0-9_-]+(\.fifo)?$"
QueueName = Annotated[str, StringConstraints(min_length=1, max_length=80,
                                             pattern=QUEUE_NAME_PATTERN)]
#: A batch entry's id: unique in its batch (the engine checks that), 1-80 of A-Z a-z 0-9 - _.
BatchId = Annotated[str, StringConstraints(min_length=1, max_length=80,
                                           pattern=r"^[A-Za-z0-9_-]+$")]
#: The 1-10 entries of an SQS batch.
BATCH_MIN, BATCH_MAX = 1, 10

TagKey = Annotated[str, StringConstraints(min_length=1, max_length=128)]
TagValue = Annotated[str, StringConstraints(max_length=256)]
Tags = Annotated[dict[TagKey, TagValue], Field(max_length=q.MAX_TAGS)]

VisibilityTimeout = Annotated[int, Field(ge=0, le=q.MAX_VISIBILITY_S), _LAX, _JSON]
QueueDelay = Annotated[int, Field(ge=0, le=q.MAX_SQS_DELAY_S), _LAX, _JSON]
Retention = Annotated[int, Field(ge=q.MIN_RETENTION_S, le=q.MAX_RETENTION_S), _LAX, _JSON]
MessageBytes = Annotated[int, Field(ge=q.MIN_MESSAGE_BYTES, le=q.MAX_MESSAGE_BYTES), _LAX, _JSON]
ReceiveWait = Annotated[int, Field(ge=0, le=q.MAX_WAIT_S), _LAX, _JSON]
MaxReceiveCount = Annotated[int, Field(ge=1, le=q.MAX_RECEIVE_COUNT), _LAX, _JSON]

#: Page sizes, as the engine checks them.
PageOf1000 = Annotated[int, Field(ge=1, le=1000)]
#: Receives: messages per receive (SQS: 1-10).
ReceiveMax = Annotated[int, Field(ge=1, le=BATCH_MAX)]
#: A message move task's rate, messages a second (SQS: 1-500).
MovesPerSecond = Annotated[int, Field(ge=1, le=500), _LAX, _JSON]
#: Message move tasks listed at once (SQS: 1-10).
MoveTaskPage = Annotated[int, Field(ge=1, le=10)]

#: The same ranges in a query string, where every value arrives as text.
WaitQuery = Annotated[int, Field(ge=0, le=q.MAX_WAIT_S)]
VisibilityQuery = Annotated[int, Field(ge=0, le=q.MAX_VISIBILITY_S)]
MessageDelay = Annotated[int, Field(ge=0, le=q.MAX_RETENTION_S), _LAX, _JSON]

#: Characters SQS allows in bodies and attribute values (XML 1.0's), as a regex class.
XML_CHARS = r"[\t\n\r\x20-\uD7FF\uE000-\uFFFD\U00010000-\U0010FFFF]"
_RESERVED = r"^([Aa][Ww][Ss]|[Aa][Mm][Aa][Zz][Oo][Nn])\."
_ATTRIBUTE_NAME = r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$"


def _not_reserved(name: str) -> str:
    if name.lower().startswith(("aws.", "amazon.")):
        raise ValueError("must not start with the reserved prefixes AWS. or Amazon.")
    return name


#: A message attribute's name: dot-separated words of A-Z a-z 0-9 _ -, not AWS.* or Amazon.*
AttributeName = Annotated[
    str, StringConstraints(min_length=1, max_length=digests.MAX_NAME_LENGTH,
                           pattern=_ATTRIBUTE_NAME),
    AfterValidator(_not_reserved),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": digests.MAX_NAME_LENGTH,
                    "pattern": _ATTRIBUTE_NAME, "not": {"pattern": _RESERVED}})]


def _data_type(base: str) -> StringConstraints:
    return StringConstraints(max_length=digests.MAX_DATA_TYPE_LENGTH,
                             pattern=rf"^{base}(\.{XML_CHARS}+)?$")


#: A message attribute's data type: String, Number or Binary, optionally with a `.label`.
StringType = Annotated[str, _data_type("String")]
NumberType = Annotated[str, _data_type("Number")]
BinaryType = Annotated[str, _data_type("Binary")]
AttributeText = Annotated[str, StringConstraints(min_length=1, pattern=rf"^{XML_CHARS}+$")]
#: A Number attribute's value. SQS takes up to 38 significant digits between 10^-128 and
#: 10^126 in magnitude; the API states (and takes) the plain decimals within that.
AttributeNumber = Annotated[str, StringConstraints(pattern=r"^-?[0-9]{1,20}(\.[0-9]{1,17})?$")]
#: Standard base64 of at least one byte.
Base64 = Annotated[str, StringConstraints(
    pattern=r"^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$")]

#: Schedule and schedule group names (EventBridge Scheduler's): 1-64 of 0-9 a-z A-Z - _ .
SCHEDULE_NAME_PATTERN = sch.NAME_RE.pattern
ScheduleName = Annotated[str, StringConstraints(pattern=SCHEDULE_NAME_PATTERN)]


def _not_default(name: str) -> str:
    if name == sch.DEFAULT_GROUP:
        raise ValueError(f"the {sch.DEFAULT_GROUP} schedule group cannot be deleted")
    return name


#: A group that can be deleted: any but `default`, which always exists.
DeletableGroup = Annotated[
    str, StringConstraints(pattern=SCHEDULE_NAME_PATTERN), AfterValidator(_not_default),
    WithJsonSchema({"type": "string", "pattern": SCHEDULE_NAME_PATTERN,
                    "not": {"const": sch.DEFAULT_GROUP}})]
PageOf100 = Annotated[int, Field(ge=1, le=100)]
StateName = Literal["ENABLED", "DISABLED"]

#: SES template names: 1-64 of letters, digits, _ and -.
TemplateName = Annotated[str, StringConstraints(pattern=TEMPLATE_NAME.pattern)]
#: An email address as the API states it: an ASCII local part (SES takes no SMTPUTF8) and
#: an ASCII (or punycode) domain with a dot, 254 characters at most.
EMAIL_PATTERN = r"^[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$"
EmailAddress = Annotated[str, StringConstraints(max_length=254, pattern=EMAIL_PATTERN)]
#: Enumerations are the engine's own StrEnums: the document lists their values.
DeliveryStateName = DeliveryState
SuppressionReasonName = Annotated[SuppressionReason, Strict(False)]  # by value, in a body
#: The load forecast: a horizon of up to 31 days, in buckets of up to a day.
ForecastHours = Annotated[int, Field(ge=1, le=24 * 31)]
BucketMinutes = Annotated[int, Field(ge=1, le=1440)]
