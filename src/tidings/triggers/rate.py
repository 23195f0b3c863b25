"""Rate-based schedules: `rate(value unit)`.

Rules followed (AWS EventBridge rate expression reference and Scheduler user guide):
- value is a positive integer; unit is minute|minutes|hour|hours|day|days.
- If value is 1 the unit must be singular, otherwise plural: `rate(1 hours)` and
  `rate(5 hour)` are invalid, `rate(1 hour)` and `rate(5 hours)` are valid.
- A rate measures elapsed time, not wall time: a day is 24 hours even when daylight saving
  time makes the local day 23 or 25 hours long, so the time zone plays no part.
- The first occurrence is the StartDate when one is given; without a StartDate the schedule
  "starts invoking its target immediately", i.e. at its creation time, which the caller
  passes as `anchor_ms`. Occurrences are `first + k * period` for k = 0, 1, 2, ...
- StartDate and EndDate are inclusive ("invocations might occur on, or after, the
  StartDate" / "might stop on, or before, the EndDate").
"""

from __future__ import annotations

import re

from tidings.triggers.base import MINUTE_MS, invalid

_RATE = re.compile(r"rate\(([0-9]+) +([A-Za-z]+)\)")
_UNIT_MS = {"minute": MINUTE_MS, "hour": 60 * MINUTE_MS, "day": 1_440 * MINUTE_MS}


class RateTrigger:
    """Fires every `period_ms`, starting at `first_ms`, until `end_ms` (inclusive)."""

    __slots__ = ("first_ms", "period_ms", "end_ms")

    kind: str = "rate"
    recurring: bool = True

    def __init__(self, first_ms: int, period_ms: int, end_ms: int | None = None) -> None:
        self.first_ms = first_ms
        self.period_ms = period_ms
        self.end_ms = end_ms

    def next_fire_after(self, after_ms: int) -> int | None:
        if after_ms < self.first_ms:
            nxt = self.first_ms
        else:
            periods = (after_ms - self.first_ms) // self.period_ms + 1
            nxt = self.first_ms + periods * self.period_ms
        if self.end_ms is not None and nxt > self.end_ms:
            return None
        return nxt

    def __repr__(self) -> str:
        return (
            f"RateTrigger(first_ms={self.first_ms}, period_ms={self.period_ms}, "
            f"end_ms={self.end_ms})"
        )


def rate_period_ms(expression: str) -> int:
    """The period of a rate expression, validated the way AWS validates it."""
    m = _RATE.fullmatch(expression)
    if m is None:
        raise invalid(expression, "a rate expression must be rate(value unit)")
    value = int(m.group(1))
    unit = m.group(2)
    if value < 1:
        raise invalid(expression, "the rate value must be a positive integer")
    singular = unit[:-1] if unit.endswith("s") else unit
    if singular not in _UNIT_MS:
        raise invalid(expression, "the rate unit must be minute(s), hour(s) or day(s)")
    if value == 1 and unit != singular:
        raise invalid(expression, f"a rate of 1 takes the singular unit {singular!r}")
    if value > 1 and unit == singular:
        raise invalid(expression, f"a rate above 1 takes the plural unit {singular + 's'!r}")
    return value * _UNIT_MS[singular]


def parse_rate(
    expression: str, start_ms: int | None, end_ms: int | None, anchor_ms: int | None
) -> RateTrigger:
    period = rate_period_ms(expression)
    first = start_ms if start_ms is not None else anchor_ms
    if first is None:
        raise ValueError("a rate() trigger needs start_ms or anchor_ms (the creation time)")
    return RateTrigger(first, period, end_ms)
