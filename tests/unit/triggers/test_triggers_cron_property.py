"""Property test: cron triggers against a brute-force minute walk.

The reference walks UTC minute by minute, reads each minute as wall time in the zone, and
fires when the wall time matches. It applies the documented DST rule by construction: a
wall time skipped by a spring-forward gap is never produced by the walk, and the second
pass of a repeated (fall-back) wall time has fold=1 and is ignored. Its day rules are
written from their definitions (nearest weekday = the closest Mon-Fri within the month,
and so on), not from the implementation's arithmetic.
"""

from __future__ import annotations

import calendar
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import cache
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tidings.triggers import next_fires, parse_expression

ZONES = [
    "UTC",
    "America/New_York",
    "Europe/London",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Australia/Lord_Howe",
    "America/Sao_Paulo",
    "Pacific/Chatham",
]
HORIZON_MINUTES = 40 * 1440
MONTH_NAMES = "JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split()
DAY_NAMES = "SUN MON TUE WED THU FRI SAT".split()

DayCheck = Callable[[date], bool]


@dataclass(frozen=True)
class Case:
    expression: str
    minutes: frozenset[int]
    hours: frozenset[int]
    months: frozenset[int]
    years: frozenset[int]
    day: DayCheck


def aws_weekday(d: date) -> int:
    return d.isoweekday() % 7 + 1  # 1 = Sunday ... 7 = Saturday


def month_days(d: date) -> list[date]:
    return [date(d.year, d.month, i) for i in range(1, calendar.monthrange(d.year, d.month)[1] + 1)]


