"""Cron-based schedules: evaluating a `CronSpec` in an IANA time zone.

The fields match wall-clock time in the schedule's zone. Daylight saving time follows the
rule AWS documents for EventBridge Scheduler: "When the time shifts forward in Spring, your
schedule invocation gets skipped if the cron expression falls on a non-existent date and
time. When the time shifts back in the Fall, your schedule runs only once and doesn't
repeat its invocation." Hence:

- a matching wall time inside a spring-forward gap does not fire at all;
- a matching wall time that occurs twice fires once, at its first (earlier, fold=0)
  occurrence; nothing fires during the repeated stretch of clock time.

Equivalently: the firing instants are {utc(w, fold=0) : w matches and w exists}. Over
existing wall times that map is strictly increasing, so the search walks wall time forward
and the first hit that maps past `after_ms` is the answer.

StartDate and EndDate are inclusive bounds ("on, or after" / "on, or before").

The search skips whole years, months, days and hours that cannot match (sorted field
values plus a per-(year, month) cache of matching days), so an expression that fires once
in four years, such as `cron(0 9 29 2 ? *)`, costs a handful of steps, not a minute walk.
"""

from __future__ import annotations

import calendar
from bisect import bisect_left
from datetime import datetime
from zoneinfo import ZoneInfo

from tidings.triggers.base import MINUTE_MS, offset_seconds, wall_to_ms
from tidings.triggers.parse import (
    CronSpec,
    DayRule,
    DaysOfMonth,
    DaysOfWeek,
    LastDayOfMonth,
    LastWeekdayOfMonth,
    NearestWeekday,
    NthWeekdayOfMonth,
)

# Searching from before 1970 starts the wall clock in 1969 at worst, which the year field
# skips; after 2199 (the last year AWS allows) nothing can match.
_LOWEST_MS = -2 * 86_400_000
_HIGHEST_MS = wall_to_ms(2200, 1, 2, 0, 0, 0, 0)

_Wall = tuple[int, int, int, int, int]


def _aws_weekday(python_weekday: int) -> int:
    """Python's Monday=0 to AWS's Sunday=1 ... Saturday=7."""
    return (python_weekday + 1) % 7 + 1


def matching_days(rule: DayRule, year: int, month: int) -> tuple[int, ...]:
    """The days of (year, month) that the day-of-month / day-of-week rule selects."""
    first_weekday, ndays = calendar.monthrange(year, month)
    first_aws = _aws_weekday(first_weekday)

    def weekday(day: int) -> int:
        return (first_aws - 1 + day - 1) % 7 + 1

    if isinstance(rule, DaysOfMonth):
        return tuple(d for d in sorted(rule.days) if d <= ndays)
    if isinstance(rule, DaysOfWeek):
        return tuple(d for d in range(1, ndays + 1) if weekday(d) in rule.weekdays)
    if isinstance(rule, LastDayOfMonth):
        if not rule.weekday_only:
            return (ndays,)
        wd = weekday(ndays)
        return (ndays - 1,) if wd == 7 else (ndays - 2,) if wd == 1 else (ndays,)
    if isinstance(rule, NearestWeekday):
        day = rule.day
        if day > ndays:
            return ()
        wd = weekday(day)
        if wd == 7:  # Saturday: the Friday before, unless that leaves the month
            return (day + 2,) if day == 1 else (day - 1,)
        if wd == 1:  # Sunday: the Monday after, unless that leaves the month
            return (day - 2,) if day == ndays else (day + 1,)
        return (day,)
    if isinstance(rule, LastWeekdayOfMonth):
        return (ndays - (weekday(ndays) - rule.weekday) % 7,)
    if isinstance(rule, NthWeekdayOfMonth):
        day = 1 + (rule.weekday - first_aws) % 7 + 7 * (rule.nth - 1)
        return (day,) if day <= ndays else ()
    raise TypeError(f"unknown day rule {rule!r}")  # pragma: no cover


