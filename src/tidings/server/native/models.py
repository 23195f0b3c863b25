"""Request and response models of the native API: its OpenAPI document is built from these.

Their fields are typed with the rules of `rules.py`, so what a model enforces and what the
document states are one thing; the engine (`model/queues.py`, `model/messages.py`) checks
the same values again for every other face.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, JsonValue

from tidings.model import digests
from tidings.model.queues import RedriveAllowPolicy, RedrivePolicy
from tidings.server.native.rules import (
    BATCH_MAX,
    BATCH_MIN,
    AttributeName,
    AttributeNumber,
    AttributeText,
    Base64,
    BatchId,
    BinaryType,
    In,
    Instant,
    JsonInt,
    MaxReceiveCount,
    MessageBytes,
    MessageDelay,
    MovesPerSecond,
    NumberType,
    QueueDelay,
    QueueName,
    ReceiveWait,
    Retention,
    StringType,
    Tags,
    VisibilityTimeout,
)


class RedrivePolicyModel(In):
    dead_letter_queue: QueueName = Field(
        description="Name of the dead-letter queue (it must exist).")
    max_receive_count: MaxReceiveCount = Field(
        description="Receives after which a message moves to the dead-letter queue (1-1000).")


class RedriveAllowPolicyModel(In):
    permission: Literal["allowAll", "denyAll", "byQueue"] = Field(
        description="allowAll, denyAll or byQueue.")
    source_queues: list[QueueName] = Field(max_length=10,
        default_factory=list, description="With byQueue: the 1-10 queues allowed as sources.")


class QueueAttributesIn(In):
    """Queue attributes by their native names; omitted ones keep their value (or default)."""

    visibility_timeout_s: VisibilityTimeout | None = Field(
        default=None,
        description="Seconds a received message stays invisible (0-43200; default 30).")
    delay_s: QueueDelay | None = Field(
        default=None, description="Default delay of new messages, in seconds (0-900; default 0).")
    retention_s: Retention | None = Field(
        default=None, description="Seconds a message is kept (60-1209600; default 345600, 4 days).")
    max_message_bytes: MessageBytes | None = Field(
        default=None, description="Largest message, body plus attributes (1024-1048576 bytes).")
    receive_wait_s: ReceiveWait | None = Field(
        default=None,
        description="Default long-poll wait of a receive, in seconds (0-20; default 0).")
    redrive_policy: RedrivePolicyModel | None = Field(
        default=None, description="Dead-letter queue settings; null removes them.")
    redrive_allow_policy: RedriveAllowPolicyModel | None = Field(
        default=None, description="Which queues may use this queue as their dead-letter queue.")
    fifo: bool | None = Field(
        default=None, description="FIFO queue; must match a name ending .fifo.")
    content_based_deduplication: bool | None = Field(
        default=None, description="FIFO only: deduplicate by a SHA-256 of the body.")

    def changes(self) -> dict[str, Any]:
        """Keyword arguments for the queue service: only the attributes the client sent."""
        out: dict[str, Any] = {}
        for name in self.model_fields_set:
            value = getattr(self, name)
            if isinstance(value, RedrivePolicyModel):
                value = RedrivePolicy(value.dead_letter_queue, value.max_receive_count)
            elif isinstance(value, RedriveAllowPolicyModel):
                value = RedriveAllowPolicy(value.permission, tuple(value.source_queues))
            elif value is None and name not in ("redrive_policy", "redrive_allow_policy"):
                continue  # null on a plain attribute: leave it as it is
            out[name] = value
        return out


class CreateQueueIn(In):
    name: QueueName = Field(description="1-80 characters of A-Z a-z 0-9 - _; FIFO names end "
                            ".fifo.")
    attributes: QueueAttributesIn = Field(default_factory=lambda: QueueAttributesIn())
    tags: Tags = Field(default_factory=dict, description="Up to 50 tags.")


class QueueAttributesOut(BaseModel):
    visibility_timeout_s: int
    delay_s: int
    retention_s: int
    max_message_bytes: int
    receive_wait_s: int
    redrive_policy: RedrivePolicyModel | None
    redrive_allow_policy: RedriveAllowPolicyModel | None
    fifo: bool
    content_based_deduplication: bool


class CountsOut(BaseModel):
    visible: int = Field(description="Messages that can be received now.")
    in_flight: int = Field(description="Received messages whose visibility timeout runs.")
    delayed: int = Field(description="Messages waiting out their delay.")


class QueueOut(BaseModel):
    name: str
    fifo: bool
    attributes: QueueAttributesOut
    tags: dict[str, str]
    created_at: str = Field(description="ISO-8601 UTC.")
    modified_at: str = Field(description="ISO-8601 UTC.")
    counts: CountsOut | None = Field(default=None, description="Approximate message counts.")


class QueueListOut(BaseModel):
    queues: list[QueueOut]
    next_token: str | None = Field(default=None, description="Pass back to get the next page.")


class PurgeOut(BaseModel):
    purged: int = Field(description="Messages deleted.")


class StringAttributeIn(In):
    data_type: StringType = Field(description="String, with an optional .label.")
    string_value: AttributeText


class NumberAttributeIn(In):
    data_type: NumberType = Field(description="Number, with an optional .label.")
    string_value: AttributeNumber


class BinaryAttributeIn(In):
    data_type: BinaryType = Field(description="Binary, with an optional .label.")
    binary_value: Base64 = Field(description="Standard base64.")


MessageAttributeModel = StringAttributeIn | NumberAttributeIn | BinaryAttributeIn


class SendIn(In):
    body: JsonValue = Field(
        description="A string is sent as is; any other JSON value is sent as its JSON text.")
    delay_seconds: MessageDelay | None = Field(
        default=None, description="Seconds before the message can be received; up to the queue's "
        "retention period (SQS allows 900). Default: the queue's delay.")
    deliver_at: Instant | None = Field(
        default=None, description="RFC 3339 instant with its offset (fractions of a second "
        "honoured) from which the message can be received; instead of delay_seconds.")
    attributes: dict[AttributeName, MessageAttributeModel] = Field(
        default_factory=dict, max_length=digests.MAX_ATTRIBUTES,
        # pydantic states the name's pattern as patternProperties: only names matching it
        json_schema_extra={"additionalProperties": False},
        description="Up to 10 message attributes.")
    group_id: str | None = Field(default=None, description="Required on FIFO queues.")
    deduplication_id: str | None = Field(
        default=None,
        description="FIFO: required unless the queue has content-based deduplication.")


class AnyAttributeIn(In):
    """A batch entry's attribute: SQS checks each entry on its own, so a bad attribute fails
    its entry (in `failed`), not the request; only the JSON shape is the request's."""

    data_type: str = Field(description="String, Number or Binary, with an optional .label.")
    string_value: str | None = Field(default=None, description="For String and Number.")
    binary_value: str | None = Field(default=None, description="For Binary: standard base64.")


