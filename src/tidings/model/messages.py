"""Messages: what a sender gives, what the store keeps and what a receiver gets."""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from tidings.errors import ValidationError
from tidings.model.digests import (
    MessageAttributeValue,
    attributes_size,
    md5_of_attributes,
    md5_of_body,
    validate_attributes,
)
from tidings.model.receipts import Receipt

# SQS accepts only these characters in a body (XML 1.0 characters):
# https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html
_INVALID_BODY_CHARS = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_ID_RE = re.compile(r"^[A-Za-z0-9!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]{1,128}$")


_ids = random.Random()  # seeded from os.urandom once, at import


def new_message_id() -> str:
    """A random (version 4) UUID without a system call per message: message ids must be
    unique, not secret (receipts are HMAC-signed), and `uuid.uuid4()` reads the OS random
    source every time, which showed up as the hot spot of SendMessage.
    """
    h = f"{_ids.getrandbits(128) & ~(0xF << 76) & ~(0x3 << 62) | (0x4 << 76) | (0x2 << 62):032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@dataclass(frozen=True)
class OutgoingMessage:
    """One message to send; validated against its queue by `prepare`."""

    body: str
    delay_s: int | None = None  # None: the queue's DelaySeconds
    attributes: Mapping[str, MessageAttributeValue] = field(default_factory=dict)
    group_id: str | None = None
    deduplication_id: str | None = None
    entry_id: str | None = None  # the caller's id within a batch
    deliver_at: int | None = None  # epoch ms: receivable from then on (native faces only)


class NewMessage(NamedTuple):
    """A validated message ready for the store: all instants computed, digests taken.
    Validated by `prepare` (or the engine that builds one), not here: a tuple, as every
    send and every firing makes one."""

    message_id: str
    body: str
    md5_body: str
    attributes: dict[str, MessageAttributeValue] | None
    md5_attributes: str | None
    visible_at: int
    sent_at: int
    expires_at: int
    group_id: str | None
    deduplication_id: str | None
    scheduled_at: int | None = None  # the occurrence, when a schedule fired it


@dataclass(frozen=True)
class SendResult:
    entry_id: str | None
    message_id: str
    md5_body: str
    md5_attributes: str | None
    sequence_number: str | None
    duplicate: bool = False  # FIFO: an earlier message had this deduplication id


class StoredMessage(NamedTuple):
    """A message row as the store hands it out: leased by a receive (before the engine
    signs its receipt), or read by a peek (which leases nothing). A tuple in the order of
    the store's message columns (`store/rows.py`), then the FIFO sequence number: a
    consumer gets one per job."""

    row_id: int
    lease_token: int | None  # None: never received
    message_id: str
    body: str
    md5_body: str
    attributes_json: str | None
    md5_attributes: str | None
    receive_count: int
    first_received_at: int | None
    sent_at: int
    visible_at: int
    group_id: str | None
    deduplication_id: str | None
    source_queue_id: int | None  # in a DLQ: the queue it came from
    last_error: str | None
    scheduled_at: int | None  # the occurrence, when a schedule fired it
    sequence_number: int | None  # FIFO queues: the row id; None elsewhere

    def receipt(self, queue_id: int) -> Receipt:
        """What proves a receive's hold on it (only a leased message has one)."""
        assert self.lease_token is not None, "a peeked message was never leased"
        return Receipt(queue_id, self.row_id, self.lease_token)


@dataclass(frozen=True)
class ReceivedMessage:
    message_id: str
    receipt_handle: str
    body: str
    md5_body: str
    attributes: dict[str, MessageAttributeValue]
    md5_attributes: str | None
    receive_count: int
    first_received_at: int
    sent_at: int
    group_id: str | None
    deduplication_id: str | None
    sequence_number: str | None
    dead_letter_source: str | None = None  # the source queue's ARN, in a DLQ
    last_error: str | None = None
    scheduled_at: int | None = None  # the occurrence, when a schedule fired it

    def system_attributes(self) -> dict[str, str]:
        """The attributes SQS returns for `MessageSystemAttributeNames=All`."""
        out = {
            "ApproximateReceiveCount": str(self.receive_count),
            "ApproximateFirstReceiveTimestamp": str(self.first_received_at),
            "SentTimestamp": str(self.sent_at),
            "SenderId": "tidings",
        }
        if self.group_id is not None:
            out["MessageGroupId"] = self.group_id
        if self.deduplication_id is not None:
            out["MessageDeduplicationId"] = self.deduplication_id
        if self.sequence_number is not None:
            out["SequenceNumber"] = self.sequence_number
        if self.dead_letter_source is not None:
            out["DeadLetterQueueSourceArn"] = self.dead_letter_source
        return out


_BATCH_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")


