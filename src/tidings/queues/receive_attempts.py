"""FIFO receive request attempt ids: a retried ReceiveMessage gets the same messages back.

SQS (API_ReceiveMessage, ReceiveRequestAttemptId): a caller whose receive failed in
transit (a time-out, a reset connection) retries with the same attempt id and, within
5 minutes, gets the same messages with the same receipt handles, their visibility timeout
reset, unless one of them was deleted or left flight meanwhile; FIFO queues only.

Attempts are remembered in the memory of the node that answered, not in the database: a
retry that reaches another node of a cluster, or a restarted node, is a fresh receive.
That loses nothing: the first receive's messages stay leased until their visibility
timeout runs out, exactly as if no attempt id had been given.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from tidings.model.messages import ReceivedMessage, check_token

ATTEMPT_WINDOW_MS = 5 * 60 * 1000
MAX_REMEMBERED = 10_000  # bounds memory whatever callers do; the oldest go first


def check_attempt_id(value: object) -> str:
    return check_token("ReceiveRequestAttemptId", value)


@dataclass(frozen=True)
class _Attempt:
    expires_at: int
    messages: tuple[ReceivedMessage, ...]


class ReceiveAttempts:
    """(queue id, attempt id) → what that receive returned, for 5 minutes."""

    def __init__(self, limit: int = MAX_REMEMBERED) -> None:
        self._limit = limit
        self._seen: OrderedDict[tuple[int, str], _Attempt] = OrderedDict()
        self._lock = threading.Lock()  # the bridge runs receives on several threads

    def recall(self, queue_id: int, attempt_id: str, now: int) -> list[ReceivedMessage] | None:
        with self._lock:
            self._expire(now)
            got = self._seen.get((queue_id, attempt_id))
            return None if got is None else list(got.messages)

    def remember(self, queue_id: int, attempt_id: str, now: int,
                 messages: list[ReceivedMessage]) -> None:
        with self._lock:
            self._seen[(queue_id, attempt_id)] = _Attempt(now + ATTEMPT_WINDOW_MS,
                                                          tuple(messages))
            self._seen.move_to_end((queue_id, attempt_id))
            while len(self._seen) > self._limit:
                self._seen.popitem(last=False)

    def forget(self, queue_id: int, attempt_id: str) -> None:
        with self._lock:
            self._seen.pop((queue_id, attempt_id), None)

    def _expire(self, now: int) -> None:
        while self._seen:
            key, oldest = next(iter(self._seen.items()))
            if oldest.expires_at > now:
                return
            del self._seen[key]
