"""The native JSON shapes of queues, messages and move tasks, as plain dicts.

Shared by the HTTP API and the CLI's `--json` output, so both print the same document for
the same thing. Kept free of FastAPI imports: the CLI loads this module on every run.
Instants leave the system here, as ISO-8601 UTC strings.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from tidings.clock import iso
from tidings.model.digests import MessageAttributeValue, decode_binary
from tidings.model.messages import ReceivedMessage, SendResult
from tidings.model.queues import MoveTask, QueueCounts, QueueRecord
from tidings.queues.service import BatchFailure, MessageView


def queue_json(record: QueueRecord, counts: QueueCounts | None = None) -> dict[str, Any]:
    attributes = record.attributes.to_json()
    tags = attributes.pop("tags")
    doc: dict[str, Any] = {
        "name": record.name,
        "fifo": record.attributes.fifo,
        "attributes": attributes,
        "tags": tags,
        "created_at": iso(record.created_at),
        "modified_at": iso(record.modified_at),
    }
    if counts is not None:
        doc["counts"] = {"visible": counts.visible, "in_flight": counts.in_flight,
                         "delayed": counts.delayed}
    return doc


def attribute_json(value: MessageAttributeValue) -> dict[str, Any]:
    if value.binary_value is not None:
        return {"data_type": value.data_type,
                "binary_value": base64.b64encode(value.binary_value).decode()}
    return {"data_type": value.data_type, "string_value": value.string_value}


def parse_attributes(raw: Mapping[str, Mapping[str, Any]] | None,
                     field: str = "attributes") -> dict[str, MessageAttributeValue]:
    """Native message attributes to values; binary values travel as standard base64.

    Only the shape is checked here; the SQS rules (types, names, sizes) are the engine's.
    """
    out: dict[str, MessageAttributeValue] = {}
    for name, spec in (raw or {}).items():
        data = decode_binary(spec.get("binary_value"), f"{field}.{name}.binary_value",
                             "must be standard base64")
        out[name] = MessageAttributeValue(str(spec.get("data_type", "")),
                                          spec.get("string_value"), data)
    return out


def send_json(result: SendResult) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "message_id": result.message_id,
        "md5_of_body": result.md5_body,
        "md5_of_attributes": result.md5_attributes,
        "sequence_number": result.sequence_number,
    }
    if result.entry_id is not None:
        doc = {"id": result.entry_id, **doc}
    return doc


def message_json(m: ReceivedMessage) -> dict[str, Any]:
    return {
        "message_id": m.message_id,
        "receipt_handle": m.receipt_handle,
        "body": m.body,
        "md5_of_body": m.md5_body,
        "md5_of_attributes": m.md5_attributes,
        "attributes": {name: attribute_json(v) for name, v in m.attributes.items()},
        "system_attributes": m.system_attributes(),
        "receive_count": m.receive_count,
        "last_error": m.last_error,
        "dead_letter_source": m.dead_letter_source,
    }


def peeked_json(v: MessageView) -> dict[str, Any]:
    m = v.message
    return {"message_id": m.message_id, "state": v.state.value, "body": m.body,
            "receive_count": m.receive_count, "sent_at": iso(m.sent_at),
            "visible_at": iso(m.visible_at), "group_id": m.group_id,
            "last_error": m.last_error, "dead_letter_source": v.dead_letter_source}


def failure_json(f: BatchFailure) -> dict[str, Any]:
    return {"id": f.entry_id, "code": f.code, "message": f.message,
            "sender_fault": f.sender_fault}


def move_task_json(task: MoveTask, source: str, destination: str | None) -> dict[str, Any]:
    return {
        "task_handle": task.handle,
        "status": str(task.status),
        "source": source,
        "destination": destination,
        "max_per_second": task.max_per_second,
        "moved": task.moved,
        "to_move": task.to_move,
        "started_at": iso(task.started_at),
        "failure_reason": task.failure_reason,
    }
