"""One firing of a schedule as every target sees it: its identity (the execution id), its
context, the delivery job that carries it, and the input with the context substituted.
A record below the services, so the email log (which resends deliveries) and the targets
share it without importing each other."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from typing import Any

from tidings.clock import iso

_EXECUTION_NS = uuid.UUID("6f1c2b8e-3f0a-4c59-9d51-7a0e2f1b9c44")

#: EventBridge Scheduler's context attributes, substituted into a target's Input.
#: https://docs.aws.amazon.com/scheduler/latest/UserGuide/managing-schedule-context-attributes.html
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"
EXECUTION_ID = "<aws.scheduler.execution-id>"
ATTEMPT_NUMBER = "<aws.scheduler.attempt-number>"
SCHEDULE_ARN = "<aws.scheduler.schedule-arn>"


def _uuid5(name: str) -> str:
    """`str(uuid.uuid5(_EXECUTION_NS, name))` without building UUID objects: the dispatcher
    makes one per firing, tens of thousands a second."""
    digest = bytearray(hashlib.sha1(_EXECUTION_NS.bytes + name.encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def execution_id(schedule_id: int, created_at: int, occurrence: int) -> str:
    """The id of one occurrence of one schedule: the same for every retry and on every node
    (consumers, FIFO deduplication and the email log dedupe on it), and never the id of
    another schedule's firing. The schedule is named by its incarnation, its row id and
    creation instant together: row ids are never reused (migration 14), and the instant
    also tells apart a schedule created after a restore from a backup took the database's
    id sequence back. (Ids made before that step hashed "id/occurrence", one slash: no
    name of this form can equal one of those.)"""
    return _uuid5(f"{schedule_id}:{created_at}/{occurrence}")


@dataclass(frozen=True)
class FiringContext:
    schedule_arn: str
    group: str
    name: str
    scheduled_time: int  # the occurrence, epoch ms
    execution_id: str

    @classmethod
    def of(cls, schedule_id: int, created_at: int, group: str, name: str, occurrence: int,
           schedule_arn: str) -> FiringContext:
        return cls(schedule_arn, group, name, occurrence,
                   execution_id(schedule_id, created_at, occurrence))

    def to_json(self) -> dict[str, Any]:
        return {"schedule_arn": self.schedule_arn, "group": self.group, "name": self.name,
                "scheduled_time": self.scheduled_time, "execution_id": self.execution_id}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> FiringContext:
        return cls(doc["schedule_arn"], doc["group"], doc["name"], doc["scheduled_time"],
                   doc["execution_id"])


DELIVERY_JOB = "tidings.delivery"


def delivery_job(ctx: FiringContext, target: Any, body: str | None) -> dict[str, Any]:
    """The job document of one delivery to a `Target` (also kept in the email log, so a
    failed email can be resent after its schedule is gone)."""
    return {"type": DELIVERY_JOB, "id": ctx.execution_id, "context": ctx.to_json(),
            "target": target.to_json(), "input": body}


def scheduled_time_text(ms: int) -> str:
    """AWS prints the scheduled time as e.g. 2022-11-04T09:00:00Z (second precision)."""
    return iso(ms - ms % 1000).replace(".000Z", "Z")


def render_input(text: str, ctx: FiringContext, attempt: int | None) -> str:
    """Substitute the context attributes; the attempt number is left for the delivery
    (it is only known there) when `attempt` is None."""
    if "<aws.scheduler." not in text:
        return text
    out = (text.replace(SCHEDULED_TIME, scheduled_time_text(ctx.scheduled_time))
           .replace(EXECUTION_ID, ctx.execution_id)
           .replace(SCHEDULE_ARN, ctx.schedule_arn))
    if attempt is not None:
        out = out.replace(ATTEMPT_NUMBER, str(attempt))
    return out
