"""One-time schedules: `at(yyyy-mm-ddThh:mm:ss)`, and `at(yyyy-mm-ddThh:mm:ss.fff)` on
tidings' own faces (Python, native HTTP, CLI), where a job may be due at 12:00:03.250.
The AWS Scheduler API keeps AWS's whole seconds (it refuses a fraction before parsing).

Rules followed:
- The date-time is a wall-clock time in the schedule's time zone (AWS evaluates a one-time
  schedule "at the time and in the time zone that you specify").
- AWS ignores StartDate and EndDate for one-time schedules, so this trigger ignores them too.
- A wall time that does not exist (inside a spring-forward gap) is shifted forward by the
  length of the gap: 02:30 in New York on a spring-forward day fires at 03:30 EDT. A
  one-time schedule that silently never fired would be worse than a late one. This is the
  PEP 495 reading of `fold=0` for a time in a gap.
- A wall time that occurs twice (fall-back overlap) means its first (earlier) occurrence.
"""

from __future__ import annotations

import re
from datetime import datetime, tzinfo
from zoneinfo import ZoneInfo

from tidings.triggers.base import invalid, offset_seconds, wall_to_ms

_AT = re.compile(r"at\(([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})"
                 r"(?:\.([0-9]{1,3}))?\)")
#: The zone of the Python API's one-shots: `parse_expression` passes this very object, so
#: `is` finds it without a lookup (the IANA name list is built on first use, ~40 ms).
UTC = ZoneInfo("UTC")


class AtTrigger:
    """Fires once, at `instant_ms`."""

    __slots__ = ("instant_ms",)

    kind: str = "at"
    recurring: bool = False

    def __init__(self, instant_ms: int) -> None:
        self.instant_ms = instant_ms

    def next_fire_after(self, after_ms: int) -> int | None:
        return self.instant_ms if self.instant_ms > after_ms else None

    def __repr__(self) -> str:
        return f"AtTrigger(instant_ms={self.instant_ms})"


def parse_at(expression: str, zone: tzinfo) -> AtTrigger:
    m = _AT.fullmatch(expression)
    if m is None:
        raise invalid(expression, "a one-time schedule must be at(yyyy-mm-ddThh:mm:ss), "
                      "with at most milliseconds after the seconds")
    e = expression  # fixed positions once the pattern matched: slices beat m.groups()
    year, month, day = int(e[3:7]), int(e[8:10]), int(e[11:13])
    hour, minute, second = int(e[14:16]), int(e[17:19]), int(e[20:22])
    millis = int(e[23:-1].ljust(3, "0")) if len(e) > 23 else 0
    if zone is UTC and hour < 24 and minute < 60 and second < 60:
        # No offset to look up (the Python API's one-shots, created one call at a time);
        # wall_to_ms still refuses a day the calendar lacks.
        try:
            return AtTrigger(wall_to_ms(year, month, day, hour, minute, second, 0) + millis)
        except ValueError:
            raise invalid(expression, "the date and time do not exist in the calendar")\
                from None
    try:
        local = datetime(year, month, day, hour, minute, second, tzinfo=zone)
    except ValueError:
        raise invalid(expression, "the date and time do not exist in the calendar") from None
    # fold=0 gives the earlier instant in an overlap and the gap-shifted one in a gap.
    off = offset_seconds(local.utcoffset())
    return AtTrigger(wall_to_ms(year, month, day, hour, minute, second, off) + millis)