class CronTrigger:
    """Fires at every wall time matching `spec` in `zone`, within [start_ms, end_ms]."""

    __slots__ = ("spec", "zone", "start_ms", "end_ms", "_days")

    kind: str = "cron"
    recurring: bool = True

    def __init__(
        self,
        spec: CronSpec,
        zone: ZoneInfo,
        start_ms: int | None = None,
        end_ms: int | None = None,
    ) -> None:
        self.spec = spec
        self.zone = zone
        self.start_ms = start_ms
        self.end_ms = end_ms
        self._days: dict[tuple[int, int], tuple[int, ...]] = {}

    def __repr__(self) -> str:
        return (
            f"CronTrigger(spec={self.spec!r}, zone={self.zone.key!r}, "
            f"start_ms={self.start_ms}, end_ms={self.end_ms})"
        )

    def next_fire_after(self, after_ms: int) -> int | None:
        if self.start_ms is not None and after_ms < self.start_ms - 1:
            after_ms = self.start_ms - 1
        nxt = self._next_after(after_ms)
        if nxt is None or (self.end_ms is not None and nxt > self.end_ms):
            return None
        return nxt

    def _next_after(self, after_ms: int) -> int | None:
        if after_ms >= _HIGHEST_MS:
            return None
        after_ms = max(after_ms, _LOWEST_MS)
        first = datetime.fromtimestamp((after_ms // MINUTE_MS + 1) * 60, self.zone)
        y, mo, d, h, mi = first.year, first.month, first.day, first.hour, first.minute
        zone = self.zone
        while True:
            wall = self._next_wall(y, mo, d, h, mi)
            if wall is None:
                return None
            y, mo, d, h, mi = wall
            local = datetime(y, mo, d, h, mi, tzinfo=zone)
            off0 = offset_seconds(local.utcoffset())
            off1 = offset_seconds(local.replace(fold=1).utcoffset())
            # off0 < off1 only inside a spring-forward gap: that wall time never happens.
            if off0 >= off1:
                ms = wall_to_ms(y, mo, d, h, mi, 0, off0)
                if ms > after_ms:
                    return ms
            # Skipped, or the first occurrence of a repeated time already lies behind us.
            mi += 1

    def _days_of(self, year: int, month: int) -> tuple[int, ...]:
        key = (year, month)
        days = self._days.get(key)
        if days is None:
            days = self._days[key] = matching_days(self.spec.day, year, month)
        return days

    def _next_wall(self, y: int, mo: int, d: int, h: int, mi: int) -> _Wall | None:
        """The first matching wall time at or after (y, mo, d, h, mi), which may overflow
        its fields by one (minute 60, hour 24, day past the month's end, month 13)."""
        spec = self.spec
        years, months, hours, minutes = spec.years, spec.months, spec.hours, spec.minutes
        while True:
            if mi > 59:
                h, mi = h + 1, 0
            if h > 23:
                d, h, mi = d + 1, 0, 0
            if mo > 12:
                y, mo, d, h, mi = y + 1, 1, 1, 0, 0
            i = bisect_left(years, y)
            if i == len(years):
                return None
            if years[i] != y:
                y, mo, d, h, mi = years[i], 1, 1, 0, 0
            i = bisect_left(months, mo)
            if i == len(months):
                y, mo, d, h, mi = y + 1, 1, 1, 0, 0
                continue
            if months[i] != mo:
                mo, d, h, mi = months[i], 1, 0, 0
            days = self._days_of(y, mo)
            i = bisect_left(days, d)
            if i == len(days):
                mo, d, h, mi = mo + 1, 1, 0, 0
                continue
            if days[i] != d:
                d, h, mi = days[i], 0, 0
            i = bisect_left(hours, h)
            if i == len(hours):
                d, h, mi = d + 1, 0, 0
                continue
            if hours[i] != h:
                h, mi = hours[i], 0
            i = bisect_left(minutes, mi)
            if i == len(minutes):
                h, mi = h + 1, 0
                continue
            return (y, mo, d, h, minutes[i])
