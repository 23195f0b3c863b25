"""The firing history: each schedule's last firings and their outcome, for every target
kind, shown on the console's schedule page.

A queue target's outcome is known when the dispatcher fires it, so its row is written in
the firing's own transaction (one statement per batch). A webhook's, function's or
email's outcome is known only when its delivery ends (delivered, suppressed, or given up
after its retries), so the delivery path records it then. A firing that deletes its
schedule (a one-shot whose action after completion is DELETE) writes no row: no page can
show it, and such one-shots are the high-volume case. Rows older than
`TIDINGS_FIRING_HISTORY_S` (a day by default) are deleted by the sweeper, oldest first, in
short transactions (`TRIM_STEP` rows each, so no firing waits long behind one), so the
table holds that long a span of firings whatever the rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from tidings.clock import Clock
from tidings.store.base import FiringOutcome, ScheduleStore

KEEP_MS = 86_400_000  # a day of history (TIDINGS_FIRING_HISTORY_S)
TRIM_STEP = 2_000  # rows deleted per transaction at most
TRIM_LIMIT = 50_000  # rows deleted per sweeper pass at most
SHOWN = 10


class Outcome(StrEnum):
    DELIVERED = "delivered"  # in its queue, or accepted by its webhook / function / SMTP
    SUPPRESSED = "suppressed"  # a function (or the suppression list) said not to send
    DEAD_LETTERED = "dead-lettered"  # gave up; the event went to the target's DLQ
    DROPPED = "dropped"  # gave up with no DLQ to take the event
    SKIPPED = "skipped"  # a missed occurrence older than its maximum event age
    # A copy of a firing whose execution id was already delivered (a redelivery after a
    # crash between the delivery and its acknowledgement): not delivered again.
    DUPLICATE = "duplicate"


@dataclass(frozen=True)
class FiringRecord:
    occurrence: int
    at: int
    outcome: str
    attempts: int
    detail: str | None

    @property
    def good(self) -> bool:
        return self.outcome in (Outcome.DELIVERED, Outcome.SUPPRESSED, Outcome.DUPLICATE)


def outcome_row(schedule_id: int, occurrence: int, at: int, outcome: Outcome,
                attempts: int = 1, detail: str | None = None) -> FiringOutcome:
    return FiringOutcome(schedule_id, occurrence, at, outcome.value, attempts,
                         None if detail is None else detail[:500])


class FiringLog:
    def __init__(self, store: ScheduleStore, clock: Clock, keep_ms: int = KEEP_MS) -> None:
        self.store = store
        self.clock = clock
        self.keep_ms = keep_ms

    def record(self, schedule_id: int, occurrence: int, outcome: Outcome, attempts: int,
               detail: str | None = None) -> None:
        self.store.record_firings([outcome_row(schedule_id, occurrence, self.clock.now_ms(),
                                               outcome, attempts, detail)])

    def record_many(self, _key: None, items: Sequence[tuple[int, int, Outcome, int, str | None]],
                    ) -> list[None]:
        """`record` for many deliveries' outcomes in one transaction (a `Batcher`'s write:
        concurrent deliveries share it)."""
        now = self.clock.now_ms()
        self.store.record_firings([outcome_row(schedule_id, occurrence, now, outcome,
                                               attempts, detail)
                                   for schedule_id, occurrence, outcome, attempts, detail
                                   in items])
        return [None] * len(items)

    def recent(self, schedule_id: int, limit: int = SHOWN, *,
               since: int = 0) -> list[FiringRecord]:
        """The schedule's last firings with a final outcome, newest first, recorded at or
        after `since` (the schedule's creation instant: a database made before schedule
        ids were never reused can still hold an earlier schedule's rows under its id)."""
        return [FiringRecord(r.occurrence, r.at, r.outcome, r.attempts, r.detail)
                for r in self.store.recent_firings(schedule_id, since, limit)]

    def trim(self, limit: int = TRIM_STEP) -> int:
        """Forget rows older than the history keeps (at most `limit`, in one transaction)."""
        return self.store.trim_firings(self.clock.now_ms() - self.keep_ms, limit)