@st.composite
def numeric_field(
    draw: st.DrawFn, lo: int, hi: int, names: list[str] | None = None
) -> tuple[str, frozenset[int]]:
    """A field in `, - * /` syntax with the set of values it means."""

    def show(v: int) -> str:
        if names and draw(st.booleans()):
            return names[v - lo]
        return str(v)

    kind = draw(
        st.sampled_from(["star", "value", "list", "range", "step", "starstep", "rangestep"])
    )
    if kind == "star":
        return "*", frozenset(range(lo, hi + 1))
    if kind == "value":
        v = draw(st.integers(lo, hi))
        return show(v), frozenset({v})
    if kind == "list":
        vs = draw(st.lists(st.integers(lo, hi), min_size=1, max_size=4))
        return ",".join(show(v) for v in vs), frozenset(vs)
    a = draw(st.integers(lo, hi))
    b = draw(st.integers(a, hi))
    n = draw(st.integers(1, max(1, (hi - lo) // 2 + 1)))
    if kind == "range":
        return f"{show(a)}-{show(b)}", frozenset(v for v in range(lo, hi + 1) if a <= v <= b)
    if kind == "starstep":
        return f"*/{n}", frozenset(v for v in range(lo, hi + 1) if (v - lo) % n == 0)
    if kind == "step":
        return f"{show(a)}/{n}", frozenset(
            v for v in range(lo, hi + 1) if v >= a and (v - a) % n == 0
        )
    return f"{show(a)}-{show(b)}/{n}", frozenset(
        v for v in range(lo, hi + 1) if a <= v <= b and (v - a) % n == 0
    )


@st.composite
def day_field(draw: st.DrawFn) -> tuple[str, str, DayCheck]:
    """(day-of-month text, day-of-week text, reference predicate on a local date)."""
    kind = draw(st.sampled_from(["dom", "L", "LW", "W", "dow", "Ldow", "nL", "nth"]))
    if kind == "dom":
        text, days = draw(numeric_field(1, 31))
        return text, "?", lambda d: d.day in days
    if kind == "L":
        return "L", "?", lambda d: d == month_days(d)[-1]
    if kind == "LW":
        return "LW", "?", lambda d: d == [x for x in month_days(d) if x.isoweekday() <= 5][-1]
    if kind == "W":
        n = draw(st.integers(1, 31))

        def nearest(d: date) -> bool:
            days = month_days(d)
            if n > len(days):
                return False
            weekdays = [x for x in days if x.isoweekday() <= 5]
            return d == min(weekdays, key=lambda x: abs(x.day - n))

        return f"{n}W", "?", nearest
    if kind == "dow":
        text, wds = draw(numeric_field(1, 7, DAY_NAMES))
        if "/" in text:  # AWS does not allow / in day-of-week
            text, wds = "*", frozenset(range(1, 8))
        return "?", text, lambda d: aws_weekday(d) in wds
    if kind == "Ldow":
        return "?", "L", lambda d: aws_weekday(d) == 7
    wd = draw(st.integers(1, 7))
    shown = draw(st.sampled_from([str(wd), DAY_NAMES[wd - 1]]))
    if kind == "nL":
        return "?", f"{shown}L", lambda d: aws_weekday(d) == wd and (d.day + 7) > len(month_days(d))
    k = draw(st.integers(1, 5))
    return "?", f"{shown}#{k}", lambda d: aws_weekday(d) == wd and (d.day - 1) // 7 + 1 == k


@st.composite
def cases(draw: st.DrawFn) -> Case:
    minutes_text, minutes = draw(numeric_field(0, 59))
    hours_text, hours = draw(numeric_field(0, 23))
    dom, dow, day = draw(day_field())
    # Months and years stay wide enough that most cases fire inside the 40-day horizon;
    # the others check that both sides agree nothing fires within it.
    months_text, months = draw(
        st.sampled_from([("*", frozenset(range(1, 13)))]) | numeric_field(1, 12, MONTH_NAMES)
    )
    years_text, years = draw(
        st.sampled_from(
            [
                ("*", frozenset(range(1970, 2200))),
                ("2000-2040", frozenset(range(2000, 2041))),
                ("2000/2", frozenset(range(2000, 2200, 2))),
            ]
        )
    )
    expression = f"cron({minutes_text} {hours_text} {dom} {months_text} {dow} {years_text})"
    return Case(expression, minutes, hours, months, years, day)


@cache
def transitions(zone_name: str) -> tuple[int, ...]:
    """UTC epoch minutes at which the zone's offset changes, 2005-2035."""
    zone = ZoneInfo(zone_name)
    out: list[int] = []

    def offset(minute: int) -> object:
        return datetime.fromtimestamp(minute * 60, zone).utcoffset()

    start = int(datetime(2005, 1, 1, tzinfo=UTC).timestamp()) // 60
    end = int(datetime(2035, 1, 1, tzinfo=UTC).timestamp()) // 60
    step = 1440
    for lo in range(start, end, step):
        if offset(lo) != offset(lo + step):
            a, b = lo, lo + step
            while b - a > 1:
                mid = (a + b) // 2
                a, b = (mid, b) if offset(mid) == offset(a) else (a, mid)
            out.append(b)
    return tuple(out)


@st.composite
def instants(draw: st.DrawFn, zone_name: str) -> int:
    """An instant in 2005-2035, often within a few hours of a DST transition."""
    points = transitions(zone_name)
    near_transition: bool = draw(st.booleans())
    if points and near_transition:
        base = draw(st.sampled_from(points)) * 60_000
        return base + draw(st.integers(-6 * 3_600_000, 6 * 3_600_000))
    lo = int(datetime(2005, 1, 1, tzinfo=UTC).timestamp()) * 1000
    hi = int(datetime(2035, 1, 1, tzinfo=UTC).timestamp()) * 1000
    return draw(st.integers(lo, hi))


def reference(case: Case, zone: ZoneInfo, after_ms: int) -> int | None:
    minute = after_ms // 60_000 + 1
    for m in range(minute, minute + HORIZON_MINUTES):
        local = datetime.fromtimestamp(m * 60, zone)
        if (
            local.fold == 0
            and local.minute in case.minutes
            and local.hour in case.hours
            and local.month in case.months
            and local.year in case.years
            and case.day(local.date())
        ):
            return m * 60_000
    return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), case=cases(), zone_name=st.sampled_from(ZONES))
def test_cron_matches_brute_force(data: st.DataObject, case: Case, zone_name: str) -> None:
    after = data.draw(instants(zone_name))
    zone = ZoneInfo(zone_name)
    trigger = parse_expression(case.expression, zone_name)
    got = trigger.next_fire_after(after)
    want = reference(case, zone, after)
    event("fires within the horizon" if want is not None else "no fire within the horizon")
    if want is None:
        horizon_end = (after // 60_000 + HORIZON_MINUTES) * 60_000
        assert got is None or got > horizon_end, case.expression
    else:
        assert got == want, case.expression
        # The found instant is itself an occurrence: searching from just before finds it.
        assert trigger.next_fire_after(got - 1) == got


DST_ZONES = [z for z in ZONES if transitions(z)]


@st.composite
def dst_cases(draw: st.DrawFn) -> tuple[Case, str, int]:
    """A daily expression whose hours sit on a DST transition, searched from near it."""
    zone_name = draw(st.sampled_from(DST_ZONES))
    zone = ZoneInfo(zone_name)
    point = draw(st.sampled_from(transitions(zone_name)))
    # The gap hour itself never shows on the clock, so count up from the last hour before.
    before = datetime.fromtimestamp((point - 1) * 60, zone).hour
    after_hour = datetime.fromtimestamp(point * 60, zone).hour
    hours_near = {(before + k) % 24 for k in (-1, 0, 1, 2)} | {after_hour}
    hours = frozenset(draw(st.sets(st.sampled_from(sorted(hours_near)), min_size=1)))
    if draw(st.booleans()):
        minutes_text, minutes = draw(numeric_field(0, 59))
    else:
        picked = draw(st.sets(st.sampled_from([0, 15, 29, 30, 31, 45, 59]), min_size=1))
        minutes_text, minutes = ",".join(map(str, sorted(picked))), frozenset(picked)
    dom, dow = draw(st.sampled_from([("*", "?"), ("?", "*")]))
    expression = f"cron({minutes_text} {','.join(map(str, sorted(hours)))} {dom} * {dow} *)"
    case = Case(
        expression,
        minutes,
        hours,
        frozenset(range(1, 13)),
        frozenset(range(1970, 2200)),
        lambda d: True,
    )
    after = point * 60_000 + draw(st.integers(-4 * 3_600_000, 2 * 3_600_000))
    return case, zone_name, after


@settings(max_examples=300, deadline=None)
@given(dst_cases())
def test_cron_matches_brute_force_across_dst(drawn: tuple[Case, str, int]) -> None:
    case, zone_name, after = drawn
    zone = ZoneInfo(zone_name)
    want: list[int] = []
    cursor = after
    for _ in range(3):  # a daily expression fires within two days, so never None here
        nxt = reference(case, zone, cursor)
        assert nxt is not None
        want.append(nxt)
        cursor = nxt
    assert next_fires(parse_expression(case.expression, zone_name), after, 3) == want


@settings(max_examples=300, deadline=None)
@given(
    day=day_field(),
    year=st.integers(1971, 2198),
    month=st.integers(1, 12),
)
def test_day_rules_pick_the_defined_days(
    day: tuple[str, str, DayCheck], year: int, month: int
) -> None:
    dom, dow, check = day
    trigger = parse_expression(f"cron(0 12 {dom} * {dow} *)")
    first = date(year, month, 1)
    days = month_days(first)
    month_start = int(datetime(year, month, 1, tzinfo=UTC).timestamp()) * 1000
    month_end = month_start + len(days) * 86_400_000
    got: list[int] = []
    cursor = month_start
    while (nxt := trigger.next_fire_after(cursor)) is not None and nxt < month_end:
        got.append(nxt)
        cursor = nxt
    want = [
        int(datetime(d.year, d.month, d.day, 12, tzinfo=UTC).timestamp()) * 1000
        for d in days
        if check(d)
    ]
    assert got == want, (dom, dow)
