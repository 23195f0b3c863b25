"""Per-recipient firing times: zones, DST between drip steps, quiet hours, names."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from tidings.campaigns.fanout_timing import (
    Planner,
    QuietHours,
    parse_instant,
    parse_step,
    parse_time,
)
from tidings.errors import ValidationError
from tidings.model.campaigns import Step, recipient_key
from tidings.model.schedules import NAME_RE
from tidings.triggers import parse_expression


def utc(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def fires(expression: str, zone: str) -> int:
    """What the scheduler itself makes of the stored expression."""
    at = parse_expression(expression, zone).next_fire_after(-(2**62))
    assert at is not None
    return at


@pytest.mark.parametrize(("zone", "expected"), [
    ("America/New_York", "2026-12-01T14:00:00"),
    ("Europe/London", "2026-12-01T09:00:00"),
    ("Asia/Kolkata", "2026-12-01T03:30:00"),
    ("Australia/Sydney", "2026-11-30T22:00:00"),  # AEDT, +11
    ("Pacific/Chatham", "2026-11-30T19:15:00"),  # +13:45
    ("America/St_Johns", "2026-12-01T12:30:00"),  # -3:30
    ("UTC", "2026-12-01T09:00:00"),
])
def test_local_nine_on_a_date_in_many_zones(zone: str, expected: str) -> None:
    planner = Planner([Step("send")], on=date(2026, 12, 1), time=(9, 0, 0))
    ((expression, tz, instant),) = planner.zone_plan(zone)
    assert expression == "at(2026-12-01T09:00:00)" and tz == zone
    assert instant == utc(expected) == fires(expression, tz)


def test_drip_steps_keep_the_wall_time_across_a_dst_change() -> None:
    # New York falls back on 2026-11-01 and London on 2026-10-25, between day 0 and day 7:
    # both stay at 09:00 local, so in UTC the last step is an hour later than day 0's.
    steps = [Step("welcome", 0), Step("nudge", 2, "10:00"), Step("last", 7)]
    ny = Planner(steps, on=date(2026, 10, 28), time=(9, 0, 0)).zone_plan("America/New_York")
    assert [p[2] for p in ny] == [utc("2026-10-28T13:00:00"), utc("2026-10-30T14:00:00"),
                                  utc("2026-11-04T14:00:00")]
    london = Planner(steps, on=date(2026, 10, 22), time=(9, 0, 0)).zone_plan("Europe/London")
    assert [p[2] for p in london] == [utc("2026-10-22T08:00:00"), utc("2026-10-24T09:00:00"),
                                      utc("2026-10-29T09:00:00")]
    for expression, tz, instant in ny + london:
        assert fires(expression, tz) == instant


def test_a_time_in_a_spring_forward_gap_shifts_forward_like_at() -> None:
    planner = Planner([Step("s")], on=date(2026, 3, 8), time=(2, 30, 0))
    ((expression, tz, instant),) = planner.zone_plan("America/New_York")
    assert instant == utc("2026-03-08T07:30:00") == fires(expression, tz)  # 03:30 EDT


def test_a_repeated_fall_back_time_means_its_first_occurrence() -> None:
    planner = Planner([Step("s")], on=date(2026, 11, 1), time=(1, 30, 0))
    ((expression, tz, instant),) = planner.zone_plan("America/New_York")
    assert instant == utc("2026-11-01T05:30:00") == fires(expression, tz)  # 01:30 EDT


def test_next_time_is_today_or_tomorrow_per_zone() -> None:
    now = utc("2026-06-01T12:00:00")  # 08:00 in New York, 13:00 in London
    planner = Planner([Step("s")], time=(9, 0, 0), next_time=True, now_ms=now)
    assert planner.zone_plan("America/New_York")[0][2] == utc("2026-06-01T13:00:00")
    assert planner.zone_plan("Europe/London")[0][2] == utc("2026-06-02T08:00:00")


def test_quiet_hours_move_a_step_to_their_end() -> None:
    quiet = QuietHours.parse("21:00-08:00")
    late = Planner([Step("s", 0, "22:30")], on=date(2026, 12, 1), quiet=quiet)
    assert late.zone_plan("Europe/Paris")[0][:1] == ("at(2026-12-02T08:00:00)",)
    early = Planner([Step("s", 0, "06:15")], on=date(2026, 12, 1), quiet=quiet)
    assert early.zone_plan("Europe/Paris")[0][:1] == ("at(2026-12-01T08:00:00)",)
    fine = Planner([Step("s", 0, "20:00")], on=date(2026, 12, 1), quiet=quiet)
    assert fine.zone_plan("Europe/Paris")[0][:1] == ("at(2026-12-01T20:00:00)",)
    # a 90-minute flexible window from 20:00 would reach 21:30: moved too
    flexible = Planner([Step("s", 0, "20:00")], on=date(2026, 12, 1), quiet=quiet,
                       flex_minutes=90)
    assert flexible.zone_plan("Europe/Paris")[0][:1] == ("at(2026-12-02T08:00:00)",)
    daytime = QuietHours.parse("12:00-14:00")  # a window not crossing midnight
    lunch = Planner([Step("s", 0, "12:30")], on=date(2026, 12, 1), quiet=daytime)
    assert lunch.zone_plan("UTC")[0][:1] == ("at(2026-12-01T14:00:00)",)


def test_an_instant_column_is_kept_or_moved_out_of_quiet_hours() -> None:
    quiet = QuietHours.parse("21:00-08:00")
    planner = Planner([Step("a"), Step("b", 1)], quiet=quiet)
    noon_tokyo = utc("2026-12-01T03:00:00")  # 12:00 in Tokyo
    (a, b) = planner.instant_plan(noon_tokyo, "Asia/Tokyo")
    assert a == ("at(2026-12-01T03:00:00)", "UTC", noon_tokyo)
    assert b == ("at(2026-12-02T12:00:00)", "Asia/Tokyo", noon_tokyo + 86_400_000)
    night_tokyo = utc("2026-12-01T14:00:00")  # 23:00 in Tokyo
    (a, _) = planner.instant_plan(night_tokyo, "Asia/Tokyo")
    assert a == ("at(2026-12-02T08:00:00)", "Asia/Tokyo", utc("2026-12-01T23:00:00"))


def test_parsing_rules() -> None:
    assert parse_step("nudge:2:10:00:nudge-tpl") == Step("nudge", 2, "10:00", "nudge-tpl")
    assert parse_step("welcome:0") == Step("welcome", 0)
    for bad in ("nudge", "bad-name:0", "x:two", "x:1:25:00", "x:400"):
        with pytest.raises(ValidationError):
            parse_step(bad)
    assert parse_time("t", "09:05:30") == (9, 5, 30)
    with pytest.raises(ValidationError, match="UTC offset"):
        parse_instant("send_at", "2026-12-01T09:00:00")
    assert parse_instant("send_at", "2026-12-01T09:00:00Z") == utc("2026-12-01T09:00:00")
    with pytest.raises(ValidationError, match="not a known IANA"):
        Planner([Step("s")], on=date(2026, 1, 1), time=(9, 0, 0)).zone_plan("Mars/Olympus")
    with pytest.raises(ValidationError, match="flexible window"):
        Planner([Step("s")], on=date(2026, 1, 1), time=(9, 0, 0),
                quiet=QuietHours.parse("01:00-00:30"), flex_minutes=60)


def test_recipient_keys_are_valid_names_stable_and_distinct() -> None:
    assert recipient_key("u-123_x.y") == "u-123_x.y"
    odd = ["ana@example.com", "ana#example.com", "x" * 80, "x" * 81, "Zoë"]
    keys = [recipient_key(r) for r in odd]
    assert len(set(keys)) == len(keys)
    assert keys == [recipient_key(r) for r in odd]
    for key in keys:
        assert NAME_RE.match("abcdefghijklmnopqrst-" + key)
