"""Schedule search on every backend: keyset pages, filters, the scan budget, and the
next-fire walk."""

from __future__ import annotations

import pytest

from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.errors import ValidationError
from tidings.model.schedules import ScheduleSpec, Target, TargetKind
from tidings.model.states import ScheduleState
from tidings.schedules.search import ScheduleQuery


@pytest.fixture
def seeded(t: Tidings) -> Tidings:
    t.queues.create_queue("q")
    t.schedules.create_group("g")
    specs = [ScheduleSpec(name=f"s{i:03d}", group="g", expression=f"rate({i + 2} minutes)",
                          target=Target(TargetKind.QUEUE, "q"),
                          state=ScheduleState.DISABLED if i % 10 == 0 else ScheduleState.ENABLED)
             for i in range(95)]
    specs.append(ScheduleSpec(name="hook", expression="rate(1 hour)",
                              target=Target(TargetKind.WEBHOOK, "https://hooks.example.com/x")))
    assert all(r.created for r in t.schedules.create_many(specs))
    return t


def _all_pages(t: Tidings, query: ScheduleQuery, budget: int = 4000) -> list[str]:
    names: list[str] = []
    token = None
    while True:
        page = t.schedule_search.search(query, token, budget=budget)
        names += [s.spec.name for s in page.schedules]
        token = page.next_token
        if token is None:
            return names


def test_keyset_pages_cover_everything_once(seeded: Tidings) -> None:
    assert _all_pages(seeded, ScheduleQuery(group="g", limit=20)) == [
        f"s{i:03d}" for i in range(95)]
    assert _all_pages(seeded, ScheduleQuery(limit=7)) == [
        "hook", *(f"s{i:03d}" for i in range(95))]


def test_filters_state_target_and_prefix(seeded: Tidings) -> None:
    assert _all_pages(seeded, ScheduleQuery(state="DISABLED", limit=3)) == [
        f"s{i:03d}" for i in range(0, 95, 10)]
    assert _all_pages(seeded, ScheduleQuery(target="webhook")) == ["hook"]
    assert _all_pages(seeded, ScheduleQuery(target="hooks.example")) == ["hook"]
    assert _all_pages(seeded, ScheduleQuery(group="g", prefix="s09")) == [
        f"s{i:03d}" for i in range(90, 95)]
    with pytest.raises(ValidationError):
        seeded.schedule_search.search(ScheduleQuery(state="PAUSED"))


def test_a_scan_budget_bounds_each_page_and_says_so(seeded: Tidings) -> None:
    page = seeded.schedule_search.search(ScheduleQuery(target="webhook"), budget=10)
    assert page.schedules == [] or [s.spec.name for s in page.schedules] == ["hook"]
    first = seeded.schedule_search.search(ScheduleQuery(group="g", target="nothing"),
                                          budget=30)
    assert (first.examined, first.searching, first.schedules) == (30, True, [])
    assert first.next_token is not None
    assert _all_pages(seeded, ScheduleQuery(state="DISABLED"), budget=10) == [
        f"s{i:03d}" for i in range(0, 95, 10)]


def test_the_next_fire_walk_is_in_due_order(seeded: Tidings, clock: FrozenClock) -> None:
    now = clock.now_ms()
    names = _all_pages(seeded, ScheduleQuery(due_from=now, limit=8))
    enabled = {f"s{i:03d}" for i in range(95) if i % 10} | {"hook"}
    assert set(names) == enabled and len(names) == len(enabled)
    dues = [seeded.schedules.get(n, "default" if n == "hook" else "g").due_at for n in names]
    assert dues == sorted(dues)
    until = now + 5 * 60_000
    soon = _all_pages(seeded, ScheduleQuery(due_from=now, due_until=until, limit=1))
    assert soon and soon == [n for n, due in zip(names, dues, strict=True) if due < until]
    with pytest.raises(ValidationError):
        token = seeded.schedule_search.search(ScheduleQuery(limit=1)).next_token
        seeded.schedule_search.search(ScheduleQuery(due_from=now), token)


def test_a_schedule_in_detail(seeded: Tidings, clock: FrozenClock) -> None:
    detail = seeded.schedule_search.detail("g", "s003")
    assert detail.in_words == "every 5 minutes"
    assert len(detail.next_occurrences) == 10
    gaps = {b - a for a, b in zip(detail.next_occurrences, detail.next_occurrences[1:],
                                  strict=False)}
    assert gaps == {5 * 60_000}
