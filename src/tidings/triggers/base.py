"""What every schedule trigger shares: the `Trigger` protocol, zone lookup, error text.

A trigger is a pure function of its expression, zone and bounds: given an instant it names
the next firing instant, so the dispatcher can store one integer per schedule and never
replay history. All instants are integer UTC epoch milliseconds.
"""

from __future__ import annotations

from datetime import date, timedelta
from functools import cache
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from tidings.errors import ValidationError

EXPRESSION_FIELD = "ScheduleExpression"
TIMEZONE_FIELD = "ScheduleExpressionTimezone"

# AWS CreateSchedule length limits: ScheduleExpression 1-256, ScheduleExpressionTimezone 1-50.
MAX_EXPRESSION_LENGTH = 256
MAX_TIMEZONE_LENGTH = 50

MINUTE_MS = 60_000
EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


class Trigger(Protocol):
    """When a schedule fires.

    `next_fire_after(after_ms)` is the first occurrence strictly later than `after_ms`
    that lies within the schedule's bounds, or None when there is none.
    """

    kind: str
    recurring: bool

    def next_fire_after(self, after_ms: int) -> int | None: ...


def next_fires(trigger: Trigger, after_ms: int, n: int) -> list[int]:
    """The next `n` occurrences after `after_ms` (fewer when the schedule runs out)."""
    out: list[int] = []
    cursor = after_ms
    while len(out) < n:
        nxt = trigger.next_fire_after(cursor)
        if nxt is None:
            break
        out.append(nxt)
        cursor = nxt
    return out


def invalid(expression: str, problem: str) -> ValidationError:
    """AWS answers "Invalid Schedule Expression <expr>"; we add which rule was broken."""
    return ValidationError(EXPRESSION_FIELD, f"Invalid Schedule Expression {expression}: {problem}")


def resolve_zone(name: str) -> ZoneInfo:
    """An IANA zone by its exact name; AWS accepts only IANA names for the timezone."""
    if not name or len(name) > MAX_TIMEZONE_LENGTH:
        raise ValidationError(
            TIMEZONE_FIELD,
            f"Invalid time zone {name!r}: must be an IANA time zone name "
            f"of 1 to {MAX_TIMEZONE_LENGTH} characters",
        )
    if name not in _iana_names():
        raise ValidationError(
            TIMEZONE_FIELD, f"Invalid time zone {name!r}: not a known IANA time zone name"
        )
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # pragma: no cover - listed above
        raise ValidationError(
            TIMEZONE_FIELD, f"Invalid time zone {name!r}: the zone data cannot be read"
        ) from None


@cache
def _iana_names() -> frozenset[str]:
    """The zone names we accept: the tz database's, without the host's "localtime" link
    and tzdata's "Factory" placeholder, which are not zones a schedule can be in.
    Checking the list (built once, ~40 ms) also keeps file paths and case variants out."""
    return frozenset(available_timezones() - {"localtime", "Factory", "posixrules"})


def offset_seconds(delta: timedelta | None) -> int:
    """A UTC offset as whole seconds (zoneinfo offsets never carry microseconds)."""
    if delta is None:  # pragma: no cover - ZoneInfo always answers
        return 0
    return delta.days * 86_400 + delta.seconds


def wall_to_ms(
    year: int, month: int, day: int, hour: int, minute: int, second: int, offset_s: int
) -> int:
    """Epoch ms of a wall-clock time read with a known UTC offset (exact integer math)."""
    days = date(year, month, day).toordinal() - EPOCH_ORDINAL
    return (days * 86_400 + hour * 3_600 + minute * 60 + second - offset_s) * 1_000
