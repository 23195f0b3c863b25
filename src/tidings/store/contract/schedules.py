"""Schedules, their groups and their firings: what `schedules.service` and the dispatcher
ask of the store."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from tidings.model.messages import NewMessage
from tidings.model.schedules import Schedule, ScheduleGroup, ScheduleRow, ScheduleSpec


@dataclass(frozen=True)
class NewSchedule:
    spec: ScheduleSpec
    next_fire_at: int | None
    due_at: int | None


class TargetMessage(NamedTuple):
    """A message a firing writes, in the firing's own transaction."""

    queue_id: int
    fifo: bool
    message: NewMessage


class Firing(NamedTuple):
    """The outcome of one claimed schedule: what to write, applied only if the pass's hold
    on the row is still good (`FiringPass.complete`). A tuple: a pass plans one per
    schedule it claimed."""

    schedule_id: int
    occurrence: int  # the next_fire_at the pass read
    next_fire_at: int | None
    due_at: int | None
    delete: bool
    fired: bool  # False when the occurrence was skipped (older than its maximum event age)
    messages: Sequence[TargetMessage] = ()
    # What to record in the firing history with the firing (None: nothing now; a webhook's,
    # function's or email's outcome is recorded by its delivery when final).
    outcome: FiringOutcome | None = None


class FiringOutcome(NamedTuple):
    """One row of a schedule's firing history (the console's "last firings")."""

    schedule_id: int
    occurrence: int  # the scheduled instant, epoch ms
    at: int  # when the outcome became final
    outcome: str  # see `schedules.firing_log.Outcome`
    attempts: int
    detail: str | None


class FiringPass(Protocol):
    """A dispatcher's hold on the schedules one pass claimed (`ScheduleStore.firing_pass`)."""

    #: The claimed schedules, by occurrence (then id).
    schedules: Sequence[Schedule]

    def complete(self, firings: Sequence[Firing], now: int) -> list[bool]:
        """Advance or delete each schedule and write its messages and history rows, all in
        one transaction. A firing whose schedule this pass did not claim, or whose row
        changed since the pass read it, writes nothing (False)."""
        ...


