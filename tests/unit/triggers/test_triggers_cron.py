"""Cron triggers: each syntax feature, month/year edges, DST in New York and London."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from tidings.triggers import CronTrigger, next_fires, parse_expression


def utc(y: int, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0) -> int:
    return int(datetime(y, mo, d, h, mi, s, tzinfo=UTC).timestamp()) * 1000


def fires(expr: str, after: int, n: int, tz: str = "UTC", **bounds: int) -> list[int]:
    return next_fires(parse_expression(expr, tz, **bounds), after, n)


def test_parse_returns_a_recurring_cron_trigger() -> None:
    trigger = parse_expression("cron(0 10 * * ? *)")
    assert isinstance(trigger, CronTrigger)
    assert trigger.kind == "cron"
    assert trigger.recurring is True


def test_next_fire_is_strictly_after() -> None:
    t = parse_expression("cron(0 10 * * ? *)")
    assert t.next_fire_after(utc(2024, 1, 1, 10)) == utc(2024, 1, 2, 10)
    assert t.next_fire_after(utc(2024, 1, 1, 10) - 1) == utc(2024, 1, 1, 10)
    assert t.next_fire_after(utc(2024, 1, 1, 9, 59, 30)) == utc(2024, 1, 1, 10)


def test_lists_ranges_and_steps() -> None:
    assert fires("cron(5,35 8-9 * * ? *)", utc(2024, 1, 1), 5) == [
        utc(2024, 1, 1, 8, 5),
        utc(2024, 1, 1, 8, 35),
        utc(2024, 1, 1, 9, 5),
        utc(2024, 1, 1, 9, 35),
        utc(2024, 1, 2, 8, 5),
    ]
    # AWS: "1/10" in minutes is every tenth minute starting from minute 1.
    assert fires("cron(1/10 0 * * ? *)", utc(2024, 1, 1), 7) == [
        utc(2024, 1, 1, 0, m) for m in (1, 11, 21, 31, 41, 51)
    ] + [utc(2024, 1, 2, 0, 1)]
    assert fires("cron(10-30/10 */12 * * ? *)", utc(2024, 1, 1), 4) == [
        utc(2024, 1, 1, 0, 10),
        utc(2024, 1, 1, 0, 20),
        utc(2024, 1, 1, 0, 30),
        utc(2024, 1, 1, 12, 10),
    ]


def test_month_and_weekday_names() -> None:
    # 2024-01-01 is a Monday; Mondays of January and July only.
    got = fires("cron(0 12 ? JAN,JUL MON *)", utc(2024, 1, 1), 6)
    assert got == [utc(2024, 1, d, 12) for d in (1, 8, 15, 22, 29)] + [utc(2024, 7, 1, 12)]
    assert fires("cron(0 12 ? * mon-fri *)", utc(2024, 1, 5, 13), 2) == [
        utc(2024, 1, 8, 12),
        utc(2024, 1, 9, 12),
    ]


def test_day_of_week_one_is_sunday() -> None:
    assert fires("cron(0 0 ? * 1 *)", utc(2024, 1, 1), 1) == [utc(2024, 1, 7)]
    assert fires("cron(0 0 ? * 7 *)", utc(2024, 1, 1), 1) == [utc(2024, 1, 6)]


def test_l_alone_in_day_of_week_is_saturday() -> None:
    assert fires("cron(0 0 ? * L *)", utc(2024, 1, 1), 2) == [utc(2024, 1, 6), utc(2024, 1, 13)]


def test_last_day_of_month() -> None:
    assert fires("cron(0 0 L * ? *)", utc(2024, 1, 1), 4) == [
        utc(2024, 1, 31),
        utc(2024, 2, 29),
        utc(2024, 3, 31),
        utc(2024, 4, 30),
    ]
    assert fires("cron(0 0 L 2 ? *)", utc(2023, 1, 1), 2) == [utc(2023, 2, 28), utc(2024, 2, 29)]


def test_last_weekday_of_month() -> None:
    # 2024-03-31 is a Sunday, 2024-08-31 a Saturday, 2024-06-30 a Sunday.
    got = fires("cron(0 0 LW * ? *)", utc(2024, 3, 1), 6)
    assert got == [
        utc(2024, 3, 29),
        utc(2024, 4, 30),
        utc(2024, 5, 31),
        utc(2024, 6, 28),
        utc(2024, 7, 31),
        utc(2024, 8, 30),
    ]


@pytest.mark.parametrize(
    ("expr", "after", "expected"),
    [
        # 2024-06-15 is a Saturday: the Friday before.
        ("cron(0 0 15W 6 ? *)", utc(2024, 1, 1), utc(2024, 6, 14)),
        # 2024-09-15 is a Sunday: the Monday after.
        ("cron(0 0 15W 9 ? *)", utc(2024, 1, 1), utc(2024, 9, 16)),
        # 2024-05-15 is a Wednesday: that day.
        ("cron(0 0 15W 5 ? *)", utc(2024, 1, 1), utc(2024, 5, 15)),
        # 2024-06-01 is a Saturday: never back into May, so Monday the 3rd.
        ("cron(0 0 1W 6 ? *)", utc(2024, 1, 1), utc(2024, 6, 3)),
        # 2024-09-01 is a Sunday: Monday the 2nd.
        ("cron(0 0 1W 9 ? *)", utc(2024, 1, 1), utc(2024, 9, 2)),
        # 2024-03-31 is a Sunday: never into April, so Friday the 29th.
        ("cron(0 0 31W 3 ? *)", utc(2024, 1, 1), utc(2024, 3, 29)),
        # 2024-08-31 is a Saturday: Friday the 30th.
        ("cron(0 0 31W 8 ? *)", utc(2024, 1, 1), utc(2024, 8, 30)),
        # April has no 31st, so 31W skips it.
        ("cron(0 0 31W * ? *)", utc(2024, 4, 1), utc(2024, 5, 31)),
        # February never has a 30th.
        ("cron(0 0 30W 2 ? *)", utc(2024, 1, 1), None),
    ],
)
def test_nearest_weekday(expr: str, after: int, expected: int | None) -> None:
    assert parse_expression(expr).next_fire_after(after) == expected


def test_fifth_friday_skips_months_without_one() -> None:
    got = fires("cron(0 12 ? * 6#5 *)", utc(2024, 1, 1), 5)
    assert got == [
        utc(2024, 3, 29, 12),
        utc(2024, 5, 31, 12),
        utc(2024, 8, 30, 12),
        utc(2024, 11, 29, 12),
        utc(2025, 1, 31, 12),
    ]


def test_nth_weekday() -> None:
    # AWS example: 3#2 is the second Tuesday of the month.
    assert fires("cron(0 9 ? * 3#2 *)", utc(2024, 1, 1), 2) == [
        utc(2024, 1, 9, 9),
        utc(2024, 2, 13, 9),
    ]
    assert fires("cron(0 9 ? * MON#1 *)", utc(2024, 1, 2), 1) == [utc(2024, 2, 5, 9)]


def test_last_given_weekday_of_month() -> None:
    assert fires("cron(0 0 ? * 6L *)", utc(2024, 1, 1), 3) == [
        utc(2024, 1, 26),
        utc(2024, 2, 23),
        utc(2024, 3, 29),
    ]
    assert fires("cron(0 0 ? * FRIL *)", utc(2024, 1, 1), 1) == [utc(2024, 1, 26)]


def test_leap_day() -> None:
    t = parse_expression("cron(0 12 29 2 ? *)")
    assert t.next_fire_after(utc(2024, 1, 1)) == utc(2024, 2, 29, 12)
    assert t.next_fire_after(utc(2024, 3, 1)) == utc(2028, 2, 29, 12)
    # 2100 is not a leap year.
    assert t.next_fire_after(utc(2096, 3, 1)) == utc(2104, 2, 29, 12)


def test_year_field_and_upper_bound() -> None:
    assert fires("cron(0 0 1 1 ? 2025-2026)", utc(2024, 6, 1), 5) == [
        utc(2025, 1, 1),
        utc(2026, 1, 1),
    ]
    assert fires("cron(0 0 1 1 ? 2030/10)", utc(2024, 6, 1), 2) == [
        utc(2030, 1, 1),
        utc(2040, 1, 1),
    ]
    t = parse_expression("cron(0 0 31 12 ? *)")
    assert t.next_fire_after(utc(2199, 12, 30)) == utc(2199, 12, 31)
    assert t.next_fire_after(utc(2199, 12, 31)) is None
    assert t.next_fire_after(utc(2500, 1, 1)) is None
    assert t.next_fire_after(utc(1900, 1, 1)) == utc(1970, 12, 31)


def test_impossible_dates_never_fire() -> None:
    assert parse_expression("cron(0 0 31 2 ? *)").next_fire_after(utc(2024, 1, 1)) is None
    assert parse_expression("cron(0 0 31 4,6,9,11 ? *)").next_fire_after(0) is None


def test_start_and_end_are_inclusive() -> None:
    start, end = utc(2024, 1, 3, 10), utc(2024, 1, 5, 10)
    got = fires("cron(0 10 * * ? *)", utc(2024, 1, 1), 10, start_ms=start, end_ms=end)
    assert got == [utc(2024, 1, 3, 10), utc(2024, 1, 4, 10), utc(2024, 1, 5, 10)]
    got = fires("cron(0 10 * * ? *)", 0, 10, start_ms=start + 1, end_ms=end - 1)
    assert got == [utc(2024, 1, 4, 10)]


def test_evaluated_in_the_schedule_zone() -> None:
    # 09:00 in Kolkata (+05:30) is 03:30 UTC; in Kathmandu (+05:45) 03:15 UTC.
    assert fires("cron(0 9 * * ? *)", utc(2024, 1, 1), 1, "Asia/Kolkata") == [
        utc(2024, 1, 1, 3, 30)
    ]
    assert fires("cron(0 9 * * ? *)", utc(2024, 1, 1), 1, "Asia/Kathmandu") == [
        utc(2024, 1, 1, 3, 15)
    ]
    # Midnight on the 1st in Tokyo is still the previous month in UTC.
    assert fires("cron(0 0 1 * ? *)", utc(2024, 1, 1), 1, "Asia/Tokyo") == [utc(2024, 1, 31, 15)]


# New York 2024: 02:00 EST -> 03:00 EDT on 10 March (07:00Z);
# 02:00 EDT -> 01:00 EST on 3 November (06:00Z).
# London 2024: 01:00 GMT -> 02:00 BST on 31 March (01:00Z);
# 02:00 BST -> 01:00 GMT on 27 October (01:00Z).


def test_new_york_spring_gap_is_skipped() -> None:
    got = fires("cron(30 2 * * ? *)", utc(2024, 3, 9, 8), 2, "America/New_York")
    assert got == [utc(2024, 3, 11, 6, 30), utc(2024, 3, 12, 6, 30)]
    got = fires("cron(*/30 * * * ? *)", utc(2024, 3, 10, 6), 3, "America/New_York")
    assert got == [utc(2024, 3, 10, 6, 30), utc(2024, 3, 10, 7), utc(2024, 3, 10, 7, 30)]


def test_new_york_fall_overlap_fires_once() -> None:
    got = fires("cron(30 1 * * ? *)", utc(2024, 11, 2, 6), 2, "America/New_York")
    assert got == [utc(2024, 11, 3, 5, 30), utc(2024, 11, 4, 6, 30)]
    got = fires("cron(*/30 * * * ? *)", utc(2024, 11, 3, 4), 5, "America/New_York")
    assert got == [
        utc(2024, 11, 3, 4, 30),  # 00:30 EDT
        utc(2024, 11, 3, 5),  # 01:00 EDT
        utc(2024, 11, 3, 5, 30),  # 01:30 EDT; the EST repeat of 01:00-01:59 is skipped
        utc(2024, 11, 3, 7),  # 02:00 EST
        utc(2024, 11, 3, 7, 30),
    ]


def test_new_york_search_from_inside_the_repeated_hour() -> None:
    inside = utc(2024, 11, 3, 6, 10)  # 01:10 EST, second pass
    t = parse_expression("cron(15 1 * * ? *)", "America/New_York")
    assert t.next_fire_after(inside) == utc(2024, 11, 4, 6, 15)
    t = parse_expression("cron(0 2 * * ? *)", "America/New_York")
    assert t.next_fire_after(inside) == utc(2024, 11, 3, 7)


def test_london_spring_gap_and_fall_overlap() -> None:
    got = fires("cron(30 1 * * ? *)", utc(2024, 3, 30, 2), 2, "Europe/London")
    # 01:30 on 31 March does not exist in London: skipped, next is 01:30 BST on 1 April.
    assert got == [utc(2024, 4, 1, 0, 30), utc(2024, 4, 2, 0, 30)]
    got = fires("cron(30 1 * * ? *)", utc(2024, 10, 26, 12), 2, "Europe/London")
    assert got == [utc(2024, 10, 27, 0, 30), utc(2024, 10, 28, 1, 30)]


def test_lord_howe_half_hour_shift() -> None:
    # Lord Howe moves +10:30 -> +11:00 at 02:00 on 6 Oct 2024: 02:00-02:29 never happens.
    got = fires("cron(15,45 2 * * ? *)", utc(2024, 10, 5, 12), 2, "Australia/Lord_Howe")
    assert got == [utc(2024, 10, 5, 15, 45), utc(2024, 10, 6, 15, 15)]


def test_sparse_expression_is_fast() -> None:
    t = parse_expression("cron(0 9 29 2 ? *)", "Europe/London")
    begin = time.perf_counter()
    for i in range(2_000):
        assert t.next_fire_after(utc(2024, 3, 1) + i * 3_600_000) == utc(2028, 2, 29, 9)
    # ~5 µs per call on a laptop; the bound is loose enough for a loaded CI machine.
    assert time.perf_counter() - begin < 1.0