class SendBatchEntryIn(In):
    """One message of a batch. Its values are checked per entry, as SQS does: a value out
    of range fails the entry (in `failed`, with the rule), and the others are sent; so the
    document gives the entry's types, and the rules of `SendIn` in words."""

    id: BatchId = Field(description="Your id for this entry, unique in the batch (1-80 of "
                        "A-Z a-z 0-9 - _).")
    body: JsonValue = Field(description="As in a single send.")
    delay_seconds: JsonInt | None = Field(default=None, description="As in a single send.")
    deliver_at: Instant | None = Field(default=None, description="As in a single send.")
    attributes: dict[str, AnyAttributeIn] = Field(
        default_factory=dict, description="As in a single send (up to 10).")
    group_id: str | None = Field(default=None, description="Required on FIFO queues.")
    deduplication_id: str | None = Field(
        default=None,
        description="FIFO: required unless the queue has content-based deduplication.")


class SendBatchIn(In):
    entries: list[SendBatchEntryIn] = Field(min_length=BATCH_MIN, max_length=BATCH_MAX,
                                            description="1 to 10 messages.")


class SendOut(BaseModel):
    message_id: str
    md5_of_body: str
    md5_of_attributes: str | None
    sequence_number: str | None = Field(description="FIFO queues only.")


class SendBatchSuccess(SendOut):
    id: str


class BatchFailureOut(BaseModel):
    id: str
    code: str
    message: str
    sender_fault: bool


