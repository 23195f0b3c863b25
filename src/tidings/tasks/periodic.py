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
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tidings.errors import ScheduleNotFound, ValidationError
from tidings.model.schedules import NAME_RE, Schedule, ScheduleSpec, Target
from tidings.targets.registry import target_of
from tidings.tasks.sending import ensure_group
from tidings.triggers import parse_expression
from tidings.triggers.shorthand import cron_expression, rate_expression

if TYPE_CHECKING:
    from tidings.client import Tidings
    from tidings.tasks.app import App

#: The schedule group holding every app's periodic jobs (named after their task).
PERIODIC_GROUP = "tidings-periodic"


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
                            Target.queue(self.queue, body),
                            group=PERIODIC_GROUP, timezone=self.timezone,
                            description=f"periodic job of task {self.task}")


def periodic(task: str, queue: str, expression: str, timezone: str) -> Periodic:
    """Validated now (at import), so a typo fails the app's start, not a night's run."""
    if not NAME_RE.match(task):
        raise ValidationError("name", f"a periodic task's name ({task!r}) names its schedule:"
                              " 1-64 characters of letters, digits, '-', '_' and '.'")
    parse_expression(expression, timezone, None, None, 0)
    return Periodic(task, queue, expression, timezone)


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
        if (target_of(target).writes_queue and target.destination in mine
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


__all__ = ["PERIODIC_GROUP", "Periodic", "cron_expression", "periodic", "rate_expression",
           "sync_periodic"]
