"""Rows to records, for every backend: the columns of each named `*_columns` query (and
the RETURNING lists that repeat them) in one place, unpacked by name."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from tidings.model.campaigns import CampaignRecord, Step
from tidings.model.email import Delivery, StoredTemplate, Suppression, SuppressionReason
from tidings.model.messages import StoredMessage
from tidings.model.queues import MoveTask, QueueAttributes, QueueRecord
from tidings.model.schedules import (
    DEFAULT_RETRY_POLICY,
    ActionAfterCompletion,
    RetryPolicy,
    Schedule,
    ScheduleGroup,
    ScheduleSpec,
    Target,
    TargetKind,
)
from tidings.model.states import CampaignStatus, DeliveryState, MoveTaskStatus, ScheduleState

Row = Sequence[Any]


def queue_record(row: Row) -> QueueRecord:
    queue_id, name, attributes, created_at, modified_at, purged_at = row
    return QueueRecord(queue_id, name, QueueAttributes.from_json(json.loads(attributes)),
                       created_at, modified_at, purged_at)


_MESSAGE_FIELDS = ("row_id", "lease_token", "message_id", "body", "md5_body", "attributes_json",
                   "md5_attributes", "receive_count", "first_received_at", "sent_at",
                   "visible_at", "group_id", "deduplication_id", "source_queue_id",
                   "last_error", "scheduled_at")
_new = object.__new__
_set = object.__setattr__


def stored_message(row: Row, fifo: bool) -> StoredMessage:
    """Built without the frozen dataclass's `__init__` (17 guarded `setattr`s): a
    consumer builds one per job, and that `__init__` was a quarter of a no-op job's
    cost. The row's columns are `_MESSAGE_FIELDS` in order (the `*_columns` queries)."""
    fields = dict(zip(_MESSAGE_FIELDS, row, strict=True))
    fields["sequence_number"] = fields["row_id"] if fifo else None  # row id: FIFO sequence
    message = _new(StoredMessage)
    _set(message, "__dict__", fields)
    return message


def move_task(row: Row) -> MoveTask:
    (handle, source, destination, max_per_second, status, moved, to_move, started_at,
     failure_reason) = row
    return MoveTask(handle, source, destination, max_per_second, MoveTaskStatus(status),
                    moved, to_move, started_at, failure_reason)


_KINDS = {k.value: k for k in TargetKind}


@lru_cache(maxsize=1024)
def target_of(text: str) -> Target:
    """Targets are immutable and mostly shared (a fan-out names one queue): parse once.
    Built like `schedule`, without `Target.__init__` (its checks passed when the schedule
    was written): one-shot jobs each carry their own input, so a burst of firings misses
    this cache on every row and the frozen `__init__` was a quarter of a claim's Python."""
    doc = json.loads(text)
    rp = doc.get("retry_policy")
    options = doc.get("options")
    made = _new(Target)
    _set(made, "__dict__", {
        "kind": _KINDS[doc["kind"]], "destination": doc.get("destination", ""),
        "input": doc.get("input"), "message_group_id": doc.get("message_group_id"),
        "retry_policy": RetryPolicy(rp["maximum_retry_attempts"], rp["maximum_event_age_s"])
        if rp else DEFAULT_RETRY_POLICY,
        "dead_letter_queue": doc.get("dead_letter_queue"), "role_arn": doc.get("role_arn"),
        "options": dict(options) if options else {}, "arn": doc.get("arn")})
    return made


_STATES = {s.value: s for s in ScheduleState}
_ACTIONS = {a.value: a for a in ActionAfterCompletion}


def schedule(row: Row) -> Schedule:
    """Built like `stored_message`, without the frozen dataclasses' `__init__` (20 guarded
    `setattr`s): the dispatcher builds one per claimed schedule. Every field of both
    classes is set here (tests/unit/store/test_schedule_rows.py compares with `__init__`'s)."""
    (schedule_id, group, name, state, expression, timezone, start_ms, end_ms, flex, target,
     action, description, client_token, next_fire_at, due_at, last_fired_at, created_at,
     modified_at, version) = row
    spec = _new(ScheduleSpec)
    _set(spec, "__dict__", {
        "name": name, "expression": expression, "target": target_of(target), "group": group,
        "timezone": timezone, "start_ms": start_ms, "end_ms": end_ms,
        "state": _STATES[state], "flexible_window_minutes": flex,
        "action_after_completion": _ACTIONS[action], "description": description,
        "client_token": client_token, "kms_key_arn": None})
    made = _new(Schedule)
    _set(made, "__dict__", {
        "spec": spec, "id": schedule_id, "next_fire_at": next_fire_at, "due_at": due_at,
        "last_fired_at": last_fired_at, "created_at": created_at, "modified_at": modified_at,
        "version": version})
    return made


def schedule_group(row: Row) -> ScheduleGroup:
    name, created_at, modified_at, tags, client_token = row
    return ScheduleGroup(name, created_at, modified_at, json.loads(tags), client_token)


def template(row: Row) -> StoredTemplate:
    name, subject, html, text, created_at, modified_at = row
    return StoredTemplate(name, subject, html, text, created_at, modified_at)


def suppression(row: Row) -> Suppression:
    address, reason, created_at = row
    return Suppression(address, SuppressionReason(reason), created_at)


def delivery(row: Row) -> Delivery:
    (seq, delivery_id, message_id, execution_id, schedule_name, template_name, sender,
     recipients, state, detail, attempts, created_at, updated_at, document) = row
    return Delivery(seq=seq, id=delivery_id, message_id=message_id,
                    execution_id=execution_id, schedule=schedule_name,
                    template=template_name, sender=sender,
                    recipients=tuple(json.loads(recipients)), state=DeliveryState(state),
                    detail=detail, attempts=attempts, created_at=created_at,
                    updated_at=updated_at, document=document)


def steps_text(steps: Sequence[Step]) -> str:
    return json.dumps([s.to_json() for s in steps], separators=(",", ":"))


def campaign(row: Row) -> CampaignRecord:
    (name, steps, template_name, status, rows_read, created, row_errors, cancelled,
     created_at, modified_at) = row
    return CampaignRecord(
        name=name, steps=tuple(Step.from_json(d) for d in json.loads(steps)),
        template=template_name, status=CampaignStatus(status), rows_read=int(rows_read),
        schedules_created=int(created), row_errors=int(row_errors),
        cancelled=int(cancelled), created_at=int(created_at), modified_at=int(modified_at))


def prefix_range(prefix: str) -> tuple[str, str]:
    """[prefix, prefix + U+10FFFF): a prefix match an index range scan can serve (LIKE's
    wildcards could hide in a prefix; a range cannot)."""
    return prefix, prefix + "\U0010ffff"
