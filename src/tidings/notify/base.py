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
#: The longest a dispatcher sleeps before it reads the next due instant again, whatever it
#: was told: what a lost wake-up (or one never sent) can cost.
SCHEDULES_POLL_S = 1.0
#: A schedule due later than this from now needs no wake-up: twice the poll above, so every
#: sleeping dispatcher has read the next due instant again, with a second to spare, before
#: the schedule is due.
WAKE_HORIZON_MS = int(2 * SCHEDULES_POLL_S * 1000)


def wakes_dispatchers(due_at: int | None, now: int) -> bool:
    """Whether a schedule written at `now`, due at `due_at`, must wake the dispatchers.

    Most schedules are created for later (a reminder in three days, a drip's next step),
    and their wake-up was pure cost: on PostgreSQL a NOTIFY in the creating transaction,
    whose commit takes a lock for the whole server until its WAL flush, and a pass of
    every dispatcher that finds nothing due. One-at-a-time creations due an hour ahead
    went from 1,755-1,839 to 2,252-2,256 a second on PostgreSQL without it."""
    return due_at is not None and due_at - now <= WAKE_HORIZON_MS


def queue_channel(queue_id: int) -> str:
    return f"queue:{queue_id}"
