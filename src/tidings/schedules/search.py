"""Finding schedules among millions, a page at a time, by keyset (never OFFSET): page 1,000
costs what page 1 does.

Two walks, each along an index: by (group, name) (the unique key), or, when a next-fire
window is given, by (due_at, id) (the dispatcher's due index). Group and name prefix narrow
the first walk in SQL; the other filters (state, target) are applied to what the walk
reads, and a page stops after `SCAN_BUDGET` schedules read, returning where it stopped: a
filter that matches one schedule in ten million costs bounded time per page, and the
viewer is told honestly how far the search has got.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, Protocol

from tidings.clock import Clock
from tidings.errors import ScheduleNotFound, ValidationError
from tidings.model.email import Delivery
from tidings.model.queues import check_range
from tidings.model.schedules import Schedule, ScheduleKey
from tidings.schedules.firing_log import FiringLog, FiringRecord
from tidings.schedules.service import schedule_trigger
from tidings.store.base import DeliveryQuery, EmailStore, NodeStore, ScheduleStore
from tidings.targets.registry import target_of
from tidings.triggers.base import next_fires
from tidings.triggers.words import describe

SCAN_BUDGET = 3000
CHUNK = 1000


class ScheduleSearchStore(EmailStore, NodeStore, ScheduleStore, Protocol):
    """What this module asks of the store: the schedules, their deliveries and the
    console's indexes over them."""


@dataclass(frozen=True)
class ScheduleQuery:
    group: str | None = None
    prefix: str = ""
    state: str | None = None  # ENABLED | DISABLED
    target: str = ""  # matches the target's kind or destination (a substring)
    due_from: int | None = None  # epoch ms; either bound switches to the due-index walk
    due_until: int | None = None
    limit: int = 50

    @property
    def filtered(self) -> bool:
        """Filters no index serves: the walk reads keys and checks each."""
        return self.state is not None or bool(self.target)

    def matches(self, k: ScheduleKey, *, names_too: bool) -> bool:
        """Does the walked row pass the filters (group and prefix too with `names_too`,
        when the walk did not apply them)?"""
        if names_too and ((self.group is not None and k.group != self.group)
                          or not k.name.startswith(self.prefix)):
            return False
        if self.state is not None and k.state != self.state:
            return False
        if self.target:
            needle = self.target.lower()
            if needle not in k.target.lower():
                return False  # (most rows: no JSON parsed)
            target = json.loads(k.target)
            if (needle != str(target.get("kind", "")).lower()
                    and needle not in str(target.get("destination", "")).lower()):
                return False
        return True


@dataclass(frozen=True)
class SchedulePage:
    schedules: list[Schedule]
    next_token: str | None
    examined: int
    searching: bool  # the budget ran out before the page filled: more may match further on


@dataclass(frozen=True)
class ScheduleDetail:
    schedule: Schedule
    in_words: str
    next_occurrences: list[int]  # epoch ms, the next 10 (fewer when it runs out)
    deliveries: list[Delivery]  # an email schedule's last deliveries (its firings' outcome)
    firings: list[FiringRecord]  # the last firings of any target kind and their outcome


def _token(parts: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(parts).encode()).decode()


def _untoken(token: str) -> list[Any]:
    try:
        parts = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, UnicodeDecodeError):
        parts = None
    if not isinstance(parts, list) or len(parts) != 3 or parts[0] not in ("n", "d"):
        raise ValidationError("after", "is not a token this page gave")
    return parts


