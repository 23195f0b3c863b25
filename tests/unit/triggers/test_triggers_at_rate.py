"""One-time at() and rate() triggers, including DST handling and bounds."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from tidings.triggers import AtTrigger, RateTrigger, next_fires, parse_expression


def utc(y: int, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0) -> int:
    return int(datetime(y, mo, d, h, mi, s, tzinfo=UTC).timestamp()) * 1000


# ---- at() ----


def test_at_fires_once_strictly_after() -> None:
    t = parse_expression("at(2030-01-01T00:00:59)")
    assert isinstance(t, AtTrigger)
    assert (t.kind, t.recurring) == ("at", False)
    instant = utc(2030, 1, 1, 0, 0, 59)
    assert t.next_fire_after(instant - 1) == instant
    assert t.next_fire_after(instant) is None
    assert next_fires(t, 0, 5) == [instant]


def test_at_is_wall_time_in_the_zone() -> None:
    assert parse_expression("at(2024-01-01T00:00:00)", "Asia/Kolkata").next_fire_after(0) == utc(
        2023, 12, 31, 18, 30
    )
    assert parse_expression("at(2024-07-01T12:00:00)", "America/New_York").next_fire_after(
        0
    ) == utc(2024, 7, 1, 16)


def test_at_ignores_start_and_end_like_aws() -> None:
    instant = utc(2030, 6, 1, 12)
    t = parse_expression(
        "at(2030-06-01T12:00:00)", start_ms=instant + 1_000_000, end_ms=instant - 1_000_000
    )
    assert t.next_fire_after(0) == instant


def test_at_in_a_spring_gap_shifts_forward_by_the_gap() -> None:
    # 02:30 does not exist in New York on 2024-03-10: fires at 03:30 EDT (07:30Z).
    t = parse_expression("at(2024-03-10T02:30:00)", "America/New_York")
    assert t.next_fire_after(0) == utc(2024, 3, 10, 7, 30)
    # 01:30 does not exist in London on 2024-03-31: fires at 02:30 BST (01:30Z).
    t = parse_expression("at(2024-03-31T01:30:00)", "Europe/London")
    assert t.next_fire_after(0) == utc(2024, 3, 31, 1, 30)
    # Lord Howe's gap is 30 minutes (02:00 -> 02:30): 02:15 becomes 02:45 (+11:00).
    t = parse_expression("at(2024-10-06T02:15:00)", "Australia/Lord_Howe")
    assert t.next_fire_after(0) == utc(2024, 10, 5, 15, 45)


def test_at_in_a_fall_overlap_takes_the_first_occurrence() -> None:
    t = parse_expression("at(2024-11-03T01:30:00)", "America/New_York")
    assert t.next_fire_after(0) == utc(2024, 11, 3, 5, 30)  # 01:30 EDT, not EST
    t = parse_expression("at(2024-10-27T01:30:00)", "Europe/London")
    assert t.next_fire_after(0) == utc(2024, 10, 27, 0, 30)  # 01:30 BST, not GMT


# ---- rate() ----


def test_rate_counts_from_start() -> None:
    start = utc(2024, 1, 1, 0, 0, 30)
    t = parse_expression("rate(5 minutes)", start_ms=start)
    assert isinstance(t, RateTrigger)
    assert (t.kind, t.recurring) == ("rate", True)
    assert t.next_fire_after(0) == start
    assert t.next_fire_after(start - 1) == start
    assert t.next_fire_after(start) == start + 300_000
    assert t.next_fire_after(start + 299_999) == start + 300_000
    assert t.next_fire_after(start + 300_000) == start + 600_000


def test_rate_without_start_counts_from_anchor() -> None:
    anchor = utc(2024, 5, 5, 5, 5, 5)
    t = parse_expression("rate(1 hour)", anchor_ms=anchor)
    assert next_fires(t, anchor - 1, 3) == [anchor, anchor + 3_600_000, anchor + 7_200_000]
    # An explicit start wins over the anchor.
    t = parse_expression("rate(1 hour)", start_ms=anchor + 60_000, anchor_ms=anchor)
    assert t.next_fire_after(anchor) == anchor + 60_000


def test_rate_end_is_inclusive() -> None:
    start = utc(2024, 1, 1)
    day = 86_400_000
    t = parse_expression("rate(1 day)", start_ms=start, end_ms=start + 2 * day)
    assert next_fires(t, 0, 10) == [start, start + day, start + 2 * day]
    t = parse_expression("rate(1 day)", start_ms=start, end_ms=start + 2 * day - 1)
    assert next_fires(t, 0, 10) == [start, start + day]


def test_rate_days_are_24_hours_across_dst() -> None:
    # Noon EST on 9 March 2024; a day later the clock says 13:00 EDT.
    start = utc(2024, 3, 9, 17)
    t = parse_expression("rate(1 day)", "America/New_York", start_ms=start)
    assert t.next_fire_after(start) == utc(2024, 3, 10, 17)


@given(
    first=st.integers(-(10**13), 10**13),
    value=st.integers(1, 10_000),
    unit=st.sampled_from(["minute", "hour", "day"]),
    after=st.integers(-(10**13), 10**13),
    end_offset=st.none() | st.integers(-(10**12), 10**12),
)
def test_rate_property(
    first: int, value: int, unit: str, after: int, end_offset: int | None
) -> None:
    period = value * {"minute": 60_000, "hour": 3_600_000, "day": 86_400_000}[unit]
    expr = f"rate({value} {unit}{'' if value == 1 else 's'})"
    end = None if end_offset is None else first + end_offset
    got = parse_expression(expr, "America/Sao_Paulo", start_ms=first, end_ms=end).next_fire_after(
        after
    )
    # Reference: the smallest k >= 0 with first + k * period > after, by ceiling division.
    k = 0 if after < first else -((first - after - 1) // period)
    want: int | None = first + k * period
    assert want is not None
    assert want > after and (want - period <= after or k == 0)
    if end is not None and want > end:
        want = None
    assert got == want
