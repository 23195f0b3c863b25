"""`prepare`: what a sender's message becomes for the store, instants and digests taken."""

from __future__ import annotations

import hashlib

from tidings.model.digests import MessageAttributeValue, md5_of_attributes, md5_of_body
from tidings.model.messages import OutgoingMessage, prepare


def _limits(fifo: bool) -> dict[str, object]:
    return {"fifo": fifo, "content_based_dedup": fifo, "default_delay_s": 0,
            "max_delay_s": 900, "max_bytes": 262_144, "retention_s": 60}


def test_a_prepared_message_carries_its_instants_and_digests() -> None:
    got = prepare(OutgoingMessage("hello", delay_s=5), now=1_000, scheduled_at=7,
                  **_limits(False))  # type: ignore[arg-type]
    assert (got.body, got.md5_body) == ("hello", md5_of_body("hello"))
    assert (got.sent_at, got.visible_at, got.expires_at) == (1_000, 6_000, 61_000)
    assert got.attributes is None and got.md5_attributes is None
    assert (got.group_id, got.deduplication_id, got.scheduled_at) == (None, None, 7)


def test_a_fifo_message_gets_its_content_based_deduplication_id() -> None:
    attributes = {"a": MessageAttributeValue("String", "v")}
    got = prepare(OutgoingMessage("x", attributes=attributes, group_id="g"), now=1_000,
                  **_limits(True))  # type: ignore[arg-type]
    assert got.deduplication_id == hashlib.sha256(b"x").hexdigest()
    assert got.attributes == attributes and got.md5_attributes == md5_of_attributes(attributes)
    assert (got.group_id, got.visible_at, got.scheduled_at) == ("g", 1_000, None)
    other = prepare(OutgoingMessage("x", group_id="g"), now=1_000,
                    **_limits(True))  # type: ignore[arg-type]
    assert other.message_id != got.message_id  # every message its own id
