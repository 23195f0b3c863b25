"""Dead letters back to work: redrive now, or a rate-limited message move task (SQS's
StartMessageMoveTask), over the same store calls.

A collaborator of `QueueService`, which refuses tidings' own queues before it calls in
here, and of `QueueOps`, whose sweeper step advances the running tasks (`advance`)."""

from __future__ import annotations

import base64
import secrets
from collections.abc import Sequence
from dataclasses import replace

from tidings.clock import Clock
from tidings.errors import ConflictError, QueueNotFound, ValidationError
from tidings.model.queues import MoveTask, QueueRecord, check_range
from tidings.model.states import MoveTaskStatus
from tidings.notify.base import MOVES_CHANNEL, Notifier, queue_channel
from tidings.store.base import QueueStore


class Redrive:
    def __init__(self, store: QueueStore, clock: Clock, notifier: Notifier) -> None:
        self.store = store
        self.clock = clock
        self.notifier = notifier
    def redrive(self, dlq: str, destination: str | None = None, *, limit: int | None = None,
                chunk: int = 1000) -> int:
        """Move messages out of a DLQ now: to `destination`, or each to its source queue."""
        source = self._move_source(dlq)
        dest_id = self._move_destination(destination)
        moved = 0
        while limit is None or moved < limit:
            step = chunk if limit is None else min(chunk, limit - moved)
            n = self.store.move_messages(source.id, dest_id, step, self.clock.now_ms())
            moved += n
            if n < step:
                break
        self._notify_destinations(source.id, dest_id)
        return moved

    def redrive_selected(self, dlq: str, row_ids: Sequence[int],
                         destination: str | None = None) -> int:
        """Move the chosen messages of a DLQ (by the row ids a peek shows) back to their
        source queues, or to `destination`; ids no longer in the DLQ are skipped."""
        if len(row_ids) > 1000:
            raise ValidationError("messages", "at most 1000 messages can be chosen at once")
        source = self._move_source(dlq)
        dest_id = self._move_destination(destination)
        moved = self.store.move_selected_messages(source.id, dest_id, list(row_ids),
                                                  self.clock.now_ms())
        self._notify_destinations(source.id, dest_id)
        return moved

    def _notify_destinations(self, source_id: int, dest_id: int | None) -> None:
        if dest_id is not None:
            self.notifier.notify(queue_channel(dest_id))
            return
        for q in self.store.list_queues("", None, 10_000):
            self.notifier.notify(queue_channel(q.id))

    def _move_destination(self, destination: str | None) -> int | None:
        if not destination:
            return None
        return self.store.get_queue(destination).id

    def _move_source(self, dlq: str) -> QueueRecord:
        record = self.store.get_queue(dlq)
        if not self.store.dead_letter_sources(dlq):
            raise ValidationError("SourceArn",
                                  f"queue {dlq!r} is not a dead-letter queue of any queue")
        return record

    def start_move_task(self, dlq: str, destination: str | None = None,
                        max_per_second: int | None = None) -> str:
        source = self._move_source(dlq)
        if max_per_second is not None:
            check_range("MaxNumberOfMessagesPerSecond", max_per_second, 1, 500)
        for task in self.store.list_move_tasks(source.id, 10):
            if task.status is MoveTaskStatus.RUNNING:
                raise ValidationError("SourceArn", "a message move task is already running")
        dest_id = self._move_destination(destination)
        handle = base64.urlsafe_b64encode(secrets.token_bytes(18)).decode()
        counts = self.store.queue_counts(source.id, self.clock.now_ms())
        self.store.create_move_task(MoveTask(
            handle, source.id, dest_id, max_per_second, MoveTaskStatus.RUNNING, 0,
            counts.visible + counts.in_flight + counts.delayed, self.clock.now_ms()))
        self.notifier.notify(MOVES_CHANNEL)  # a resting sweeper starts it at once
        return handle

    def list_move_tasks(self, dlq: str, limit: int = 1) -> list[MoveTask]:
        check_range("MaxResults", limit, 1, 10)
        return self.store.list_move_tasks(self.store.get_queue(dlq).id, limit)

    def cancel_move_task(self, handle: str) -> MoveTask:
        for task in self.store.active_move_tasks():
            if task.handle == handle:
                self.store.set_move_task_status(handle, MoveTaskStatus.RUNNING,
                                                MoveTaskStatus.CANCELLED)
                return replace(task, status=MoveTaskStatus.CANCELLED)
        raise ValidationError("TaskHandle", "no running message move task has this handle")

    def advance(self, elapsed_s: float) -> int:
        """One step of every running move task: at most its rate × elapsed messages."""
        total = 0
        for task in self.store.active_move_tasks():
            budget = 500 if task.max_per_second is None else task.max_per_second
            step = max(int(budget * elapsed_s), 1)
            n = self.store.move_messages(task.source_queue_id, task.destination_queue_id, step,
                                         self.clock.now_ms())
            total += n
            if n:
                self.store.add_move_task_progress(task.handle, n)
                self._notify_destinations(task.source_queue_id, task.destination_queue_id)
            if n < step:
                try:
                    self.store.set_move_task_status(task.handle, MoveTaskStatus.RUNNING,
                                                    MoveTaskStatus.COMPLETED)
                except ConflictError:
                    pass  # cancelled meanwhile: that answer stands
        return total

    def queue_names(self, tasks: Sequence[MoveTask]) -> dict[int, str]:
        """The names of the queues that move tasks name by id; a queue deleted since is left
        out. One lookup per distinct queue, not a listing of every queue."""
        names: dict[int, str] = {}
        for queue_id in {q for task in tasks
                         for q in (task.source_queue_id, task.destination_queue_id)
                         if q is not None}:
            try:
                names[queue_id] = self.store.get_queue_by_id(queue_id).name
            except QueueNotFound:
                pass
        return names

