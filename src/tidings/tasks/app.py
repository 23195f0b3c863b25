"""`tidings.App`: what the engine runs (`tidings.jobs.handlers.Handlers`: job handlers, the
queues it consumes) plus the Python way in:
`@app.task`, `@app.cron`, `@app.rate`, and the database its tasks are sent to.

    app = tidings.App(queue="jobs", db="sqlite:///app.db")

    @app.task
    def generate(invoice_id: int) -> None: ...

    generate.send(invoice_id=42)

`tidings serve --app module:app` (or `tidings worker`) runs the tasks and registers the
periodic jobs; any process that imports the app can send.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tidings.client import Tidings
from tidings.errors import ValidationError
from tidings.jobs.declare import declare_queues
from tidings.jobs.handlers import Handlers, Job, Limits, bind_limits
from tidings.tasks.periodic import (
    Periodic,
    cron_expression,
    periodic,
    rate_expression,
    sync_periodic,
)
from tidings.tasks.task import Task


def argument(job: Job, key: str | Callable[..., Any]) -> Any:
    """A task's limit key: one of its arguments, or a callable of them."""
    args = job.payload.get("args")
    args = args if isinstance(args, dict) else {}
    return key(**args) if callable(key) else args.get(key)


@dataclass(eq=False)
class App(Handlers):
    """A set of tasks, periodic jobs and job handlers.

    `db`: where its tasks are sent (default: `TIDINGS_DB`). A node running the app
    (`tidings serve --app`) sends the jobs its tasks send to its own database.
    """

    db: str | None = None
    tasks: dict[str, Task] = field(default_factory=dict)
    periodic: dict[str, Periodic] = field(default_factory=dict)
    _client: Tidings | None = field(default=None, repr=False)
    _owned: Tidings | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    # declaring ----------------------------------------------------------------------

    def task(self, fn: Callable[..., Any] | None = None, /, *, name: str | None = None,
             queue: str | None = None, visibility_timeout_s: int | None = None,
             max_attempts: int | None = None, limit: Limits = None) -> Any:
        """Make a function (sync or async) a task: `@app.task` or `@app.task(queue=…,
        name=…, visibility_timeout_s=…, max_attempts=…)`. The last two are the queue's
        (SQS's visibility timeout and maxReceiveCount, after which a job goes to the
        queue's dead-letter queue), so tasks sharing a queue share them. `limit`: a
        `tidings.Limit` (or a list), keyed by an argument's name or a callable of the
        arguments ([limits](limits.md))."""

        def register(f: Callable[..., Any]) -> Task:
            return self._register(f, name or f.__name__, queue or self.queue,
                                  visibility_timeout_s, max_attempts, limit)

        return register(fn) if fn is not None else register

    def cron(self, expression: str, *, tz: str = "UTC", name: str | None = None,
             queue: str | None = None) -> Callable[[Callable[..., Any]], Task]:
        """A task run at every occurrence of a cron expression in zone `tz`: EventBridge's
        six fields (`0 9 ? * MON-FRI *`) or a standard five-field crontab line."""
        return self._periodic(cron_expression(expression), tz, name, queue)

    def rate(self, expression: str, *, name: str | None = None, queue: str | None = None,
             ) -> Callable[[Callable[..., Any]], Task]:
        """A task run every interval: `@app.rate("5 minutes")` (EventBridge's rate)."""
        return self._periodic(rate_expression(expression), "UTC", name, queue)

    def _periodic(self, expression: str, tz: str, name: str | None, queue: str | None,
                  ) -> Callable[[Callable[..., Any]], Task]:
        def register(f: Callable[..., Any]) -> Task:
            task_name = name or f.__name__
            spec = periodic(task_name, queue or self.queue, expression, tz)
            task = self._register(f, task_name, spec.queue, None, None)
            if task.arguments.params and any(p.required
                                             for p in task.arguments.params.values()):
                raise ValidationError("periodic", f"task {task_name!r} runs on a schedule, "
                                      "so it cannot have required arguments")
            self.periodic[task_name] = spec
            return task

        return register

    def _register(self, fn: Callable[..., Any], name: str, queue: str,
                  visibility_timeout_s: int | None, max_attempts: int | None,
                  limit: Limits = None) -> Task:
        if name in self.tasks:
            raise ValidationError("name", f"task {name!r} is already registered")
        task = Task(self, fn, name=name, queue=queue)
        if visibility_timeout_s is not None or max_attempts is not None:
            self._queue_options(task, visibility_timeout_s, max_attempts)
        self._handler(name, queue, bind_limits(limit, name, argument))(task.handler())
        self.tasks[name] = task
        return task

    def _queue_options(self, task: Task, visibility_timeout_s: int | None,
                       max_attempts: int | None) -> None:
        current = self.declarations.get(task.queue)
        attrs = dict(current.attributes) if current else {}
        count = current.max_receive_count if current else None
        if visibility_timeout_s is not None:
            if attrs.get("visibility_timeout_s", visibility_timeout_s) != visibility_timeout_s:
                raise ValidationError("visibility_timeout_s", f"queue {task.queue!r} already "
                                      f"has {attrs['visibility_timeout_s']} s from another "
                                      "task: give this task a queue of its own")
            attrs["visibility_timeout_s"] = visibility_timeout_s
        if max_attempts is not None:
            if (current is not None and count not in (None, max_attempts)
                    and current.dead_letter_queue):
                raise ValidationError("max_attempts", f"queue {task.queue!r} already allows "
                                      f"{count} attempts from another task or its "
                                      "declaration: give this task a queue of its own")
            count = max_attempts
        dlq: Any = current.dead_letter_queue if current else True
        self.declare_queue(task.queue, dead_letter_queue=dlq, max_receive_count=count or 5,
                           **attrs)

    # where jobs are sent ------------------------------------------------------------

    def client(self) -> Tidings:
        """The tidings its tasks are sent to: the node's when one runs the app, else one
        opened on first use at `db` (or `TIDINGS_DB`)."""
        with self._lock:
            if self._client is None:
                self._owned = self._client = Tidings(self.db)
            return self._client

    def bind(self, t: Tidings | None) -> Tidings | None:
        """Send through `t` from now on (a node, a test's time travel); returns the one
        bound before, to put back."""
        with self._lock:
            before, self._client = self._client, t
            return before

    def declare(self, t: Tidings) -> None:
        """Create the queues the app consumes, if missing (as a node does at start)."""
        if self.create_queues:
            declare_queues(t.queues, self)

    def start(self, t: Tidings) -> None:
        """What a node does with the app at start: its queues, its periodic schedules,
        and its sends go to the node's database."""
        self.declare(t)
        sync_periodic(t, self)
        with self._lock:
            if self._client is None:
                self._client = t

    def close(self) -> None:
        """Close the database this app opened for sending (if it opened one)."""
        with self._lock:
            owned, self._owned = self._owned, None
            if self._client is owned:
                self._client = None
        if owned is not None:
            owned.close()
