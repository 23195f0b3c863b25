"""Validation of schedule expressions and time zones: each rule gives a message naming it."""

from __future__ import annotations

import pytest

from tidings.errors import ValidationError
from tidings.triggers import parse_expression, validate_expression


def _error(expression: str, timezone: str = "UTC") -> ValidationError:
    with pytest.raises(ValidationError) as info:
        parse_expression(expression, timezone, anchor_ms=0)
    # validate_expression must agree with parse_expression on every input.
    with pytest.raises(ValidationError):
        validate_expression(expression, timezone)
    return info.value


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("", "1 to 256 characters"),
        ("cron(" + "0," * 200 + "0 * * * ? *)", "1 to 256 characters"),
        ("every 5 minutes", "at(...), rate(...) or cron(...)"),
        (" rate(5 minutes)", "at(...), rate(...) or cron(...)"),
        ("RATE(5 minutes)", "at(...), rate(...) or cron(...)"),
        # rate
        ("rate(5 minutes", "rate(value unit)"),
        ("rate(5minutes)", "rate(value unit)"),
        ("rate(-5 minutes)", "rate(value unit)"),
        ("rate(1.5 hours)", "rate(value unit)"),
        ("rate(٥ minutes)", "rate(value unit)"),
        ("rate(0 minutes)", "positive integer"),
        ("rate(5 seconds)", "minute(s), hour(s) or day(s)"),
        ("rate(2 weeks)", "minute(s), hour(s) or day(s)"),
        ("rate(1 minutes)", "singular unit 'minute'"),
        ("rate(1 hours)", "singular unit 'hour'"),
        ("rate(5 hour)", "plural unit 'hours'"),
        ("rate(2 day)", "plural unit 'days'"),
        ("rate(5 Minutes)", "minute(s), hour(s) or day(s)"),
        # at
        ("at(2024-01-01 10:00:00)", "at(yyyy-mm-ddThh:mm:ss)"),
        ("at(2024-01-01T10:00)", "at(yyyy-mm-ddThh:mm:ss)"),
        ("at(2024-1-01T10:00:00)", "at(yyyy-mm-ddThh:mm:ss)"),
        ("at(2024-01-01T10:00:00Z)", "at(yyyy-mm-ddThh:mm:ss)"),
        ("at(2023-02-29T10:00:00)", "do not exist in the calendar"),
        ("at(2024-04-31T10:00:00)", "do not exist in the calendar"),
        ("at(2024-01-01T24:00:00)", "do not exist in the calendar"),
        ("at(2024-01-01T10:60:00)", "do not exist in the calendar"),
        # cron: shape
        ("cron(0 10 * * ?)", "six fields"),
        ("cron(0 10 * * ? * *)", "six fields"),
        ("cron()", "six fields"),
        # cron: day-of-month / day-of-week
        ("cron(0 10 * * * *)", "cannot both be specified"),
        ("cron(7 20 * * 1-7 *)", "cannot both be specified"),
        ("cron(0 10 1 * MON *)", "cannot both be specified"),
        ("cron(0 10 ? * ? *)", "cannot both be ?"),
        ("cron(? 10 * * ? *)", "? is only allowed in day-of-month or day-of-week"),
        ("cron(0 ? * * ? *)", "? is only allowed"),
        # cron: values
        ("cron(60 10 * * ? *)", "minutes values must be between 0 and 59"),
        ("cron(0 24 * * ? *)", "hours values must be between 0 and 23"),
        ("cron(0 10 0 * ? *)", "day-of-month values must be between 1 and 31"),
        ("cron(0 10 32 * ? *)", "day-of-month values must be between 1 and 31"),
        ("cron(0 10 * 13 ? *)", "month values must be between 1 and 12"),
        ("cron(0 10 * 0 ? *)", "month values must be between 1 and 12"),
        ("cron(0 10 ? * 0 *)", "day-of-week values must be between 1 and 7"),
        ("cron(0 10 ? * 8 *)", "day-of-week values must be between 1 and 7"),
        ("cron(0 10 * * ? 1969)", "year values must be between 1970 and 2199"),
        ("cron(0 10 * * ? 2200)", "year values must be between 1970 and 2199"),
        ("cron(0 10 * FOO ? *)", "'FOO' is not a valid month value"),
        ("cron(0 10 ? * SUNDAY *)", "not a valid day-of-week value"),
        ("cron(0 10 * * ? MON)", "not a valid year value"),
        ("cron(0 10 ? * JAN *)", "not a valid day-of-week value"),
        ("cron(x 10 * * ? *)", "not a valid minutes value"),
        ("cron(+5 10 * * ? *)", "not a valid minutes value"),
        # cron: ranges, lists, steps
        ("cron(0 22-2 * * ? *)", "range 22-2 runs backwards"),
        ("cron(0 10 ? * FRI-MON *)", "range FRI-MON runs backwards"),
        ("cron(0,,5 10 * * ? *)", "empty list item"),
        ("cron(0, 10 * * ? *)", "empty list item"),
        ("cron(*/0 10 * * ? *)", "increment after / must be a positive integer"),
        ("cron(0/ 10 * * ? *)", "increment after / must be a positive integer"),
        ("cron(0/x 10 * * ? *)", "increment after / must be a positive integer"),
        ("cron(0/5/5 10 * * ? *)", "increment after / must be a positive integer"),
        ("cron(0 10 ? * 1/2 *)", "/ wildcard is not allowed in the day-of-week"),
        ("cron(0 10 ? * */2 *)", "/ wildcard is not allowed in the day-of-week"),
        # cron: L W #
        ("cron(0 10 L-3 * ? *)", "L-n"),
        ("cron(0 10 1,L * ? *)", "must stand alone in the day-of-month"),
        ("cron(0 10 1W,15 * ? *)", "must stand alone in the day-of-month"),
        ("cron(0 10 1-5W * ? *)", "must stand alone in the day-of-month"),
        ("cron(0 10 32W * ? *)", "day-of-month values must be between 1 and 31"),
        ("cron(0 10 W * ? *)", "must stand alone in the day-of-month"),
        ("cron(0 10 ? * 3#1,6#3 *)", "only one expression is allowed in day-of-week when #"),
        ("cron(0 10 ? * 3#6 *)", "between 1 and 5"),
        ("cron(0 10 ? * 3#0 *)", "between 1 and 5"),
        ("cron(0 10 ? * #2 *)", "day#n"),
        ("cron(0 10 ? * 8#2 *)", "day-of-week values must be between 1 and 7"),
        ("cron(0 10 ? * 2,6L *)", "L must stand alone in day-of-week"),
        ("cron(0 10 ? * L5 *)", "L must stand alone in day-of-week"),
        ("cron(0 10 ? * 0L *)", "day-of-week values must be between 1 and 7"),
        ("cron(0 10 * * L *)", "cannot both be specified"),
    ],
)
def test_bad_expression_names_the_rule(expression: str, fragment: str) -> None:
    err = _error(expression)
    assert err.field == "ScheduleExpression"
    assert fragment in err.rule
    assert err.rule.startswith("Invalid Schedule Expression")


