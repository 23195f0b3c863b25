"""EventBridge Scheduler schedule expressions as pure functions of time.

`parse_expression` validates an `at(...)`, `rate(...)` or `cron(...)` expression the way
AWS does and returns a `Trigger`; `trigger.next_fire_after(ms)` names the next firing
instant. All instants are integer UTC epoch milliseconds. The rules each kind follows are
in `at.py`, `rate.py`, `parse.py` (cron syntax) and `cron.py` (cron evaluation and DST).
"""

from __future__ import annotations

from functools import lru_cache

from tidings.errors import ValidationError
from tidings.triggers.at import UTC, AtTrigger, parse_at
from tidings.triggers.base import (
    EXPRESSION_FIELD,
    MAX_EXPRESSION_LENGTH,
    Trigger,
    invalid,
    next_fires,
    resolve_zone,
)
from tidings.triggers.cron import CronTrigger
from tidings.triggers.parse import parse_cron
from tidings.triggers.rate import RateTrigger, parse_rate, rate_period_ms

__all__ = [
    "AtTrigger",
    "CronTrigger",
    "RateTrigger",
    "Trigger",
    "next_fires",
    "has_fraction_of_second",
    "one_time",
    "parse_expression",
    "schedule_trigger",
    "validate_expression",
]


def _check_length(expression: str) -> None:
    if not expression or len(expression) > MAX_EXPRESSION_LENGTH:
        raise ValidationError(
            EXPRESSION_FIELD,
            f"Invalid Schedule Expression: must be 1 to {MAX_EXPRESSION_LENGTH} characters",
        )


def parse_expression(
    expression: str,
    timezone: str = "UTC",
    start_ms: int | None = None,
    end_ms: int | None = None,
    anchor_ms: int | None = None,
) -> Trigger:
    """The trigger for a schedule.

    `start_ms` / `end_ms` are the schedule's StartDate / EndDate (inclusive; ignored by
    `at()`, as AWS does). `anchor_ms` is the schedule's creation time: a `rate()` schedule
    without a StartDate fires first at its anchor, then every period after it; it is
    required for `rate()` when `start_ms` is None and unused otherwise.

    Raises ValidationError("ScheduleExpression", ...) for a bad expression and
    ValidationError("ScheduleExpressionTimezone", ...) for an unknown zone.
    """
    _check_length(expression)
    zone = UTC if timezone == "UTC" else resolve_zone(timezone)
    if expression.startswith("at("):
        return parse_at(expression, zone)
    if expression.startswith("rate("):
        return parse_rate(expression, start_ms, end_ms, anchor_ms)
    if expression.startswith("cron("):
        return CronTrigger(parse_cron(expression), zone, start_ms, end_ms)
    raise invalid(expression, "must be at(...), rate(...) or cron(...)")


def validate_expression(expression: str, timezone: str = "UTC") -> str:
    """Check an expression and zone without building a trigger; returns the kind."""
    _check_length(expression)
    zone = resolve_zone(timezone)
    if expression.startswith("at("):
        return parse_at(expression, zone).kind
    if expression.startswith("rate("):
        rate_period_ms(expression)
        return "rate"
    if expression.startswith("cron("):
        parse_cron(expression)
        return "cron"
    raise invalid(expression, "must be at(...), rate(...) or cron(...)")


def one_time(expression: str) -> bool:
    """An `at()`: it fires once, at the instant a schedule keeps as its next occurrence, so
    firing it needs no parse (the dispatcher asks this once per firing)."""
    return expression.startswith("at(")


def has_fraction_of_second(expression: str) -> bool:
    """An `at()` naming milliseconds: tidings' own faces take them, the AWS Scheduler API
    keeps AWS's whole seconds and refuses them."""
    return expression.startswith("at(") and "." in expression


@lru_cache(maxsize=4096)
def _shared_trigger(expression: str, timezone: str, start_ms: int | None,
                    end_ms: int | None, anchor_ms: int | None) -> Trigger:
    """Parsed triggers are cached: many schedules share an expression (fan-outs, crons)."""
    return parse_expression(expression, timezone, start_ms, end_ms, anchor_ms)


def schedule_trigger(expression: str, timezone: str, start_ms: int | None,
                     end_ms: int | None, created_at: int) -> Trigger:
    """The trigger of a stored schedule, parsed once per distinct expression and bounds.

    `created_at` anchors a `rate()` without a StartDate; the other kinds ignore it, so it
    is left out of their cache key (shared across schedules created at other times)."""
    if one_time(expression):
        # Each one-shot has its own instant: caching it would only push out the shared
        # crons and rates (and parsing an at() in UTC costs less than the cache lookup).
        return parse_expression(expression, timezone)
    anchor = created_at if start_ms is None and expression.startswith("rate(") else None
    return _shared_trigger(expression, timezone, start_ms, end_ms, anchor)
