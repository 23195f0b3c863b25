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
    ActionAfterCompletion,
    Schedule,
    ScheduleGroup,
    ScheduleSpec,
    Target,
)
from tidings.model.states import CampaignStatus, DeliveryState, MoveTaskStatus, ScheduleState

Row = Sequence[Any]


def queue_record(row: Row) -> QueueRecord:
    queue_id, name, attributes, created_at, modified_at, purged_at = row
    return QueueRecord(queue_id, name, QueueAttributes.from_json(json.loads(attributes)),
                       created_at, modified_at, purged_at)


def stored_message(row: Row, fifo: bool) -> StoredMessage:
    """A message row (the `*_columns` queries); a FIFO queue's sequence number is the row
    id."""
    (row_id, lease_token, message_id, body, md5_body, attributes_json, md5_attributes,
     receive_count, first_received_at, sent_at, visible_at, group_id, deduplication_id,
     source_queue_id, last_error, scheduled_at) = row
    return StoredMessage(row_id, lease_token, message_id, body, md5_body, attributes_json,
                         md5_attributes, receive_count, first_received_at, sent_at,
                         visible_at, group_id, deduplication_id, source_queue_id, last_error,
                         scheduled_at, row_id if fifo else None)


def move_task(row: Row) -> MoveTask:
    (handle, source, destination, max_per_second, status, moved, to_move, started_at,
     failure_reason) = row
    return MoveTask(handle, source, destination, max_per_second, MoveTaskStatus(status),
                    moved, to_move, started_at, failure_reason)


@lru_cache(maxsize=1024)
def target_of(text: str) -> Target:
    """Targets are immutable and mostly shared (a fan-out names one queue): parse once."""
    return Target.from_json(json.loads(text))


_STATES = {s.value: s for s in ScheduleState}
_ACTIONS = {a.value: a for a in ActionAfterCompletion}


def schedule(row: Row) -> Schedule:
    (schedule_id, group, name, state, expression, timezone, start_ms, end_ms, flex, target,
     action, description, client_token, next_fire_at, due_at, last_fired_at, created_at,
     modified_at, version) = row
    spec = ScheduleSpec(name, expression, target_of(target), group, timezone, start_ms,
                        end_ms, _STATES[state], flex, _ACTIONS[action], description,
                        client_token)
    return Schedule(spec, schedule_id, next_fire_at, due_at, last_fired_at, created_at,
                    modified_at, version)


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
