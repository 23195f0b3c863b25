"""Downstream limits: what a limit says (`Limit`, as code declares it; `LimitSetting`, as
the database holds it), how a rate is written (`"200/s"`), and `RetryAfter`, what a
handler raises when the downstream pushed back.

A limit has a name and a rate and/or a concurrency. A rate of N per period means at most
N starts in any window of that period (a sliding window, as Sidekiq's window limiter and
Oban Pro's rate limits mean it); `burst=B` makes it a bucket of B refilled at N per
period instead. A concurrency of N means at most N jobs holding the key at once. A
limit's *key* is its name, or, when the limit is keyed per job (`key="customer_id"`),
`name:value` (`export:c-42`): one declaration gives every tenant a limit of its own, and
a setting stored for `export:c-42` itself overrides the one for `export`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tidings.errors import ValidationError

PERIODS_MS = {"ms": 1, "s": 1000, "sec": 1000, "second": 1000, "m": 60_000, "min": 60_000,
              "minute": 60_000, "h": 3_600_000, "hour": 3_600_000, "d": 86_400_000,
              "day": 86_400_000}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([a-z]+)\s*$")
#: A key names a limit, or a limit and the value it is keyed by.
MAX_KEY = 200
_NAME = re.compile(r"^[A-Za-z0-9_.\-@]+$")


@dataclass(frozen=True, slots=True)
class Rate:
    """At most `count` starts in any window of `period_ms`."""

    count: int
    period_ms: int

    def __str__(self) -> str:
        for unit, ms in (("h", 3_600_000), ("min", 60_000), ("s", 1000)):
            if self.period_ms == ms:
                return f"{self.count}/{unit}"
            if self.period_ms % ms == 0:
                return f"{self.count}/{self.period_ms // ms}{unit}"
        return f"{self.count}/{self.period_ms}ms"

    @classmethod
    def parse(cls, text: str, field: str = "rate") -> Rate:
        """`"200/s"`, `"1000/min"`, `"20/h"`, `"5/10s"`."""
        match = _RATE.match(text.lower()) if isinstance(text, str) else None
        if not match or match.group(3) not in PERIODS_MS:
            raise ValidationError(field, f"{text!r} is not a rate: write N/unit, e.g. "
                                  "'200/s', '1000/min', '20/h' or '5/10s'")
        count, times = int(match.group(1)), int(match.group(2) or 1)
        period = times * PERIODS_MS[match.group(3)]
        if count < 1 or times < 1:
            raise ValidationError(field, f"{text!r}: the count and the period must be at "
                                  "least 1")
        if period > 7 * 86_400_000:
            raise ValidationError(field, f"{text!r}: the period is at most 7 days")
        return cls(count, period)


def check_name(name: str, field: str = "name") -> str:
    if not isinstance(name, str) or not _NAME.match(name) or len(name) > MAX_KEY:
        raise ValidationError(field, f"{name!r}: a limit's name is 1 to {MAX_KEY} letters, "
                              "digits and . _ - @")
    return name


def check_key(key: str, field: str = "key") -> str:
    """A key: a name, or `name:value` (any value without control characters)."""
    name, _, value = key.partition(":") if isinstance(key, str) else ("", "", "")
    check_name(name, field)
    if len(key) > MAX_KEY or any(ord(c) < 32 for c in value):
        raise ValidationError(field, f"{key!r}: a key is at most {MAX_KEY} characters, "
                              "without control characters")
    return key


def check_counts(concurrency: int | None, burst: int | None) -> None:
    for field, value in (("concurrency", concurrency), ("burst", burst)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                  or not 1 <= value <= 1_000_000):
            raise ValidationError(field, f"{value!r}: must be a whole number from 1 to "
                                  "1000000")


@dataclass(frozen=True)
class Limit:
    """A limit as code declares it: `@app.task(limit=tidings.Limit(rate="200/s",
    concurrency=10, key="customer_id"))`.

    `name`: what the CLI, the API and the console call it (default: the task's name, or
    the handler's job type). `key`: None for one limit shared by every job; the name of
    a task argument (or, for a handler, of a field of the job body), or a callable of the
    task's arguments (of the body), for a limit of its own per value. A limit with
    neither rate nor concurrency declares nothing: it applies once a setting is stored
    for its name (`tidings limit set`)."""

    rate: str | None = None
    concurrency: int | None = None
    key: str | Callable[..., Any] | None = None
    name: str | None = None
    burst: int | None = None

    def __post_init__(self) -> None:
        if self.rate is not None:
            Rate.parse(self.rate)
        check_counts(self.concurrency, self.burst)
        if self.burst is not None and self.rate is None:
            raise ValidationError("burst", "a burst needs a rate")
        if self.name is not None:
            check_name(self.name)
        if self.key is not None and not (callable(self.key) or (
                isinstance(self.key, str) and self.key)):
            raise ValidationError("key", "an argument's name or a callable")

    def setting(self, name: str, now: int) -> LimitSetting:
        rate = Rate.parse(self.rate) if self.rate is not None else None
        return LimitSetting(name, rate, self.burst, self.concurrency, "code", now)


@dataclass(frozen=True, slots=True)
class LimitSetting:
    """A limit as the database holds it, for a name or a key. `source`: "code" (an app's
    declaration at its start) or "set" (the CLI, the API, the console)."""

    key: str
    rate: Rate | None
    burst: int | None
    concurrency: int | None
    source: str
    updated_at: int

    @property
    def limits_anything(self) -> bool:
        return self.rate is not None or self.concurrency is not None

    def as_json(self) -> dict[str, Any]:
        return {"key": self.key, "rate": str(self.rate) if self.rate else None,
                "burst": self.burst, "concurrency": self.concurrency,
                "source": self.source, "updated_at": self.updated_at}


@dataclass(frozen=True, slots=True)
class LimitUsage:
    """What a key is doing now: slots held, starts in its rate's window, paused until."""

    key: str
    in_use: int
    recent_starts: int
    paused_until: int | None


class RetryAfter(Exception):  # noqa: N818 - named for what it asks, like HTTP's header
    """Raised by a handler when the downstream pushed back: the job goes back to its queue
    for `seconds` without counting as an attempt, and its limit keys (or `key`) are
    paused until then on every node, so the jobs of other keys go on."""

    def __init__(self, seconds: float, *, key: str | None = None, pause: bool = True) -> None:
        if not isinstance(seconds, (int, float)) or seconds < 0 or seconds > 43_200:
            raise ValidationError("seconds", f"{seconds!r}: from 0 to 43200 (12 h)")
        super().__init__(f"retry after {seconds:g} s")
        self.seconds = float(seconds)
        self.key = key
        #: False: only this job waits (its own schedule paced it, e.g. an email
        #: warm-up's daily cap); no key is paused.
        self.pause = pause


def retry_after_header(value: str | None) -> float | None:
    """HTTP's Retry-After as seconds: a delay in seconds (a date is not supported: None,
    and the caller falls back to its backoff)."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return min(max(seconds, 0.0), 43_200.0)
