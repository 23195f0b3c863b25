"""Queue attributes with Amazon SQS's ranges and defaults, validated in one place.

Ranges: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SetQueueAttributes.html
Every interface (Python, CLI, native HTTP, SQS wire) builds a `QueueAttributes` through
`QueueAttributes.build`/`from_sqs`, so a bad value gets the same message everywhere.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

from tidings.errors import ValidationError
from tidings.model.states import MoveTaskStatus

MAX_VISIBILITY_S = 12 * 3600
MAX_SQS_DELAY_S = 15 * 60
MIN_RETENTION_S, MAX_RETENTION_S = 60, 14 * 24 * 3600
DEFAULT_RETENTION_S = 4 * 24 * 3600
MIN_MESSAGE_BYTES, MAX_MESSAGE_BYTES = 1024, 1024 * 1024
MAX_WAIT_S = 20
MAX_RECEIVE_COUNT = 1000
MAX_TAGS = 50
FIFO_DEDUP_WINDOW_MS = 5 * 60 * 1000  # SQS: "within the 5-minute deduplication interval"

_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,80}$")

#: The queues that carry tidings' own deliveries (webhooks and functions; email). They are
#: the engine's: hidden from queue listings unless asked for, and no client may send to,
#: receive from, purge, change or delete them (a test teardown that deletes every queue
#: would otherwise take the node's deliveries with it, and a purge lose accepted email).
DELIVERY_QUEUE = "tidings-deliveries"
EMAIL_QUEUE = "tidings-email"
INTERNAL_QUEUES = frozenset({DELIVERY_QUEUE, EMAIL_QUEUE})


def validate_queue_name(name: str) -> bool:
    """Check an SQS queue name; return whether it names a FIFO queue."""
    fifo = name.endswith(".fifo")
    base = name[: -len(".fifo")] if fifo else name
    if not isinstance(name, str) or len(name) > 80 or not _NAME_RE.match(base or "!"):
        raise ValidationError(
            "QueueName",
            "must be 1-80 characters of A-Z a-z 0-9 hyphen and underscore"
            " (a FIFO queue name ends with .fifo, counted in the 80)",
        )
    return fifo


def check_range(field_name: str, value: Any, low: int, high: int, unit: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(str(value).strip())
        except ValueError:
            raise ValidationError(field_name,
                                  f"must be an integer from {low} to {high}{unit}") from None
    if not low <= value <= high:
        raise ValidationError(field_name, f"must be from {low} to {high}{unit}, got {value}")
    return int(value)


@dataclass(frozen=True)
class RedrivePolicy:
    dead_letter_queue: str  # the DLQ's name
    max_receive_count: int

    def to_json(self, arn_of: Any = None) -> dict[str, Any]:
        target = arn_of(self.dead_letter_queue) if arn_of else self.dead_letter_queue
        return {"deadLetterTargetArn": target, "maxReceiveCount": self.max_receive_count}


@dataclass(frozen=True)
class RedriveAllowPolicy:
    permission: str  # allowAll | denyAll | byQueue
    source_queues: tuple[str, ...] = ()

    def allows(self, source: str) -> bool:
        if self.permission == "allowAll":
            return True
        if self.permission == "denyAll":
            return False
        return source in self.source_queues


@dataclass(frozen=True)
class QueueAttributes:
    visibility_timeout_s: int = 30
    delay_s: int = 0
    retention_s: int = DEFAULT_RETENTION_S
    max_message_bytes: int = MAX_MESSAGE_BYTES
    receive_wait_s: int = 0
    redrive_policy: RedrivePolicy | None = None
    redrive_allow_policy: RedriveAllowPolicy | None = None
    fifo: bool = False
    content_based_deduplication: bool = False
    tags: dict[str, str] = field(default_factory=dict)

    @classmethod
    def build(cls, *, fifo: bool = False, **values: Any) -> QueueAttributes:
        """Validated attributes from native (snake_case) names; unknown names are errors."""
        return cls().merged(fifo=fifo, **values)

    def merged(self, **values: Any) -> QueueAttributes:
        known = set(self.__dataclass_fields__)
        for name in values:
            if name not in known:
                raise ValidationError(name, "is not a queue attribute")
        attrs = replace(self, **values)
        attrs._validate()
        return attrs

    def _validate(self) -> None:
        check_range("VisibilityTimeout", self.visibility_timeout_s, 0, MAX_VISIBILITY_S, " seconds")
        check_range("DelaySeconds", self.delay_s, 0, MAX_SQS_DELAY_S, " seconds")
        check_range("MessageRetentionPeriod", self.retention_s, MIN_RETENTION_S, MAX_RETENTION_S,
                    " seconds")
        check_range("MaximumMessageSize", self.max_message_bytes, MIN_MESSAGE_BYTES,
                    MAX_MESSAGE_BYTES, " bytes")
        check_range("ReceiveMessageWaitTimeSeconds", self.receive_wait_s, 0, MAX_WAIT_S, " seconds")
        if self.redrive_policy is not None:
            check_range("RedrivePolicy.maxReceiveCount", self.redrive_policy.max_receive_count, 1,
                        MAX_RECEIVE_COUNT)
            dlq_fifo = self.redrive_policy.dead_letter_queue.endswith(".fifo")
            if dlq_fifo != self.fifo:
                raise ValidationError("RedrivePolicy.deadLetterTargetArn",
                                      "the dead-letter queue of a FIFO queue must be FIFO, and of a"
                                      " standard queue must be standard")
        if self.redrive_allow_policy is not None:
            rap = self.redrive_allow_policy
            if rap.permission not in ("allowAll", "denyAll", "byQueue"):
                raise ValidationError("RedriveAllowPolicy.redrivePermission",
                                      "must be allowAll, denyAll or byQueue")
            if rap.permission == "byQueue" and not 1 <= len(rap.source_queues) <= 10:
                raise ValidationError("RedriveAllowPolicy.sourceQueueArns",
                                      "byQueue needs 1 to 10 source queues")
            if rap.permission != "byQueue" and rap.source_queues:
                raise ValidationError("RedriveAllowPolicy.sourceQueueArns",
                                      "is only allowed when redrivePermission is byQueue")
        if self.content_based_deduplication and not self.fifo:
            raise ValidationError("ContentBasedDeduplication", "is only valid for FIFO queues")
        validate_tags(self.tags)

    # --- SQS attribute names (shared by the CLI and the SQS wire API) -----------------------

    @classmethod
    def sqs_changes(cls, attributes: dict[str, str], name_of_arn: Any = None) -> dict[str, Any]:
        """Translate SQS attribute names/values into `merged()` keyword arguments."""
        resolve = name_of_arn or (lambda arn: arn.rsplit(":", 1)[-1])
        out: dict[str, Any] = {}
        for key, raw in attributes.items():
            if key not in _SQS_SETTABLE:
                raise ValidationError(f"Attribute.{key}", "is not a settable queue attribute")
            value = str(raw)
            if key in _SQS_INT:
                out[_SQS_INT[key]] = check_range(key, value, 0, 2**31)
            elif key == "FifoQueue":
                out["fifo"] = _parse_bool(key, value)
            elif key == "ContentBasedDeduplication":
                out["content_based_deduplication"] = _parse_bool(key, value)
            elif key == "RedrivePolicy":
                out["redrive_policy"] = _parse_redrive(value, resolve) if value else None
            elif key == "RedriveAllowPolicy":
                out["redrive_allow_policy"] = _parse_allow(value, resolve) if value else None
            else:  # DeduplicationScope, FifoThroughputLimit, SqsManagedSseEnabled, KMS…
                continue  # accepted and ignored: they tune AWS's infrastructure, not semantics
        return out

    def to_sqs(self, arn_of: Any = None) -> dict[str, str]:
        out = {
            "VisibilityTimeout": str(self.visibility_timeout_s),
            "DelaySeconds": str(self.delay_s),
            "MessageRetentionPeriod": str(self.retention_s),
            "MaximumMessageSize": str(self.max_message_bytes),
            "ReceiveMessageWaitTimeSeconds": str(self.receive_wait_s),
            "SqsManagedSseEnabled": "false",
        }
        if self.fifo:
            out["FifoQueue"] = "true"
            out["ContentBasedDeduplication"] = str(self.content_based_deduplication).lower()
            out["DeduplicationScope"] = "queue"
            out["FifoThroughputLimit"] = "perQueue"
        if self.redrive_policy:
            out["RedrivePolicy"] = json.dumps(self.redrive_policy.to_json(arn_of),
                                              separators=(",", ":"))
        if self.redrive_allow_policy:
            rap = self.redrive_allow_policy
            doc: dict[str, Any] = {"redrivePermission": rap.permission}
            if rap.source_queues:
                doc["sourceQueueArns"] = [arn_of(q) if arn_of else q for q in rap.source_queues]
            out["RedriveAllowPolicy"] = json.dumps(doc, separators=(",", ":"))
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "visibility_timeout_s": self.visibility_timeout_s,
            "delay_s": self.delay_s,
            "retention_s": self.retention_s,
            "max_message_bytes": self.max_message_bytes,
            "receive_wait_s": self.receive_wait_s,
            "redrive_policy": (
                {"dead_letter_queue": self.redrive_policy.dead_letter_queue,
                 "max_receive_count": self.redrive_policy.max_receive_count}
                if self.redrive_policy else None),
            "redrive_allow_policy": (
                {"permission": self.redrive_allow_policy.permission,
                 "source_queues": list(self.redrive_allow_policy.source_queues)}
                if self.redrive_allow_policy else None),
            "fifo": self.fifo,
            "content_based_deduplication": self.content_based_deduplication,
            "tags": dict(self.tags),
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> QueueAttributes:
        """Rebuild attributes stored by `to_json` (already validated when written)."""
        rp = doc.get("redrive_policy")
        rap = doc.get("redrive_allow_policy")
        return cls(
            visibility_timeout_s=doc["visibility_timeout_s"],
            delay_s=doc["delay_s"],
            retention_s=doc["retention_s"],
            max_message_bytes=doc["max_message_bytes"],
            receive_wait_s=doc["receive_wait_s"],
            redrive_policy=RedrivePolicy(rp["dead_letter_queue"], rp["max_receive_count"])
            if rp else None,
            redrive_allow_policy=RedriveAllowPolicy(rap["permission"], tuple(rap["source_queues"]))
            if rap else None,
            fifo=doc["fifo"],
            content_based_deduplication=doc["content_based_deduplication"],
            tags=dict(doc.get("tags", {})),
        )


_SQS_INT = {
    "VisibilityTimeout": "visibility_timeout_s",
    "DelaySeconds": "delay_s",
    "MessageRetentionPeriod": "retention_s",
    "MaximumMessageSize": "max_message_bytes",
    "ReceiveMessageWaitTimeSeconds": "receive_wait_s",
}
_SQS_SETTABLE = set(_SQS_INT) | {
    "FifoQueue", "ContentBasedDeduplication", "RedrivePolicy", "RedriveAllowPolicy",
    "DeduplicationScope", "FifoThroughputLimit", "SqsManagedSseEnabled", "KmsMasterKeyId",
    "KmsDataKeyReusePeriodSeconds", "Policy",
}


def _parse_bool(key: str, value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise ValidationError(key, "must be true or false")
    return value.lower() == "true"


def _load_json(key: str, value: str) -> dict[str, Any]:
    try:
        doc = json.loads(value)
    except json.JSONDecodeError:
        raise ValidationError(key, "must be a JSON object") from None
    if not isinstance(doc, dict):
        raise ValidationError(key, "must be a JSON object")
    return doc


def _parse_redrive(value: str, resolve: Any) -> RedrivePolicy:
    doc = _load_json("RedrivePolicy", value)
    target = doc.get("deadLetterTargetArn")
    if not isinstance(target, str) or not target:
        raise ValidationError("RedrivePolicy.deadLetterTargetArn", "is required")
    count = check_range("RedrivePolicy.maxReceiveCount", doc.get("maxReceiveCount", ""), 1,
                        MAX_RECEIVE_COUNT)
    return RedrivePolicy(resolve(target), count)


def _parse_allow(value: str, resolve: Any) -> RedriveAllowPolicy:
    doc = _load_json("RedriveAllowPolicy", value)
    sources = doc.get("sourceQueueArns") or []
    if not isinstance(sources, list):
        raise ValidationError("RedriveAllowPolicy.sourceQueueArns", "must be a list")
    return RedriveAllowPolicy(str(doc.get("redrivePermission", "")),
                              tuple(resolve(s) for s in sources))


def validate_tags(tags: dict[str, str]) -> None:
    if len(tags) > MAX_TAGS:
        raise ValidationError("Tags", f"at most {MAX_TAGS} tags per queue")
    for key, value in tags.items():
        if not isinstance(key, str) or not 1 <= len(key) <= 128:
            raise ValidationError("Tags", "a tag key must be 1-128 characters")
        if not isinstance(value, str) or len(value) > 256:
            raise ValidationError(f"Tags.{key}", "a tag value must be at most 256 characters")


@dataclass(frozen=True)
class QueueRecord:
    """A stored queue: its id (what messages and receipts refer to) and attributes."""

    id: int
    name: str
    attributes: QueueAttributes
    created_at: int
    modified_at: int
    purged_at: int | None = None


@dataclass(frozen=True)
class QueueCounts:
    """SQS's approximate counts: visible, in flight (leased) and delayed messages."""

    visible: int
    in_flight: int
    delayed: int


@dataclass(frozen=True)
class MoveTask:
    """A message move task (SQS StartMessageMoveTask): a DLQ drained at a rate."""

    handle: str
    source_queue_id: int
    destination_queue_id: int | None  # None: each message back to the queue it came from
    max_per_second: int | None
    status: MoveTaskStatus
    moved: int
    to_move: int
    started_at: int
    failure_reason: str | None = None