def validate_batch_ids(ids: list[Any], max_entries: int = 10) -> None:
    """SQS batch rules: 1-10 entries, ids unique and of the allowed characters. An id
    that is not a string (a number in a JSON request) breaks the rule too, not the
    server (found by tests/integration/test_fuzz_aws.py)."""
    if not ids:
        raise ValidationError("Entries", "a batch needs at least one entry")
    if len(ids) > max_entries:
        raise ValidationError("Entries", f"a batch holds at most {max_entries} entries")
    seen: set[str] = set()
    for entry_id in ids:
        if not isinstance(entry_id, str) or not _BATCH_ID.fullmatch(entry_id):
            raise ValidationError("Entries.Id", "must be 1-80 characters of A-Z a-z 0-9 - _")
        if entry_id in seen:
            raise ValidationError("Entries.Id", f"ids must be distinct: {entry_id!r} repeats")
        seen.add(entry_id)


def prepare(
    msg: OutgoingMessage,
    *,
    now: int,
    fifo: bool,
    content_based_dedup: bool,
    default_delay_s: int,
    max_delay_s: int,
    max_bytes: int,
    retention_s: int,
    scheduled_at: int | None = None,
) -> NewMessage:
    """Validate one outgoing message against its queue and compute what the store needs."""
    if not isinstance(msg.body, str) or msg.body == "":
        raise ValidationError("MessageBody", "must be a non-empty string")
    bad = _INVALID_BODY_CHARS.search(msg.body)
    if bad:
        raise ValidationError("MessageBody",
                              f"contains a character SQS does not allow: U+{ord(bad.group()):04X}")
    size = len(msg.body.encode())
    if msg.attributes:  # most messages (every firing's) carry none
        validate_attributes(msg.attributes)
        size += attributes_size(msg.attributes)
    if size > max_bytes:
        raise ValidationError("MessageBody",
                              f"message of {size} bytes is longer than the queue's maximum of"
                              f" {max_bytes} bytes (body plus attributes)")
    delay_s = default_delay_s if msg.delay_s is None else msg.delay_s
    if isinstance(delay_s, bool) or not isinstance(delay_s, int) or not 0 <= delay_s <= max_delay_s:
        raise ValidationError("DelaySeconds", f"must be from 0 to {max_delay_s} seconds")
    visible_at = now + delay_s * 1000
    if msg.deliver_at is not None:
        if msg.delay_s is not None:
            raise ValidationError("deliver_at", "give either a delay or an instant, not both")
        if fifo:
            raise ValidationError("deliver_at",
                                  "per-message delay is not allowed on a FIFO queue")
        if msg.deliver_at > now + max_delay_s * 1000:
            raise ValidationError("deliver_at", f"must be at most {max_delay_s} seconds from "
                                  "now (the queue's limit)")
        visible_at = max(msg.deliver_at, now)
    group_id, dedup_id = msg.group_id, msg.deduplication_id
    if fifo:
        if msg.delay_s not in (None, 0) and msg.delay_s != default_delay_s:
            # SQS: per-message delays are not supported on FIFO queues; the queue's applies.
            raise ValidationError("DelaySeconds",
                                  "per-message delay is not allowed on a FIFO queue")
        if not group_id:
            raise ValidationError("MessageGroupId", "is required for a FIFO queue")
        check_token("MessageGroupId", group_id)
        if dedup_id is None:
            if not content_based_dedup:
                raise ValidationError("MessageDeduplicationId",
                                      "is required: the queue has no ContentBasedDeduplication")
            import hashlib

            dedup_id = hashlib.sha256(msg.body.encode()).hexdigest()
        check_token("MessageDeduplicationId", dedup_id)
    elif dedup_id is not None:
        raise ValidationError("MessageDeduplicationId", "is only valid for FIFO queues")
    elif group_id is not None:
        check_token("MessageGroupId", group_id)  # SQS allows it on standard queues (fair queues)
    attrs = dict(msg.attributes) or None
    return NewMessage(new_message_id(), msg.body, md5_of_body(msg.body), attrs,
                      md5_of_attributes(attrs) if attrs else None, visible_at, now,
                      now + retention_s * 1000, group_id, dedup_id, scheduled_at)


def check_token(field_name: str, value: object) -> str:
    """An SQS id a caller chooses (group, deduplication, receive attempt): 1-128 printable
    ASCII characters."""
    if not isinstance(value, str) or not _ID_RE.match(value):
        raise ValidationError(field_name,
                              "must be 1-128 characters of letters, digits and punctuation")
    return value


def encode_attributes(attrs: Mapping[str, MessageAttributeValue] | None) -> str | None:
    """JSON for the store: {name: [data type, string value or base64 of binary]}."""
    if not attrs:
        return None
    import base64
    import json

    doc = {
        name: [
            value.data_type,
            value.string_value
            if value.binary_value is None
            else base64.b64encode(value.binary_value).decode(),
        ]
        for name, value in attrs.items()
    }
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def decode_attributes(text: str | None) -> dict[str, MessageAttributeValue]:
    if not text:
        return {}
    import base64
    import json

    out: dict[str, MessageAttributeValue] = {}
    for name, (data_type, value) in json.loads(text).items():
        if data_type.startswith("Binary"):
            out[name] = MessageAttributeValue(data_type, binary_value=base64.b64decode(value))
        else:
            out[name] = MessageAttributeValue(data_type, string_value=value)
    return out
