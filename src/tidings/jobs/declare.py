"""Queues an app declares, created at start: idempotent, and never overwritten.

Each queue the app consumes is created (with its dead-letter queue first) if missing. A
queue that exists with other attributes than declared is left as it is, and the
difference is reported in the log: changing a live queue's visibility timeout or DLQ
behind its operators' backs would be worse than a warning (`tidings queue update` or
SetQueueAttributes changes it on purpose).
"""

from __future__ import annotations

import logging
from typing import Any

from tidings.errors import QueueNotFound
from tidings.jobs.handlers import Handlers
from tidings.model.queues import QueueAttributes
from tidings.queues.service import QueueService

log = logging.getLogger("tidings.consumers")


def differences(have: QueueAttributes, want: QueueAttributes) -> dict[str, tuple[Any, Any]]:
    """Attribute name → (existing, declared), tags aside."""
    a, b = have.to_json(), want.to_json()
    return {k: (a[k], b[k]) for k in b if k != "tags" and a.get(k) != b[k]}


def declare_queues(queues: QueueService, app: Handlers) -> list[str]:
    """Create what is missing; return one line per difference found (also logged)."""
    reports: list[str] = []
    for name in app.queues():
        declaration = app.declaration(name)
        if declaration.dead_letter_queue:
            _ensure(queues, declaration.dead_letter_queue,
                    QueueAttributes.build(fifo=declaration.dead_letter_queue.endswith(".fifo")),
                    reports, declared=False)
        _ensure(queues, name, declaration.queue_attributes(), reports, declared=True)
    return reports


def _ensure(queues: QueueService, name: str, want: QueueAttributes, reports: list[str],
            *, declared: bool) -> None:
    try:
        have = queues.get_queue(name)
    except QueueNotFound:
        queues.create_queue(name, **_kwargs(want))
        log.info("created queue %s", name)
        return
    if not declared:
        return  # an existing DLQ is used as it is
    diff = differences(have.attributes, want)
    if diff:
        line = f"queue {name} exists with other attributes than the app declares: " + \
            ", ".join(f"{k} is {old!r}, declared {new!r}" for k, (old, new) in diff.items())
        log.warning("%s (left as it is)", line)
        reports.append(line)


def _kwargs(attrs: QueueAttributes) -> dict[str, Any]:
    return {"visibility_timeout_s": attrs.visibility_timeout_s, "delay_s": attrs.delay_s,
            "retention_s": attrs.retention_s, "max_message_bytes": attrs.max_message_bytes,
            "receive_wait_s": attrs.receive_wait_s, "redrive_policy": attrs.redrive_policy,
            "fifo": attrs.fifo,
            "content_based_deduplication": attrs.content_based_deduplication}