class ScheduleStore(Protocol):
    """Schedules and schedule groups."""

    def create_group(self, name: str, tags: dict[str, str], now: int,
                     client_token: str | None = None) -> bool:
        """False when the name is taken (the token is kept for a retried create)."""
    def get_group(self, name: str) -> ScheduleGroup: ...
    def list_groups(self, prefix: str, after: str | None, limit: int) -> list[ScheduleGroup]: ...
    def delete_group(self, name: str) -> int:
        """Delete the group and every schedule in it; returns how many schedules went."""
        ...

    def tag_group(self, name: str, tags: dict[str, str], now: int) -> None: ...

    def insert_schedules(self, rows: Sequence[NewSchedule], now: int) -> list[bool]:
        """Insert many schedules in one transaction; False where (group, name) exists."""
        ...

    def create_schedule(self, row: NewSchedule, now: int, connection: Any = None,
                        ) -> Schedule | None:
        """Insert one schedule and return it as stored, in one statement; None when its
        group does not exist or the name is taken (the caller tells which). Returning the
        row (instead of reading it back) also serves a one-shot due now, which a
        dispatcher may fire and delete a moment later. `connection`: as for
        `send_messages`."""
        ...

    def insert_schedule_rows(self, rows: Sequence[ScheduleRow],
                             campaign: str | None = None) -> int:
        """The fastest bulk path, for rows valid by construction (fan-out); existing
        (group, name) pairs are skipped. Returns how many rows went in, and adds that to
        the campaign's count of created schedules in the same transaction (so a crash
        cannot separate the two). One transaction."""
        ...

    def get_schedule(self, group: str, name: str) -> Schedule: ...
    def list_schedules(self, group: str | None, prefix: str, state: str | None,
                       after: tuple[str, str] | None, limit: int) -> list[Schedule]: ...
    def replace_schedule(self, row: NewSchedule, now: int) -> Schedule: ...
    def delete_schedule(self, group: str, name: str) -> None: ...
    def next_due_at(self) -> int | None: ...
    def warm_due(self, start: int, until: int, limit: int) -> tuple[int, int | None]:
        """Read what firing the schedules due in [start, until) will read and update (at
        most `limit`, earliest first), so that it is in memory when they come due: how
        many rows were read and the last one's due instant. Changes nothing."""
        ...
    def firing_pass(self, now: int, limit: int, hold_ms: int,
                    ) -> AbstractContextManager[FiringPass]:
        """Claim up to `limit` schedules due at `now` (earliest first) for one pass of a
        dispatcher: `with store.firing_pass(now, limit, hold_ms) as p`, plan a `Firing`
        for each of `p.schedules`, then `p.complete(firings, now)` once. The claim marks
        no row, so a pass that fails anywhere (or a node killed) leaves its rows as they
        were, due at once: there is no claim to wait out.

        - On a single-writer database (SQLite) the claim is a plain read and the pass
          holds nothing while it plans: other writers, in this process or another, go on
          meanwhile. The completion is its own transaction.
        - Where many nodes write (PostgreSQL) the pass is one transaction: its claim locks
          the rows (`FOR UPDATE SKIP LOCKED`: other nodes' passes take others, and a write
          to a locked row waits for the pass), its completion is pipelined into it, and
          leaving the block commits. A pass idle for `hold_ms` (its node paused or swapped
          out) is ended by the server: its rows go to the next pass, and its completion
          raises `StoreUnavailable`.

        Either way the completion is a compare-and-set on what the pass read: the row's
        `version` (every write to a schedule adds one) and its occurrence, so a firing of
        a row deleted, changed, paused or fired since writes nothing, however soon after
        the read that was. The handle is only good inside the block."""
        ...

    def count_schedules(self) -> int: ...
    def record_firings(self, outcomes: Sequence[FiringOutcome]) -> None:
        """Add rows to the firing history, in one statement."""
        ...

    def recent_firings(self, schedule_id: int, since: int,
                       limit: int) -> list[FiringOutcome]:
        """The schedule's last `limit` outcomes recorded at or after `since`, newest first."""
        ...

    def trim_firings(self, before: int, limit: int) -> int:
        """Delete up to `limit` of the oldest history rows recorded before `before`;
        returns how many went."""
        ...

    def disabled_schedules(self, group: str, after: str, limit: int,
                           ) -> list[tuple[str, int | None, int | None]]:
        """A page of the group's disabled schedules by name: (name, next_fire_at,
        flexible window minutes)."""
        ...

    def schedule_state_counts(self, group: str) -> dict[str, int]: ...
    def firing_counts(self, start_ms: int, end_ms: int, bucket_ms: int, *,
                      by_occurrence: bool = False) -> list[tuple[int, str, int]]:
        """(bucket start, target kind, count) of enabled schedules due in [start, end):
        by due_at (after flexible offsets) or, with `by_occurrence`, by next_fire_at."""
        ...

    def firing_counts_by_destination(self, start_ms: int, end_ms: int, bucket_ms: int, *,
                                     group: str | None = None
                                     ) -> list[tuple[int, str, str, int]]:
        """(bucket start, target kind, destination, count) of enabled schedules due in
        [start, end) (of one group, if given), by due_at: what the forecast counts against
        limit keys."""
        ...

    def firing_inputs(self, start_ms: int, end_ms: int, bucket_ms: int, *, kind: str,
                      group: str | None = None) -> list[tuple[int, str, int]]:
        """(bucket start, input text, count) of enabled schedules with a target of `kind`
        due in [start, end) (of one group, if given), by due_at: the forecast reads the
        limit keys a target takes from its input (an email's first recipient's domain)."""
        ...
