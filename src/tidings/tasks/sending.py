"""Sending a task's job: now, after a delay or at an instant, maybe inside the caller's
own database transaction, and the handle that can withdraw it before it is due.

One rule decides how a job waits, so the user never chooses: a job due within half of
its queue's retention period is a delayed message (the queue itself holds it, visible at
its instant); a later one is a one-shot schedule that writes the message at its instant
and deletes itself (a message cannot wait longer than its queue keeps messages, and a
job released after a failed run still needs time left to retry in).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tidings.client import Tidings
from tidings.clock import from_ms
from tidings.errors import ConflictError, QueueNotFound, ScheduleNotFound, ValidationError
from tidings.model.schedules import (
    ActionAfterCompletion,
    ScheduleSpec,
    Target,
    at_expression,
)

#: The schedule group of jobs sent for later than their queue can hold a message.
JOBS_GROUP = "tidings-jobs"
MAX_JOB_ID = 128


@dataclass(frozen=True)
class JobHandle:
    """What a send returns: where the job is and how to withdraw it before it is due."""

    task: str
    job_id: str
    queue: str
    due_at: datetime  # when it becomes runnable (aware, UTC)
    message_id: str | None = None  # a message (sent now, or delayed in its queue)
    schedule: str | None = None  # or a one-shot schedule in the `tidings-jobs` group
    _cancel: Callable[[], bool] | None = field(default=None, repr=False, compare=False)

    def cancel(self) -> bool:
        """Withdraw the job if it is not due yet; False when it is already runnable,
        running, done, or was withdrawn before."""
        return self._cancel() if self._cancel is not None else False


def job_id_text(job_id: Any) -> str:
    if isinstance(job_id, bool) or not isinstance(job_id, str | int):
        raise ValidationError("job_id", "must be a string or an integer")
    text = str(job_id)
    if not 1 <= len(text) <= MAX_JOB_ID:
        raise ValidationError("job_id", f"must be 1-{MAX_JOB_ID} characters")
    return text


def job_body(task: str, job_id: str, args: dict[str, Any], *, once: bool = False) -> str:
    """The job format every face shares: `{"type", "id", "args"}`."""
    doc: dict[str, Any] = {"type": task, "id": job_id, "args": args}
    if once:
        doc["once"] = True
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def send_job(t: Tidings, task: str, queue: str, args: dict[str, Any], *, due_ms: int | None,
             job_id: Any, connection: Any, declare: Callable[[], None]) -> JobHandle:
    """Send one job of `task` on `queue` (created by `declare` if missing), due at
    `due_ms` (None: now)."""
    ident = uuid.uuid4().hex if job_id is None else job_id_text(job_id)
    try:
        record = t.queues.get_queue_cached(queue)
    except QueueNotFound:
        declare()
        record = t.queues.get_queue_cached(queue)
    now = t.clock.now_ms()
    fifo = record.attributes.fifo
    group = task if fifo else None
    if due_ms is None or due_ms <= now:
        sent = t.queues.send(queue, job_body(task, ident, args), group_id=group,
                             deduplication_id=ident if fifo else None, connection=connection)
        return JobHandle(task, ident, queue, from_ms(now), message_id=sent.message_id)
    if not fifo and due_ms - now <= record.attributes.retention_s * 500:
        sent = t.queues.send(queue, job_body(task, ident, args), deliver_at=from_ms(due_ms),
                             connection=connection)
        message_id = sent.message_id
        return JobHandle(task, ident, queue, from_ms(due_ms), message_id=message_id,
                         _cancel=lambda: t.queues.cancel(queue, message_id, due_ms))
    return _schedule(t, task, queue, ident, args, due_ms, group, connection)


def _schedule(t: Tidings, task: str, queue: str, ident: str, args: dict[str, Any],
              due_ms: int, group: str | None, connection: Any) -> JobHandle:
    # Named after the job's identity: the same job id sent again is the same schedule.
    name = "job-" + hashlib.sha256(f"{queue}\n{task}\n{ident}".encode()).hexdigest()[:40]
    spec = ScheduleSpec(
        name, at_expression(from_ms(due_ms)),
        Target.queue(queue, job_body(task, ident, args, once=True), message_group_id=group),
        group=JOBS_GROUP, action_after_completion=ActionAfterCompletion.DELETE,
        description=f"task {task}, job {ident}"[:512])
    ensure_group(t, JOBS_GROUP)
    try:
        made = t.schedules.create(spec, connection=connection)
        due = made.next_fire_at if made.next_fire_at is not None else due_ms
    except ConflictError:
        due = due_ms  # sent before with this id: that schedule is this job

    def cancel() -> bool:
        try:
            t.schedules.delete(name, group=JOBS_GROUP)
        except ScheduleNotFound:
            return False
        return True

    return JobHandle(task, ident, queue, from_ms(due), schedule=name, _cancel=cancel)


def ensure_group(t: Tidings, group: str) -> None:
    try:
        t.schedules.create_group(group)
    except ConflictError:
        pass
