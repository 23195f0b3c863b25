"""The internal queues that carry deliveries to targets that are not queues.

A delivery to a webhook or a function target, or an email, travels as a job of one of
these queues, so it gets the queue engine's leases, retries and crash safety for free.
Email has its own queue: only a node with an SMTP relay consumes it, so accepted mail
waits there (it is never failed) until such a node takes it. Clients cannot touch them
(`QueueService` refuses; `tidings.model.queues.INTERNAL_QUEUES`).
"""

from __future__ import annotations

from tidings.errors import QueueNotFound
from tidings.model.queues import DELIVERY_QUEUE, EMAIL_QUEUE, INTERNAL_QUEUES
from tidings.queues.service import QueueService

RETENTION_S = 14 * 24 * 3600  # the SQS maximum: a delivery outlives a long outage


def ensure_internal_queues(queues: QueueService) -> None:
    for name in sorted(INTERNAL_QUEUES):
        queues.ops.ensure_internal(name, visibility_timeout_s=60, retention_s=RETENTION_S)


def backlog(queues: QueueService, name: str) -> int:
    """What an internal queue holds: waiting, being retried or in flight."""
    try:
        counts = queues.describe(name).counts
    except QueueNotFound:
        return 0
    return counts.visible + counts.in_flight + counts.delayed


__all__ = ["DELIVERY_QUEUE", "EMAIL_QUEUE", "INTERNAL_QUEUES", "RETENTION_S", "backlog",
           "ensure_internal_queues"]
