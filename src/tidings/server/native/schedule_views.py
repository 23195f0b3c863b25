"""The native JSON shapes of schedules and schedule groups, and the edge conversions into
the engine's types (ISO 8601 instants, JSON inputs, targets).

Shared by the HTTP API and the CLI, so both accept and print the same thing. Kept free of
FastAPI and pydantic imports: the CLI loads this module on every run.
"""

from __future__ import annotations

import json
from datetime import datetime, tzinfo
from typing import Any

from tidings.clock import from_ms, iso, to_ms
from tidings.errors import ValidationError
from tidings.model.schedules import (
    ActionAfterCompletion,
    RetryPolicy,
    Schedule,
    ScheduleGroup,
    ScheduleSpec,
    ScheduleState,
    Target,
    TargetKind,
)
from tidings.targets.registry import native_kinds
from tidings.triggers import next_fires, parse_expression
from tidings.triggers.base import resolve_zone

#: Occurrences `next` may list at once: enough to eyeball a cron, small enough to answer fast.
MAX_OCCURRENCES = 100

#: Target kinds the native API and CLI accept (email targets come with the email service).
_KINDS = frozenset(native_kinds())


def parse_instant(value: str | None, field: str) -> int | None:
    """An ISO 8601 instant to epoch ms. The offset is required: a naive time would be read
    in whatever zone the server happens to run in."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise ValidationError(field, f"must be an ISO 8601 date-time, got {value!r}") from None
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise ValidationError(field, "must carry a UTC offset, e.g. 2030-01-01T09:00:00+01:00 "
                              "or ...Z (naive date-times are ambiguous)")
    return to_ms(parsed, field)


def input_text(value: Any) -> str | None:
    """A target input: a string is sent as is; any other JSON value as its JSON text."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def make_target(kind: str, destination: str, *, input: Any = None,
                message_group_id: str | None = None, max_retries: int | None = None,
                max_event_age_s: int | None = None, dead_letter_queue: str | None = None,
                options: dict[str, Any] | None = None) -> Target:
    """A Target from native fields; omitted retry settings take AWS's defaults (185
    attempts, 86400 s), since an update is a full replace."""
    if kind not in _KINDS:
        raise ValidationError("target.kind", "must be queue, webhook or function")
    clean = {k: v for k, v in (options or {}).items() if v is not None}
    return Target(TargetKind(kind), destination, input=input_text(input),
                  message_group_id=message_group_id,
                  retry_policy=RetryPolicy.given(max_retries, max_event_age_s),
                  dead_letter_queue=dead_letter_queue, options=clean)


def make_spec(name: str, group: str, expression: str, target: Target, *,
              timezone: str = "UTC", start: str | None = None, end: str | None = None,
              state: str = "ENABLED", flexible_window_minutes: int | None = None,
              action_after_completion: str = "NONE", description: str | None = None,
              client_token: str | None = None, start_field: str = "start",
              end_field: str = "end") -> ScheduleSpec:
    if state not in ("ENABLED", "DISABLED"):
        raise ValidationError("state", "must be ENABLED or DISABLED")
    if action_after_completion not in ("NONE", "DELETE"):
        raise ValidationError("action_after_completion", "must be NONE or DELETE")
    return ScheduleSpec(
        name=name, group=group, expression=expression, target=target, timezone=timezone,
        start_ms=parse_instant(start, start_field), end_ms=parse_instant(end, end_field),
        state=ScheduleState(state), flexible_window_minutes=flexible_window_minutes,
        action_after_completion=ActionAfterCompletion(action_after_completion),
        description=description, client_token=client_token)


