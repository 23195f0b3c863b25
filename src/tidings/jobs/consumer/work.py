"""A held job's life cycle inside a consumer: `JobState`, the moves allowed between its
states (`TRANSITIONS`), and the `Ledger` every move goes through.

A job is held from the receive that leased its message until the consumer lets it go
(GONE): acknowledged, failed with its backoff, rejected to the dead-letter queue, given
back at shutdown, or left to its lease when a write failed. While it is held, the
heartbeat keeps its lease (and its key's) alive. What the rest of the consumer counts is
read off the states here: the room for the next receive, the handlers running, the job
keys this consumer holds on each queue.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass, field
from enum import StrEnum

from tidings.jobs.batches import Held
from tidings.jobs.handlers import Job, Registration
from tidings.model.queues import QueueRecord
from tidings.store.contract.limits import KeyRule


class JobState(StrEnum):
    RECEIVED = "received"  # held; not yet read as a job
    RESERVING = "reserving"  # its job key's reservation is being written
    WAITING = "waiting"  # a duplicate of a key held here or elsewhere: waits for that run
    READY = "ready"  # its key is ours: waits for a free handler slot
    LIMITED = "limited"  # its key is ours; waits for room under its limits (limiter)
    HELD_BACK = "held_back"  # a limit (or RetryAfter) sends it back to its queue for a while
    STARTED = "started"  # handed to a runner (a thread, an async runner task)
    SUCCEEDED = "succeeded"  # its handler returned: the acknowledgement is being written
    FAILED = "failed"  # its handler raised: the retry (backoff, error) is being written
    DUPLICATE = "duplicate"  # its key already ran to success: acknowledged without running
    POISON = "poison"  # can never be a job: rejected to the DLQ, or retried (App.poison)
    RETURNING = "returning"  # shutdown: given back to the queue without running here
    ABANDONED = "abandoned"  # running at the shutdown deadline: given back, never acknowledged
    GONE = "gone"  # let go: no longer held here


S = JobState
TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    S.RECEIVED: frozenset({S.RESERVING, S.WAITING, S.POISON}),
    # GONE: the reservation could not be written; the message comes back after its lease.
    S.RESERVING: frozenset({S.READY, S.WAITING, S.DUPLICATE, S.GONE}),
    S.WAITING: frozenset({S.RESERVING, S.RETURNING}),
    S.READY: frozenset({S.STARTED, S.LIMITED, S.RETURNING}),
    S.LIMITED: frozenset({S.READY, S.HELD_BACK, S.RETURNING}),
    # RETURNING: taken back at shutdown before a runner began it. HELD_BACK: its handler
    # raised RetryAfter.
    S.STARTED: frozenset({S.SUCCEEDED, S.FAILED, S.HELD_BACK, S.RETURNING, S.ABANDONED}),
    S.HELD_BACK: frozenset({S.GONE}),
    S.SUCCEEDED: frozenset({S.GONE}),
    S.FAILED: frozenset({S.GONE}),
    S.DUPLICATE: frozenset({S.GONE}),
    S.POISON: frozenset({S.GONE}),
    S.RETURNING: frozenset({S.GONE}),
    S.ABANDONED: frozenset({S.GONE}),
    S.GONE: frozenset(),
}
#: The states in which this consumer holds the job's key on its queue (reserved, and not
#: yet handed back by a write).
HOLDS_KEY = frozenset({S.READY, S.LIMITED, S.STARTED, S.SUCCEEDED, S.FAILED, S.HELD_BACK,
                       S.ABANDONED})
#: The states whose jobs leave room for the next receive: their handler returned, and they
#: are held only until their outcome is written.
FINISHED = frozenset({S.SUCCEEDED, S.FAILED, S.HELD_BACK})


class InvalidTransition(RuntimeError):
    """A move the job's life cycle does not allow: a bug in the consumer."""


@dataclass(eq=False, slots=True)
class ServedQueue:
    """A queue a consumer serves, and what it holds there."""

    name: str
    record: QueueRecord
    registrations: dict[str, Registration]  # job type → handler
    keys: set[str] = field(default_factory=set)  # job keys held here (HOLDS_KEY)
    waiting: dict[str, list[Work]] = field(default_factory=dict)  # job key → duplicates

    @property
    def visibility_s(self) -> int:
        return self.record.attributes.visibility_timeout_s


@dataclass(eq=False, slots=True)
class Work:
    """One held message on its way through the consumer. `state` changes only through
    the ledger's moves."""

    queue: ServedQueue
    held: Held
    job: Job | None  # None: not a job (poison)
    key: str | None  # the job's key (`Job.key`, read once)
    extend_at: float  # monotonic: when the heartbeat must renew its lease
    state: JobState = field(default=JobState.RECEIVED, init=False)
    started: float = 0.0  # monotonic: when it was handed to a runner
    rules: tuple[KeyRule, ...] = ()  # the limits it waits for (LIMITED) or went through
    slots: tuple[tuple[str, str], ...] = ()  # concurrency slots it holds: (key, holder)


