"""Firings a limit holds back, and the plan that spreads flexible windows to fit a rate.

A firing into a queue whose key (`queue:<name>`) a limit or a pause holds asks the store
for a start, in one acquisition per pass (the limit's row is the truth every node shares);
one refused keeps its occurrence and is due again later, not fired, not counted as an
attempt.

When it is due again depends on its schedule (issue 33):

- without a flexible window, when the key should have room, but at most HELD_RECHECK_MS
  later, so a resumed pause or a raised limit is seen;
- with one (FLEXIBLE, MaximumWindowInMinutes) and a key with a rate, at the next instant
  this dispatcher's `WindowPlan` has free for the key: one start every period/count, after
  those it planned already. A burst due at once thus leaves as a stream at the limit's
  rate, in due order, inside the window it allowed, instead of coming back all together
  at each instant the key frees one start. What the window cannot hold at that rate
  fires, in the same stream, as early as the limit lets it after the window's end: never
  dropped, and counted (`tidings_limit_past_window_firings`).

A webhook's, a function's or an email's firing travels as a delivery, whose start its
limit grants when a consumer takes it (a delivery refused waits in its queue). With a
flexible window and a key with a rate (`webhook:<host>`, `function:<name>`,
`smtp:<relay>`, `email-domain:<domain>`), the dispatcher writes the delivery to become
visible at the instant the plan has free for the key (`pace_deliveries`), so the burst
reaches the consumers already spread at the rate, instead of all at once to be sent back.

The plan is this node's, in memory: two nodes plan for one key each from what they hold,
and the start is granted by the store at the planned instant all the same, so a plan only
smooths; it cannot make a key exceed its limit. An instant once planned is kept: a limit
raised meanwhile lets later firings go sooner, but a planned one still fires at its
instant, inside the window it was given (a pause is no rate: those firings wait as
without a window).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from tidings.limits.book import LimitBook
from tidings.model.schedules import Schedule
from tidings.store.base import Firing, LimitStore, TargetMessage
from tidings.store.contract.limits import KeyRule, LimitClaim
from tidings.targets.base import LimitPlace
from tidings.targets.registry import target_of

#: A firing a limit held back is due again when its key should have room, but at most
#: this much later: a pause resumed early (or a limit raised) is seen by then.
HELD_RECHECK_MS = 5_000
NO_PLACE = LimitPlace()


class Planned(NamedTuple):
    """A pass's plan for one schedule: its firing, and what the dispatcher counts of it
    once the firing is durable."""

    firing: Firing
    due: int  # when the fired occurrence was due (its flexible offset included)
    in_target: bool  # delivered by the firing itself (written into its target queue)
    held: bool = False  # a limit held it back: its occurrence is due again later
    window_end: int | None = None  # the end of the fired occurrence's flexible window
    late: bool = False  # a limit made it start at or after `window_end`


class WindowPlan:
    """Per limit key, the next instant this dispatcher has not planned a start at."""

    def __init__(self) -> None:
        self._next: dict[str, int] = {}

    def forget_before(self, now: int) -> None:
        """Keys whose plan is all in the past start afresh (and take no memory)."""
        self._next = {k: at for k, at in self._next.items() if at > now}

    def take(self, key: str, earliest: int, spacing_ms: int) -> int:
        """The next start of `key` at or after `earliest`, one per `spacing_ms`."""
        at = max(earliest, self._next.get(key, earliest))
        self._next[key] = at + spacing_ms
        return at


def _spacing(rules: Sequence[KeyRule]) -> tuple[str, int] | None:
    """The key of the slowest rate among `rules`, and the time between two of its
    starts (rounded up: never faster than the rate)."""
    rated = [(-(-r.rate.period_ms // r.rate.count), r.key) for r in rules
             if r.rate is not None]
    if not rated:
        return None
    spacing, key = max(rated)
    return key, spacing


def hold_limited(book: LimitBook, store: LimitStore, plan: WindowPlan,
                 claimed: Sequence[Schedule], planned: list[Planned], now: int) -> None:
    """Firings into a queue a limit holds: one acquisition for the pass, in due order;
    a refused one is replanned to keep its occurrence (see the module's docstring)."""
    plan.forget_before(now)
    claims: list[LimitClaim] = []
    which: list[tuple[int, list[KeyRule]]] = []
    for i, (s, p) in enumerate(zip(claimed, planned, strict=True)):
        if not p.in_target:
            continue
        target = s.spec.target
        rules = []
        for name, value in target_of(target).limit_keys(target, None, NO_PLACE,
                                                        book.names).items():
            rule = book.rule(f"{name}:{value}", name)
            if rule is not None:  # (a write holds no slot: only rates and pauses)
                rules.append(KeyRule(rule.key, rule.rate, rule.burst, None, rule.name))
        if rules:
            claims.append(LimitClaim(f"firing:{s.id}:{p.firing.occurrence}",
                                     tuple(rules), now))
            which.append((i, rules))
    if not claims:
        return
    answers = store.acquire_limits(claims, now)
    for (i, rules), answer in zip(which, answers, strict=True):
        p = planned[i]
        if answer.granted:
            # Late because a plan put it past its window (its due instant is the plan's),
            # not because the dispatcher was away when it was due.
            s = claimed[i]
            if p.window_end is not None and (s.due_at or 0) >= p.window_end:
                planned[i] = p._replace(late=True)
            continue
        paced = _spacing(rules) if p.window_end is not None and not answer.paused else None
        if paced is None:
            again = min(answer.retry_at, now + HELD_RECHECK_MS)
        else:
            key, spacing = paced
            again = plan.take(key, max(answer.retry_at, now + 1), spacing)
        occurrence = p.firing.occurrence
        planned[i] = Planned(Firing(p.firing.schedule_id, occurrence, occurrence, again,
                                    False, False), p.due, False, held=True,
                             window_end=p.window_end)


def pace_deliveries(book: LimitBook, plan: WindowPlan, place: LimitPlace,
                    claimed: Sequence[Schedule], planned: list[Planned], now: int) -> None:
    """Deliveries of schedules with a flexible window into keys with a rate: each written
    to become visible at the plan's next free start of its slowest key (see the module's
    docstring). A paused key is left to the consumers, which hold its deliveries back."""
    plan.forget_before(now)
    for i, (s, p) in enumerate(zip(claimed, planned, strict=True)):
        if (p.window_end is None or p.in_target or p.held or not p.firing.fired
                or len(p.firing.messages) != 1):
            continue
        kind = target_of(s.spec.target)
        if kind.writes_queue:
            continue  # (a queue target whose queue is missing: retried as a delivery)
        target = s.spec.target
        rules = []
        for name, value in kind.limit_keys(target, target.input, place, book.names).items():
            rule = book.rule(f"{name}:{value}", name)
            if rule is not None and rule.rate is not None \
                    and book.pauses.get(rule.key, 0) <= now \
                    and book.pauses.get(name, 0) <= now:
                rules.append(rule)
        paced = _spacing(rules)
        if paced is None:
            continue
        key, spacing = paced
        at = plan.take(key, now, spacing)
        if at <= now:
            continue
        [m] = p.firing.messages
        delayed = TargetMessage(m.queue_id, m.fifo, m.message._replace(visible_at=at))
        planned[i] = p._replace(firing=p.firing._replace(messages=[delayed]),
                                late=at >= p.window_end)
