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
#: Woken when a message move task starts: the sweepers advance them.
MOVES_CHANNEL = "moves"
#: Woken when a push subscription is created, changed or deleted: every node's pushers
#: read the subscriptions again (push/pushers.py).
SUBSCRIPTIONS_CHANNEL = "subscriptions"
#: Woken when a limit is set, deleted, paused or resumed (the CLI, the API, the console, an
#: app's declarations, a downstream's pushback): every node's limit book reads them again
#: (limits/book.py).
LIMITS_CHANNEL = "limits"
#: The longest a node's dispatcher and consumers sleep without a wake-up, whatever they
#: were told (TIDINGS_POLL_FALLBACK_S; this is its default): what a lost wake-up (or one
#: never sent) can cost. Wake-ups make polling unnecessary, so it is long: an idle node
#: wakes for nothing else.
POLL_FALLBACK_S = 5.0
SCHEDULES_POLL_S = POLL_FALLBACK_S


def wake_horizon_ms(poll_fallback_s: float) -> int:
    """A schedule due later than this from now needs no wake-up: twice the dispatchers'
    fallback poll, so every sleeping dispatcher has read the next due instant again, with
    a fallback to spare, before the schedule is due. Every process writing to the database
    must therefore use the nodes' fallback (the same TIDINGS_POLL_FALLBACK_S)."""
    return int(2 * poll_fallback_s * 1000)


WAKE_HORIZON_MS = wake_horizon_ms(POLL_FALLBACK_S)


def wakes_dispatchers(due_at: int | None, now: int,
                      horizon_ms: int = WAKE_HORIZON_MS) -> bool:
    """Whether a schedule written at `now`, due at `due_at`, must wake the dispatchers.

    Most schedules are created for later (a reminder in three days, a drip's next step),
    and their wake-up was pure cost: on PostgreSQL a NOTIFY in the creating transaction,
    whose commit takes a lock for the whole server until its WAL flush, and a pass of
    every dispatcher that finds nothing due. One-at-a-time creations due an hour ahead
    went from 1,755-1,839 to 2,252-2,256 a second on PostgreSQL without it."""
    return due_at is not None and due_at - now <= horizon_ms


def queue_channel(queue_id: int) -> str:
    return f"queue:{queue_id}"