# What a move does beside changing the state, worked out once from the sets above.
_TAKES_KEY, _GIVES_KEY, _FREES_ROOM, _LEAVES, _ENDS_RUN = 1, 2, 4, 8, 16


def _effects(old: JobState, new: JobState) -> int:
    flags = 0
    if new in HOLDS_KEY and old not in HOLDS_KEY:
        flags |= _TAKES_KEY
    if old in HOLDS_KEY and new not in HOLDS_KEY:
        flags |= _GIVES_KEY
    if (new in FINISHED and old not in FINISHED) or new is S.GONE:
        flags |= _FREES_ROOM
    if new is S.GONE:
        flags |= _LEAVES
    if old is S.STARTED:
        flags |= _ENDS_RUN
    return flags


#: For each state, the states a job may come from and what that move does.
_INTO: dict[JobState, dict[JobState, int]] = {
    new: {old: _effects(old, new) for old, moves in TRANSITIONS.items() if new in moves}
    for new in JobState}


class Ledger:
    """Every job a consumer holds, by state. `freed` is set when room for a receive may
    have appeared; `idle`, when no handler runs any more; `key_released`, when a key
    duplicates wait for was given back (they are in `released`); `holding`, while it holds
    any job at all (the loops that only look after held jobs sleep on it when idle)."""

    def __init__(self) -> None:
        self.held: set[Work] = set()
        self.counts = dict.fromkeys(JobState, 0)
        self.freed = asyncio.Event()
        self.idle = asyncio.Event()
        self.released: list[tuple[ServedQueue, str]] = []
        self.key_released = asyncio.Event()
        self.holding = asyncio.Event()

    def hold(self, works: list[Work]) -> None:
        """Received messages, now held (RECEIVED: what every Work is built as)."""
        self.held.update(works)
        self.counts[S.RECEIVED] += len(works)
        if works:
            self.holding.set()

    def move(self, work: Work, new: JobState) -> None:
        """The one place a job's state changes: a move TRANSITIONS does not allow raises
        InvalidTransition and changes nothing."""
        self.move_all((work,), new)

    def move_all(self, works: Collection[Work], new: JobState) -> None:
        """`move` for many jobs at once: if any move is not allowed, none is made. (A job
        goes through five moves and the consumer's whole path costs a few µs per job, so
        the common batch, jobs that all come from one state, is moved in one pass.)"""
        into, counts = _INTO[new], self.counts
        olds = {w.state for w in works}
        if not olds <= into.keys():
            work = next(w for w in works if w.state not in into)
            raise InvalidTransition(f"job {work.key or work.held.message.message_id} on "
                                    f"{work.queue.name} cannot go from {work.state} to {new}")
        if len(olds) == 1:
            old = olds.pop()
            counts[old] -= len(works)
            for work in works:
                work.state = new
            flags = into[old]
            if flags:
                self._effects(works, flags)
        else:
            for work in works:
                flags = into[work.state]
                counts[work.state] -= 1
                work.state = new
                if flags:
                    self._effects((work,), flags)
        counts[new] += len(works)

    def _effects(self, works: Collection[Work], flags: int) -> None:
        """What moves with these `flags` do beside changing the state."""
        if flags & (_TAKES_KEY | _GIVES_KEY):
            for work in works:
                if (key := work.key) is None:
                    continue
                queue = work.queue
                if flags & _TAKES_KEY:
                    queue.keys.add(key)
                    continue
                queue.keys.discard(key)
                if key in queue.waiting:  # our run ended: a duplicate may go
                    self.released.append((queue, key))
                    self.key_released.set()
        if flags & _LEAVES:
            self.held.difference_update(works)
            if not self.held:
                self.holding.clear()
        if flags & _FREES_ROOM and not self.freed.is_set():
            self.freed.set()
        if flags & _ENDS_RUN and not self.counts[S.STARTED]:
            self.idle.set()

    def in_state(self, *states: JobState) -> list[Work]:
        return [w for w in self.held if w.state in states]

    @property
    def running(self) -> int:
        """Jobs handed to a runner whose handler has not returned."""
        return self.counts[S.STARTED]

    @property
    def finished(self) -> int:
        """Jobs whose handler returned, held until their outcome is written."""
        counts = self.counts
        return counts[S.SUCCEEDED] + counts[S.FAILED] + counts[S.HELD_BACK]