def spec_json(spec: ScheduleSpec) -> dict[str, Any]:
    """A schedule's settings as the native API takes them (POST /v1/schedules; without
    name, group and client_token, the body of a replace): the inverse of `make_spec`, for
    a client that checked its input before sending it (the CLI on a remote node)."""
    target = spec.target
    doc: dict[str, Any] = {
        "expression": spec.expression, "timezone": spec.timezone,
        "start": _iso_or_none(spec.start_ms), "end": _iso_or_none(spec.end_ms),
        "state": spec.state.value, "flexible_window_minutes": spec.flexible_window_minutes,
        "action_after_completion": spec.action_after_completion.value,
        "description": spec.description,
        "target": {"kind": target.kind.value, "destination": target.destination,
                   "input": target.input,
                   # a queue target's field: the document has it on no other kind
                   **({"message_group_id": target.message_group_id}
                      if target.message_group_id is not None else {}),
                   "retry_policy": {
                       "maximum_retry_attempts": target.retry_policy.maximum_retry_attempts,
                       "maximum_event_age_s": target.retry_policy.maximum_event_age_s},
                   "dead_letter_queue": target.dead_letter_queue,
                   **({"options": dict(target.options)} if target.options else {})},
    }
    return doc


def _iso_or_none(ms: int | None) -> str | None:
    return None if ms is None else iso(ms)


def target_json(target: Target) -> dict[str, Any]:
    options = dict(target.options)
    # A webhook's signing secret is a credential: listings end up in logs and dashboards,
    # so only its presence is shown. Update is a full replace: give the secret again.
    secret = options.pop("secret", None)
    if secret is not None:
        options["secret_set"] = True
    return {
        "kind": target.kind.value,
        "destination": target.destination,
        "input": target.input,
        "message_group_id": target.message_group_id,
        "retry_policy": {
            "maximum_retry_attempts": target.retry_policy.maximum_retry_attempts,
            "maximum_event_age_s": target.retry_policy.maximum_event_age_s,
        },
        "dead_letter_queue": target.dead_letter_queue,
        "options": options,
    }


def schedule_json(schedule: Schedule, arn: str) -> dict[str, Any]:
    spec = schedule.spec
    return {
        "name": spec.name,
        "group": spec.group,
        "arn": arn,
        "state": spec.state.value,
        "expression": spec.expression,
        "timezone": spec.timezone,
        "start": _iso_or_none(spec.start_ms),
        "end": _iso_or_none(spec.end_ms),
        "flexible_window_minutes": spec.flexible_window_minutes,
        "action_after_completion": spec.action_after_completion.value,
        "description": spec.description,
        "target": target_json(spec.target),
        "next_fire_at": _iso_or_none(schedule.next_fire_at),
        "due_at": _iso_or_none(schedule.due_at),
        "last_fired_at": _iso_or_none(schedule.last_fired_at),
        "created_at": iso(schedule.created_at),
        "modified_at": iso(schedule.modified_at),
    }


def group_json(group: ScheduleGroup, arn: str) -> dict[str, Any]:
    return {
        "name": group.name,
        "arn": arn,
        "tags": dict(group.tags),
        "created_at": iso(group.created_at),
        "modified_at": iso(group.modified_at),
    }


def _local(ms: int, zone: tzinfo) -> str:
    spec = "seconds" if ms % 1000 == 0 else "milliseconds"
    return from_ms(ms).astimezone(zone).isoformat(timespec=spec)


def occurrences_json(expression: str, timezone: str, after_ms: int, n: int) -> dict[str, Any]:
    """The next `n` occurrences strictly after `after_ms`, in UTC and in the schedule's zone.

    A `rate()` preview is anchored at `after_ms`, as if the schedule were created then."""
    if not 1 <= n <= MAX_OCCURRENCES:
        raise ValidationError("n", f"must be between 1 and {MAX_OCCURRENCES}")
    trigger = parse_expression(expression, timezone, None, None, after_ms)
    zone = resolve_zone(timezone)
    return {
        "expression": expression,
        "timezone": timezone,
        "after": iso(after_ms),
        "occurrences": [
            {"utc": iso(ms), "local": _local(ms, zone)}
            for ms in next_fires(trigger, after_ms, n)
        ],
    }
