"""Time inside tidings is integer UTC epoch milliseconds; `datetime` lives only at the edges.

The clock is injected everywhere a decision depends on "now", so tests can freeze or step
time instead of sleeping.
"""

from __future__ import annotations

import os
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


class SteppedClock:
    """The wall clock plus an offset read from a file: a test steps this node's wall clock
    (`TIDINGS_CLOCK_OFFSET_FILE`), as an operator or NTP stepping the system clock would,
    while monotonic time, which every sleep and timeout uses, runs on untouched.

    The file holds integer milliseconds (may be negative); it is re-read when its
    modification time changes, looked at no more than every 20 ms."""

    CHECK_S = 0.02

    def __init__(self, path: str) -> None:
        self.path = path
        self._offset = 0
        self._mtime = -1
        self._checked = -1.0
        self._read()

    def _read(self) -> None:
        self._checked = time.monotonic()
        try:
            mtime = os.stat(self.path).st_mtime_ns
            if mtime != self._mtime:
                with open(self.path, encoding="ascii") as f:
                    text = f.read().strip()
                self._offset, self._mtime = int(text or "0"), mtime
        except (OSError, ValueError):
            pass  # mid-write or gone: keep the last offset

    def now_ms(self) -> int:
        if time.monotonic() - self._checked >= self.CHECK_S:
            self._read()
        return time.time_ns() // 1_000_000 + self._offset


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