@pytest.mark.parametrize(
    "timezone",
    [
        "",
        "Mars/Olympus",
        "utc/../UTC",
        "/etc/localtime",
        "localtime",
        "Factory",
        "posix/UTC",
        "right/UTC",
        "america/new_york",
        "America/New York",
        "x" * 51,
    ],
)
def test_unknown_time_zone_is_rejected(timezone: str) -> None:
    err = _error("rate(5 minutes)", timezone)
    assert err.field == "ScheduleExpressionTimezone"
    assert "time zone" in err.rule


@pytest.mark.parametrize(
    ("expression", "kind"),
    [
        ("rate(1 minute)", "rate"),
        ("rate(5 minutes)", "rate"),
        ("rate(1 hour)", "rate"),
        ("rate(12 hours)", "rate"),
        ("rate(1 day)", "rate"),
        ("rate(7 days)", "rate"),
        ("at(2030-12-31T23:59:59)", "at"),
        ("cron(0 10 * * ? *)", "cron"),
        ("cron(15 12 * * ? *)", "cron"),
        ("cron(0 18 ? * MON-FRI *)", "cron"),
        ("cron(0 8 1 * ? *)", "cron"),
        ("cron(0/15 * * * ? *)", "cron"),
        ("cron(0/10 * ? * MON-FRI *)", "cron"),
        ("cron(0/5 8-17 ? * MON-FRI *)", "cron"),
        ("cron(0 9 ? * 2#1 *)", "cron"),
        ("cron(0-15/1 8-8 ? * 2,3,4,5,6,7 *)", "cron"),
        ("cron(1-31/30 1-1 ? * 1,7 *)", "cron"),
        ("cron(0 12 L * ? 2024-2030)", "cron"),
        ("cron(0 12 LW JAN,JUL ? *)", "cron"),
        ("cron(0 12 15W * ? *)", "cron"),
        ("cron(0 12 ? * 6L *)", "cron"),
        ("cron(0 12 ? * FRIL *)", "cron"),
        ("cron(0 12 ? * L *)", "cron"),
        ("cron(0 12 ? * mon-fri *)", "cron"),
        ("cron(0 12 */2 jan-jun/2 ? 2024/3)", "cron"),
    ],
)
def test_valid_expressions_are_accepted(expression: str, kind: str) -> None:
    assert validate_expression(expression, "Europe/London") == kind
    assert parse_expression(expression, "Europe/London", anchor_ms=0).kind == kind


def test_rate_needs_a_start_or_an_anchor() -> None:
    with pytest.raises(ValueError, match="anchor_ms"):
        parse_expression("rate(5 minutes)")
