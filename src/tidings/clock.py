"""Time inside tidings is integer UTC epoch milliseconds; `datetime` lives only at the edges.

The clock is injected everywhere a decision depends on "now", so tests can freeze or step
time instead of sleeping.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

from tidings.errors import ValidationError


class Clock(Protocol):
    def now_ms(self) -> int: ...


class SystemClock:
    """Wall-clock time; the default."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class FrozenClock:
    """A clock that moves only when told to, for deterministic tests."""

    def __init__(self, start_ms: int = 1_800_000_000_000) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> None:
        self._now += ms

    def set(self, ms: int) -> None:
        self._now = ms


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_ms(value: datetime, field: str = "datetime") -> int:
    """Convert an aware datetime to epoch ms; naive datetimes are ambiguous, so rejected."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(field, "must be timezone-aware (naive datetimes are ambiguous)")
    # Exact integer arithmetic: timestamp() is a float and can land a millisecond short.
    delta = value - _EPOCH
    return delta.days * 86_400_000 + delta.seconds * 1000 + delta.microseconds // 1000


def from_ms(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)


def iso(ms: int) -> str:
    """ISO 8601 UTC with milliseconds, the form the native API prints."""
    return from_ms(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")