class ScheduleSearch:
    def __init__(self, store: ScheduleSearchStore, clock: Clock) -> None:
        self.store = store
        self.clock = clock
        self.firings = FiringLog(store, clock)

    def search(self, query: ScheduleQuery, after: str | None = None, *,
               budget: int = SCAN_BUDGET) -> SchedulePage:
        check_range("limit", query.limit, 1, 500)
        if query.state not in (None, "ENABLED", "DISABLED"):
            raise ValidationError("state", "must be ENABLED or DISABLED")
        by_due = query.due_from is not None or query.due_until is not None
        cursor = _untoken(after) if after else None
        if cursor is not None and (cursor[0] == "d") != by_due:
            raise ValidationError("after", "belongs to another search")
        if not query.filtered and not (by_due and (query.group or query.prefix)):
            return self._page(query, by_due, cursor)
        found: list[ScheduleKey] = []
        examined = 0
        key: list[Any] | None = cursor
        while True:
            chunk = min(CHUNK, budget - examined)
            rows = self._keys(query, by_due, key, chunk)
            for k in rows:
                examined += 1
                key = ["d", k.due_at, k.id] if by_due else ["n", k.group, k.name]
                if query.matches(k, names_too=by_due):
                    found.append(k)
                    if len(found) == query.limit:
                        return SchedulePage(self._whole(found), _token(key), examined, False)
            if len(rows) < chunk:  # the walk reached the end
                return SchedulePage(self._whole(found), None, examined, False)
            if examined >= budget:
                return SchedulePage(self._whole(found), _token(key) if key else None,
                                    examined, True)

    def _page(self, query: ScheduleQuery, by_due: bool,
              cursor: list[Any] | None) -> SchedulePage:
        """No filter beyond what the index serves: one query of the page itself."""
        if by_due:
            start, end = self._window(query)
            rows = self.store.schedules_by_due(
                start, end, (int(cursor[1]), int(cursor[2])) if cursor else None,
                query.limit + 1)
        else:
            rows = self.store.list_schedules(
                query.group, query.prefix, None,
                (str(cursor[1]), str(cursor[2])) if cursor else None, query.limit + 1)
        more = len(rows) > query.limit
        rows = rows[:query.limit]
        last = rows[-1] if rows else None
        token = None
        if more and last is not None:
            token = _token(["d", last.due_at, last.id] if by_due
                           else ["n", last.spec.group, last.spec.name])
        return SchedulePage(rows, token, len(rows), False)

    @staticmethod
    def _window(query: ScheduleQuery) -> tuple[int, int]:
        return (query.due_from if query.due_from is not None else 0,
                query.due_until if query.due_until is not None else 2**62)

    def _keys(self, query: ScheduleQuery, by_due: bool, key: list[Any] | None,
              limit: int) -> list[ScheduleKey]:
        if by_due:
            start, end = self._window(query)
            return self.store.due_schedule_keys(
                start, end, (int(key[1]), int(key[2])) if key else None, limit)
        return self.store.schedule_keys(query.group, query.prefix,
                                        (str(key[1]), str(key[2])) if key else None, limit)

    def _whole(self, keys: list[ScheduleKey]) -> list[Schedule]:
        out = []
        for k in keys:
            try:
                out.append(self.store.get_schedule(k.group, k.name))
            except ScheduleNotFound:
                pass  # deleted since the walk read it
        return out

    def detail(self, group: str, name: str, *, occurrences: int = 10) -> ScheduleDetail:
        s = self.store.get_schedule(group, name)
        now = self.clock.now_ms()
        trigger = schedule_trigger(s.spec, s.created_at)
        start = s.next_fire_at - 1 if s.next_fire_at is not None else now
        upcoming = next_fires(trigger, start, occurrences) if s.next_fire_at else []
        deliveries: list[Delivery] = []
        if target_of(s.spec.target).logs_deliveries:
            key = f"{group}/{name}"
            recent = self.store.find_deliveries(
                DeliveryQuery(schedule_prefix=key, created_from=now - 7 * 86_400_000), 0, 200)
            deliveries = [d for d in recent if d.schedule == key][-10:][::-1]
        return ScheduleDetail(s, describe(s.spec.expression, s.spec.timezone), upcoming,
                              deliveries, self.firings.recent(s.id, since=s.created_at))
