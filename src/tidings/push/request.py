"""The request a push makes: the message's body as it was sent, headers that say which
message it is, and a Standard Webhooks signature (https://www.standardwebhooks.com/), so
a receiver in any language verifies it with that project's libraries.

Headers (lower case on the wire):
- `webhook-id`: the message id, the same at every attempt: dedupe on it;
- `webhook-timestamp`: when this attempt was signed (Unix seconds);
- `webhook-signature`: `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`, one per
  signing secret, space-separated (two while a rotation's grace lasts);
- `tidings-queue`, `tidings-message-id`, `tidings-receive-count` (1 at the first attempt),
  `tidings-sent-timestamp` (Unix milliseconds, as SQS's SentTimestamp);
  FIFO queues also `tidings-message-group-id` and `tidings-sequence-number`;
- `tidings-message-attributes`: the message attributes as JSON, in SQS's shape
  (`{"name": {"DataType": "String", "StringValue": "…"}}`), when it has any;
- `content-type`: `application/json` when the body is JSON, else `text/plain`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import lru_cache

from standardwebhooks import Webhook

from tidings.model.messages import StoredMessage


@lru_cache(maxsize=256)
def _signer(secret: str) -> Webhook:
    return Webhook(secret)


def signature(secrets: list[str], message_id: str, timestamp_s: int, body: bytes) -> str:
    """The `webhook-signature` header: one `v1,…` per secret, space-separated."""
    when = datetime.fromtimestamp(timestamp_s, UTC)
    return " ".join(_signer(s).sign(message_id, when, body) for s in secrets)


def content_type(body: str) -> str:
    head = body[:1]
    if head in ("{", "[", '"') or head.isdigit() or body in ("true", "false", "null"):
        try:
            json.loads(body)
            return "application/json"
        except ValueError:
            pass
    return "text/plain; charset=utf-8"


def headers(queue: str, m: StoredMessage, secrets: list[str], now_ms: int,
            body: bytes) -> dict[str, str]:
    timestamp_s = now_ms // 1000
    out = {
        "content-type": content_type(m.body),
        "user-agent": "tidings-push/1",
        "webhook-id": m.message_id,
        "webhook-timestamp": str(timestamp_s),
        "webhook-signature": signature(secrets, m.message_id, timestamp_s, body),
        "tidings-queue": queue,
        "tidings-message-id": m.message_id,
        "tidings-receive-count": str(m.receive_count),
        "tidings-sent-timestamp": str(m.sent_at),
    }
    if m.group_id is not None:
        out["tidings-message-group-id"] = m.group_id
    if m.sequence_number is not None:
        out["tidings-sequence-number"] = f"{m.sequence_number:020d}"
    if m.attributes_json:
        out["tidings-message-attributes"] = attributes_header(m.attributes_json)
    return out


def attributes_header(stored: str) -> str:
    """The stored attributes (`{name: [type, value]}`) in SQS's JSON shape; ASCII only, as
    a header must be (json.dumps escapes the rest)."""
    doc = {}
    for name, (data_type, value) in json.loads(stored).items():
        key = "BinaryValue" if data_type.startswith("Binary") else "StringValue"
        doc[name] = {"DataType": data_type, key: value}
    return json.dumps(doc, separators=(",", ":"))