class SendBatchOut(BaseModel):
    successful: list[SendBatchSuccess]
    failed: list[BatchFailureOut]


class MessageAttributeOut(BaseModel):
    data_type: str
    string_value: str | None = None
    binary_value: str | None = None


class MessageOut(BaseModel):
    message_id: str
    receipt_handle: str = Field(description="URL-safe: use it in a delete path as is.")
    body: str
    md5_of_body: str
    md5_of_attributes: str | None
    attributes: dict[str, MessageAttributeOut]
    system_attributes: dict[str, str] = Field(
        description="SQS's system attributes: ApproximateReceiveCount, SentTimestamp, …")
    receive_count: int
    last_error: str | None = Field(description="The last failure a consumer recorded.")
    dead_letter_source: str | None = Field(
        None, description="In a dead-letter queue: the ARN of the queue it came from.")


class ReceiveOut(BaseModel):
    messages: list[MessageOut]


class PeekedOut(BaseModel):
    message_id: str
    state: str = Field(description="delayed, visible or in_flight, now")
    body: str
    receive_count: int
    sent_at: str
    visible_at: str
    group_id: str | None
    last_error: str | None = Field(description="The last failure a consumer recorded.")
    dead_letter_source: str | None = Field(
        description="In a dead-letter queue: the ARN of the queue it came from.")


class PeekOut(BaseModel):
    messages: list[PeekedOut]
    next_token: str | None


class DeleteEntryIn(In):
    id: BatchId
    receipt_handle: str


class DeleteBatchIn(In):
    entries: list[DeleteEntryIn] = Field(min_length=BATCH_MIN, max_length=BATCH_MAX,
                                         description="1 to 10 receipt handles.")


class VisibilityIn(In):
    receipt_handle: str
    visibility_timeout: VisibilityTimeout = Field(
        description="Seconds from now (0-43200); 0 releases it.")


class VisibilityEntryIn(VisibilityIn):
    id: BatchId


class VisibilityBatchIn(In):
    entries: list[VisibilityEntryIn] = Field(min_length=BATCH_MIN, max_length=BATCH_MAX,
                                             description="1 to 10 changes.")


class EntryOut(BaseModel):
    id: str


class BatchOut(BaseModel):
    successful: list[EntryOut]
    failed: list[BatchFailureOut]


class RedriveIn(In):
    destination: QueueName | None = Field(
        default=None,
        description="Queue to move to; default: each message back to its source queue.")
    max_per_second: MovesPerSecond | None = Field(
        default=None, description="If given (1-500), start a background move task at this rate and "
        "return its handle; otherwise move everything now.")


class RedriveOut(BaseModel):
    moved: int | None = Field(default=None, description="Messages moved (when moved now).")
    task_handle: str | None = Field(default=None, description="The move task (when rate-limited).")


class MoveTaskOut(BaseModel):
    task_handle: str
    status: str = Field(description="RUNNING, COMPLETED, CANCELLED or FAILED.")
    source: str
    destination: str | None
    max_per_second: int | None
    moved: int
    to_move: int
    started_at: str
    failure_reason: str | None


class MoveTaskListOut(BaseModel):
    tasks: list[MoveTaskOut]


class QueueNamesOut(BaseModel):
    queues: list[str]


class TagsIn(In):
    tags: Tags = Field(description="Tags to add or overwrite.")


class HealthOut(BaseModel):
    status: str
    db: str = Field(description="The database backend: sqlite or postgresql.")
    version: str = Field(description="The tidings release this node runs.")


class CheckOut(BaseModel):
    ok: bool
    reason: str | None = Field(default=None, description="Why not, when not ok.")
    since: str | None = Field(
        default=None, description="ISO-8601 UTC: when it stopped working (a component's "
        "trouble).")


class ReadinessOut(BaseModel):
    status: str = Field(description="ready (200) or unavailable (503).")
    db: str = Field(description="The database backend: sqlite or postgresql.")
    checks: dict[str, CheckOut] = Field(
        description="database (a read answered within a few seconds) and, on a node, "
        "dispatcher (schedules are being fired), then every other component that is "
        "failing now (sweeper, consumer of <queue>), each with its reason.")
