"""Notifications only wake things up; the store is the truth.

A waiter snapshots `version(channel)` *before* it queries the store, then waits for the
version to move. A notification sent between the query and the wait is therefore never
lost, and a lost one (another process, no shared notifier) costs latency, never
correctness: every wait also has a timeout after which the waiter looks again.
"""

from __future__ import annotations

from typing import Protocol


class Notifier(Protocol):
    def version(self, channel: str) -> int: ...

    def notify(self, channel: str) -> None:
        """Wake everything waiting on `channel`; callable from any thread."""
        ...

    async def wait(self, channel: str, seen: int, timeout: float) -> bool:
        """Return True when `channel` moved past `seen`, False after `timeout` seconds."""
        ...

    def wait_sync(self, channel: str, seen: int, timeout: float) -> bool: ...

    def close(self) -> None: ...


#: Woken when a schedule becomes due earlier than the dispatchers sleep to.
SCHEDULES_CHANNEL = "schedules"


def queue_channel(queue_id: int) -> str:
    return f"queue:{queue_id}"
