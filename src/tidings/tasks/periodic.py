"""Periodic jobs: `@app.cron(...)` and `@app.rate(...)` become schedules when the app
starts, so every node running the app shares them and each occurrence fires once (the
dispatcher's claim on a schedule's occurrence, not a lock of our own).

At start each is created or replaced by name (`ScheduleService.put`, which leaves a
schedule already stored as declared untouched, so N nodes starting together agree); a
periodic schedule whose decorator was removed is deleted, as far as it targets a queue
this app consumes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tidings.errors import ScheduleNotFound, ValidationError
from tidings.model.schedules import NAME_RE, Schedule, ScheduleSpec, Target, TargetKind
from tidings.tasks.sending import ensure_group
from tidings.triggers import parse_expression

if TYPE_CHECKING:
    from tidings.client import Tidings
    from tidings.tasks.app import App

#: The schedule group holding every app's periodic jobs (named after their task).
PERIODIC_GROUP = "tidings-periodic"
_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")


@dataclass(frozen=True)
class Periodic:
    task: str
    queue: str
    expression: str  # EventBridge form: cron(…) or rate(…)
    timezone: str

    def spec(self) -> ScheduleSpec:
        body = json.dumps({"type": self.task, "id": self.task, "args": {}},
                          separators=(",", ":"))
        return ScheduleSpec(self.task, self.expression,
                            Target(TargetKind.QUEUE, self.queue, input=body),
                            group=PERIODIC_GROUP, timezone=self.timezone,
                            description=f"periodic job of task {self.task}")


def periodic(task: str, queue: str, expression: str, timezone: str) -> Periodic:
    """Validated now (at import), so a typo fails the app's start, not a night's run."""
    if not NAME_RE.match(task):
        raise ValidationError("name", f"a periodic task's name ({task!r}) names its schedule:"
                              " 1-64 characters of letters, digits, '-', '_' and '.'")
    parse_expression(expression, timezone, None, None, 0)
    return Periodic(task, queue, expression, timezone)


def cron_expression(text: str) -> str:
    """EventBridge's `cron(m h dom mon dow year)` as it is (with or without `cron(…)`),
    or a standard 5-field crontab line (`m h dom mon dow`, Sunday 0 or 7) turned into it."""
    text = text.strip()
    if text.startswith("cron(") and text.endswith(")"):
        return text
    fields = text.split()
    if len(fields) == 6:
        return f"cron({text})"
    if len(fields) != 5:
        raise ValidationError("cron", "must be EventBridge's 6 fields (m h dom mon dow year) "
                              "or a standard 5-field crontab line (m h dom mon dow)")
    minute, hour, dom, month, dow = fields
    if dom == "*" and dow in ("*", "?"):
        dom, dow = "*", "?"
    elif dow in ("*", "?"):
        dow = "?"
    elif dom in ("*", "?"):
        dom, dow = "?", _aws_days(dow)
    else:
        raise ValidationError("cron", "a standard cron line with both a day of month and a "
                              "day of week (run on either) has no EventBridge equivalent: "
                              "use two periodic jobs")
    return f"cron({minute} {hour} {dom} {month} {dow} *)"


def _aws_days(field: str) -> str:
    """Standard day-of-week (0-7, Sunday 0 and 7, steps allowed) as AWS's (1-7, Sunday 1,
    no steps): numeric parts become an explicit list; names pass through."""
    if re.search(r"[A-Za-z#L]", field):
        return field.upper()
    days: set[int] = set()
    for part in field.split(","):
        m = re.fullmatch(r"(\*|\d+)(?:-(\d+))?(?:/(\d+))?", part)
        if m is None:
            raise ValidationError("cron", f"day-of-week part {part!r} is not valid")
        lo, hi = (0, 6) if m[1] == "*" else (int(m[1]), int(m[2] or m[1]))
        step = int(m[3] or 1)
        if not (0 <= lo <= 7 and 0 <= hi <= 7 and lo <= hi and step >= 1):
            raise ValidationError("cron", f"day-of-week part {part!r} is out of 0-7")
        days.update(d % 7 for d in range(lo, hi + 1, step))
    return ",".join(str(d + 1) for d in sorted(days))


def rate_expression(text: str) -> str:
    text = text.strip()
    if text.startswith("rate(") and text.endswith(")"):
        return text
    return f"rate({text})"


def sync_periodic(t: Tidings, app: App) -> None:
    """Make the stored periodic schedules what the app declares (at every start)."""
    if not app.periodic and not app.queues():
        return
    ensure_group(t, PERIODIC_GROUP)
    for p in app.periodic.values():
        t.schedules.put(p.spec())
    mine = set(app.queues())
    for s in _all(t):
        target = s.spec.target
        if (target.kind is TargetKind.QUEUE and target.destination in mine
                and s.name not in app.periodic):
            try:
                t.schedules.delete(s.name, group=PERIODIC_GROUP)
            except ScheduleNotFound:
                pass  # another node removed it first


def _all(t: Tidings) -> list[Schedule]:
    out: list[Schedule] = []
    token = None
    while True:
        page, token = t.schedules.list(group=PERIODIC_GROUP, limit=1000, next_token=token)
        out += page
        if token is None:
            return out
