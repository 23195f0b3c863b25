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

import re
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
from tidings.model import digests, push
from tidings.model import queues as q
from tidings.model import schedules as sch
from tidings.model.email import SuppressionReason
from tidings.model.states import DeliveryState
from tidings.server.errors import PATTERN_WORDS
from tidings.server.native import grammars as g
from tidings.triggers.base import MAX_EXPRESSION_LENGTH


class In(BaseModel):
    """A request body: unknown fields are refused (`additionalProperties: false`) and JSON
    types are exact (no "5" for 5, no 0 for false), as the document says."""

    model_config = ConfigDict(extra="forbid", strict=True)


def say(pattern: str, words: str) -> str:
    """Register what a pattern means in words (for the error that names the field)."""
    PATTERN_WORDS[pattern] = words
    return pattern


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


_DATE_TIME_START = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ]")


def _text(value: Any) -> Any:
    # pydantic would also read a number, or a numeric string, as a Unix time
    if not isinstance(value, datetime) and not (
            isinstance(value, str) and _DATE_TIME_START.match(value)):
        raise ValueError("must be an RFC 3339 date-time string")
    return value


#: An instant in a JSON body: an RFC 3339 string with its offset (strict mode would take only
#: a Python datetime, which JSON cannot carry).
Instant = Annotated[datetime, Strict(False), BeforeValidator(_text)]
def _aware(value: datetime) -> datetime:
    if value.utcoffset() is None:
        raise ValueError("must carry a UTC offset, e.g. 2030-01-01T09:00:00+01:00 or ...Z "
                         "(naive date-times are ambiguous)")
    return value


#: The same, its offset required before the engine sees it (RFC 3339's date-time has one).
AwareInstant = Annotated[datetime, Strict(False), BeforeValidator(_text),
                         AfterValidator(_aware)]


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

#: Characters SQS allows in bodies and attribute values (XML 1.0's), as a regex class: every
#: character but the C0 controls other than tab, LF and CR, and U+FFFE/U+FFFF. Written as
#: what it leaves out: the same set as XML 1.0's list of ranges for every Unicode scalar
#: value (surrogates are none; the engine refuses a lone one), without `\U` (not ECMA
#: 262's) and 14 times faster for hypothesis to generate from (the fuzz test spent minutes
#: on the list's astral range).
XML_CHARS = r"[^\x00-\x08\x0B\x0C\x0E-\x1F\uFFFE\uFFFF]"
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
EmailAddress = Annotated[str, StringConstraints(max_length=254, pattern=say(
    EMAIL_PATTERN, "must be an email address: an ASCII local part, @, a domain with a dot"))]
#: Enumerations are the engine's own StrEnums: the document lists their values.
DeliveryStateName = DeliveryState
SuppressionReasonName = Annotated[SuppressionReason, Strict(False)]  # by value, in a body
#: The load forecast: a horizon of up to 31 days, in buckets of up to a day.
ForecastHours = Annotated[int, Field(ge=1, le=24 * 31)]
BucketMinutes = Annotated[int, Field(ge=1, le=1440)]
#: How long the forecast assumes a start holds a concurrency slot (at most a day).
MeanDurationMs = Annotated[int, Field(ge=1, le=86_400_000, description=(
    "How long the forecast assumes each start holds a limit's concurrency slot, in ms."))]


def _given(name: str) -> dict[str, Any]:
    return {"required": [name], "properties": {name: {"not": {"type": "null"}}}}


def exactly_one_of(*names: str) -> dict[str, Any]:
    """JSON Schema for "exactly one of these fields is given, and not null" (a model
    validator says the same to pydantic, raising `FieldRule`)."""
    return {"oneOf": [_given(n) for n in names]}


def any_of(*names: str) -> dict[str, Any]:
    """JSON Schema for "at least one of these fields is given, and not null"."""
    return {"anyOf": [_given(n) for n in names]}


def _zone(name: str) -> str:
    if name not in g.time_zones():
        raise ValueError("must be an IANA time zone name, e.g. Europe/Paris")
    return name


#: A schedule expression (grammars.py): at(...), rate(...) or cron(...), 1-256 characters.
Expression = Annotated[str, StringConstraints(max_length=MAX_EXPRESSION_LENGTH,
                                              pattern=say(
    g.EXPRESSION, "must be at(yyyy-mm-ddThh:mm:ss[.fff]) on a day the calendar has, "
    "rate(N unit) (1 minute, 5 minutes, 1 hour, 2 days ...) or cron(minutes hours "
    "day-of-month month day-of-week year) with ? in exactly one of the two day fields"))]
#: An IANA time zone name, as listed by the node's tz database.
TimeZone = Annotated[str, AfterValidator(_zone),
                     WithJsonSchema({"type": "string", "enum": list(g.time_zones())})]
