"""Parsing of AWS cron expressions into a `CronSpec` (evaluation lives in `cron.py`).

Syntax followed (AWS EventBridge "Cron expressions reference"):

    cron(minutes hours day-of-month month day-of-week year)

    field          values              wildcards
    minutes        0-59                , - * /
    hours          0-23                , - * /
    day-of-month   1-31                , - * ? / L W
    month          1-12 or JAN-DEC     , - * /
    day-of-week    1-7 or SUN-SAT      , - * ? L #      (1 = Sunday)
    year           1970-2199           , - * /

- Exactly one of day-of-month and day-of-week is `?`: AWS rejects a value (or `*`) in both,
  and `?` in both leaves the day unspecified.
- `a/n` means a, a+n, a+2n, ... up to the field's maximum; `*/n` starts at the minimum and
  `a-b/n` stays within the range. `/` is not allowed in day-of-week (not in the AWS table).
- `L` in day-of-month is the month's last day, `LW` its last weekday (Mon-Fri), `nW` the
  weekday nearest day n without leaving the month. `L` alone in day-of-week is the last
  day of the week (7, Saturday); `nL` is the last day-of-week n of the month; `n#k` is the
  k-th (1-5) day-of-week n of the month, e.g. `3#2` the second Tuesday.
- AWS allows only one expression in day-of-week when `#` is used ("3#1,6#3" is invalid);
  the same rule is applied to the `L` and `W` forms, which must stand alone in their field.

Choices where AWS documents nothing (conservative: reject rather than guess):
- `L-n` (n-th last day) is not in the AWS reference and is rejected.
- Ranges must not wrap (`FRI-MON`, `22-2` are rejected); use a list instead.
- Names (JAN, MON) and the letters L, W are accepted in any letter case.
- Numbers are ASCII digits only; a step must be a positive integer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tidings.triggers.base import invalid


@dataclass(frozen=True, slots=True)
class DaysOfMonth:
    days: frozenset[int]


@dataclass(frozen=True, slots=True)
class LastDayOfMonth:
    weekday_only: bool  # True for LW


@dataclass(frozen=True, slots=True)
class NearestWeekday:
    day: int


@dataclass(frozen=True, slots=True)
class DaysOfWeek:
    weekdays: frozenset[int]  # AWS numbering, 1 = Sunday


@dataclass(frozen=True, slots=True)
class LastWeekdayOfMonth:
    weekday: int


@dataclass(frozen=True, slots=True)
class NthWeekdayOfMonth:
    weekday: int
    nth: int


DayRule = (
    DaysOfMonth
    | LastDayOfMonth
    | NearestWeekday
    | DaysOfWeek
    | LastWeekdayOfMonth
    | NthWeekdayOfMonth
)


@dataclass(frozen=True, slots=True)
class CronSpec:
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    months: tuple[int, ...]
    years: tuple[int, ...]
    day: DayRule


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    lo: int
    hi: int
    names: tuple[str, ...] = ()  # names[i] stands for lo + i
    slash: bool = True


_MINUTES = _Field("minutes", 0, 59)
_HOURS = _Field("hours", 0, 23)
_DOM = _Field("day-of-month", 1, 31)
_MONTH = _Field(
    "month",
    1,
    12,
    ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"),
)
_DOW = _Field("day-of-week", 1, 7, ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"), False)
_YEAR = _Field("year", 1970, 2199)

_VALUE = r"(?:[0-9]+|[A-Z]{3})"
_NEAREST = re.compile(r"([0-9]+)W")
_DOW_LAST = re.compile(rf"({_VALUE})L")
_DOW_NTH = re.compile(rf"({_VALUE})#([0-9]+)")


class _Parser:
    def __init__(self, expression: str) -> None:
        self.expression = expression

    def fail(self, problem: str) -> Exception:
        return invalid(self.expression, problem)

    def value(self, text: str, field: _Field) -> int:
        if text.isascii() and text.isdigit():
            v = int(text)
        elif text in field.names:
            v = field.lo + field.names.index(text)
        else:
            raise self.fail(f"{text!r} is not a valid {field.name} value")
        if not field.lo <= v <= field.hi:
            raise self.fail(f"{field.name} values must be between {field.lo} and {field.hi}")
        return v

    def item(self, text: str, field: _Field) -> range:
        base, sep, step_text = text.partition("/")
        step = 1
        if sep:
            if not field.slash:
                raise self.fail(f"the / wildcard is not allowed in the {field.name} field")
            if not (step_text.isascii() and step_text.isdigit()) or int(step_text) < 1:
                raise self.fail(f"the {field.name} increment after / must be a positive integer")
            step = int(step_text)
        if base == "*":
            return range(field.lo, field.hi + 1, step)
        first, dash, last = base.partition("-")
        lo = self.value(first, field)
        if not dash:
            return range(lo, (field.hi if sep else lo) + 1, step)
        hi = self.value(last, field)
        if lo > hi:
            raise self.fail(f"the {field.name} range {base} runs backwards")
        return range(lo, hi + 1, step)

    def values(self, text: str, field: _Field) -> tuple[int, ...]:
        if text in ("?", ""):
            raise self.fail(f"? is only allowed in day-of-month or day-of-week, not {field.name}")
        out: set[int] = set()
        for part in text.split(","):
            if not part:
                raise self.fail(f"the {field.name} field has an empty list item")
            out.update(self.item(part, field))
        return tuple(sorted(out))

    def day_of_month(self, text: str) -> DayRule:
        if text == "L":
            return LastDayOfMonth(weekday_only=False)
        if text == "LW":
            return LastDayOfMonth(weekday_only=True)
        if text.startswith("L-"):
            raise self.fail("L-n (days before the last day) is not supported in day-of-month")
        m = _NEAREST.fullmatch(text)
        if m:
            return NearestWeekday(self.value(m.group(1), _DOM))
        if "L" in text or "W" in text:
            raise self.fail("L, LW and nW must stand alone in the day-of-month field")
        return DaysOfMonth(frozenset(self.values(text, _DOM)))

    def day_of_week(self, text: str) -> DayRule:
        if "#" in text:
            if "," in text:
                raise self.fail("only one expression is allowed in day-of-week when # is used")
            m = _DOW_NTH.fullmatch(text)
            if m is None:
                raise self.fail("the # wildcard takes the form day#n, e.g. 3#2")
            nth = int(m.group(2))
            if not 1 <= nth <= 5:
                raise self.fail("the n in day#n must be between 1 and 5")
            return NthWeekdayOfMonth(self.value(m.group(1), _DOW), nth)
        if text == "L":
            return DaysOfWeek(frozenset({7}))  # last day of the week: Saturday
        if "L" in text:  # no day name contains an L
            m = _DOW_LAST.fullmatch(text)
            if m is None or "," in text:
                raise self.fail("L must stand alone in day-of-week, as L or dayL (e.g. 6L)")
            return LastWeekdayOfMonth(self.value(m.group(1), _DOW))
        return DaysOfWeek(frozenset(self.values(text, _DOW)))


def parse_cron(expression: str) -> CronSpec:
    if not (expression.startswith("cron(") and expression.endswith(")")):
        raise invalid(expression, "a cron expression must be cron(fields)")
    p = _Parser(expression)
    fields = expression[5:-1].upper().split()
    if len(fields) != 6:
        raise p.fail(
            "a cron expression has six fields "
            f"(minutes hours day-of-month month day-of-week year), got {len(fields)}"
        )
    minutes, hours, dom, month, dow, year = fields
    if dom == "?" and dow == "?":
        raise p.fail("day-of-month and day-of-week cannot both be ?; use ? in exactly one")
    if dom != "?" and dow != "?":
        raise p.fail("day-of-month and day-of-week cannot both be specified; use ? in one of them")
    day = p.day_of_week(dow) if dom == "?" else p.day_of_month(dom)
    return CronSpec(
        minutes=p.values(minutes, _MINUTES),
        hours=p.values(hours, _HOURS),
        months=p.values(month, _MONTH),
        years=p.values(year, _YEAR),
        day=day,
    )