#: Text a database column keeps as it is: no NUL character, which PostgreSQL's text
#: cannot hold (so SQLite refuses it too: both backends answer alike).
NO_NUL = say(r"^[^\x00]*$", "must not contain the NUL character")
Text = Annotated[str, StringConstraints(pattern=NO_NUL)]
ScheduleDescription = Annotated[str, StringConstraints(max_length=512, pattern=NO_NUL)]
ClientToken = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=NO_NUL)]
FlexibleWindow = Annotated[int, Field(ge=1, le=1440), _LAX, _JSON]
RetryAttempts = Annotated[int, Field(ge=0, le=185), _LAX, _JSON]
EventAge = Annotated[int, Field(ge=60, le=86400), _LAX, _JSON]
WebhookTimeout = Annotated[int, Field(ge=1, le=300), _LAX, _JSON]
#: A target's input given as text: 1-8192 characters (Scheduler's own limit).
InputText = Annotated[str, StringConstraints(min_length=1, max_length=sch.MAX_INPUT_CHARS)]
#: A webhook URL: http:// or https://, a host (a name, an IPv4 address or a bracketed IPv6
#: one, as RFC 3986 writes them), an optional user and port, then any path and query
#: without spaces or control characters.
_HOST_TEXT = r"[A-Za-z0-9._~%!$&'()*+,;=-]+"
_H16, _OCTET = "[0-9A-Fa-f]{1,4}", "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_LS32 = rf"(?:{_H16}:{_H16}|{_OCTET}(?:\.{_OCTET}){{3}})"
_IPV6 = "|".join([
    rf"(?:{_H16}:){{6}}{_LS32}", rf"::(?:{_H16}:){{5}}{_LS32}",
    rf"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
    rf"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
    rf"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}", rf"(?:(?:{_H16}:){{0,6}}{_H16})?::"])
WEBHOOK_URL = (rf"^https?://(?:{_HOST_TEXT}@)?(?:{_HOST_TEXT}|\[(?:{_IPV6})\])"
               r"(?::[0-9]{1,5})?(?:[/?#][^\x00-\x20\x7f]*)?$")
WebhookUrl = Annotated[str, StringConstraints(max_length=2048, pattern=say(
    WEBHOOK_URL, "must be an http:// or https:// URL with a host, without spaces"))]
#: A function target's name, as registered on the node's app (`@app.function()`).
FunctionName = Annotated[str, StringConstraints(min_length=1, max_length=256,
                                                pattern=r"^[A-Za-z0-9_.:-]+$")]
#: A FIFO message group id (SQS: 1-128 characters of ASCII punctuation and alphanumerics).
MessageGroupId = Annotated[str, StringConstraints(pattern=r"^[!-~]{1,128}$")]
#: An HTTP header's name and value in a webhook target's options.
HeaderName = Annotated[str, StringConstraints(pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")]
HeaderValue = Annotated[str, StringConstraints(max_length=4096, pattern=r"^[^\x00-\x1f\x7f]*$")]

#: A date, a time of day and campaign steps in a query string (grammars.py).
DateText = Annotated[str, StringConstraints(pattern=say(g.DATE, "must be a date YYYY-MM-DD"))]
TimeOfDay = Annotated[str, StringConstraints(pattern=say(
    g.TIME_OF_DAY, "must be a time of day HH:MM or HH:MM:SS"))]
QuietHours = Annotated[str, StringConstraints(pattern=say(
    g.QUIET_HOURS, "must be HH:MM-HH:MM, e.g. 21:00-08:00"))]
StepText = Annotated[str, StringConstraints(pattern=say(
    g.STEP, "must be name:day, name:day:HH:MM or name:day:HH:MM:template (a name of "
    "1-20 letters, digits, _ and ., a day of 0-366)"))]

#: A limit's name (1-200 of letters, digits and . _ - @), or a key `name:value` whose
#: value has no control character (and no `/`, which would end the path segment).
LIMIT_KEY_PATTERN = r"^[A-Za-z0-9_.@-]+(:[^\x00-\x1f/]*)?$"
LimitKey = Annotated[str, StringConstraints(min_length=1, max_length=200,
                                            pattern=say(
    LIMIT_KEY_PATTERN, "must be a limit's name (letters, digits and . _ - @), or name:value "
    "without control characters or /"))]
LimitRate = Annotated[str, StringConstraints(pattern=say(
    g.LIMIT_RATE, "must be N/unit or N/Tunit (ms, s, min, h, d), e.g. 200/s, 1000/min, "
    "20/h or 5/10s, a period of at most 7 days"))]
#: Pushes at once to a subscription's endpoint, every node together.
PushConcurrency = Annotated[int, Field(ge=1, le=push.MAX_CONCURRENCY), _LAX, _JSON]
LimitCount = Annotated[int, Field(ge=1, le=1_000_000), _LAX, _JSON]

#: Contact list and topic names (SES v2): 1-64 of letters, digits, _ and -.
ContactListName = Annotated[str, StringConstraints(pattern=say(
    r"^[A-Za-z0-9_-]{1,64}$", "must be 1-64 letters, digits, _ and -"))]
#: Text with something besides white space in it.
_NOT_BLANK = (r"[^\x00\t\n\x0b\x0c\r \x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029"
              r"\u202f\u205f\u3000]")
DisplayName = Annotated[str, StringConstraints(max_length=128, pattern=say(
    rf"^[^\x00]*{_NOT_BLANK}[^\x00]*$", "must not be only white space, nor hold NUL"))]
ListDescription = Annotated[str, StringConstraints(max_length=500, pattern=NO_NUL)]
SubscriptionStatusName = Literal["OPT_IN", "OPT_OUT"]
