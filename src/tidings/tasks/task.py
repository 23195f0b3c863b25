"""`@app.task`: a function that runs as a job, sent with `.send()` from anywhere.

The task is registered as the app's handler for its name on its queue, so a job written
by any client in the same format (`{"type": "<task name>", "id": …, "args": {…}}`, from
boto3 or the HTTP API) runs it too. Calling the task directly still calls the function.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from tidings.clock import to_ms
from tidings.errors import ValidationError
from tidings.jobs.handlers import Job
from tidings.tasks.arguments import Arguments
from tidings.tasks.sending import JobHandle, send_job

if TYPE_CHECKING:
    from tidings.tasks.app import App

#: Keyword arguments of `send` itself, so a task's own parameters cannot use them.
RESERVED = frozenset({"job_id", "connection"})


class Task:
    """A registered task. `send`, `send_in`, `send_at` (and their `_async` twins) enqueue
    it; each validates the arguments against the function's signature first."""

    def __init__(self, app: App, fn: Callable[..., Any], *, name: str, queue: str) -> None:
        self.app = app
        self.fn = fn
        self.name = name
        self.queue = queue
        self.arguments = Arguments(fn, name)
        clash = RESERVED & set(self.arguments.params)
        if clash:
            raise ValidationError(sorted(clash)[0], f"task {name!r}: this parameter name is "
                                  "taken by send() itself (job_id=, connection=)")
        self.is_async = inspect.iscoroutinefunction(fn)
        functools.update_wrapper(self, fn)

    def __repr__(self) -> str:
        return f"<Task {self.name} on {self.queue}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    # running ------------------------------------------------------------------------

    def _kwargs(self, job: Job) -> dict[str, Any]:
        values = job.payload.get("args", {})
        if not isinstance(values, dict):
            raise ValidationError("args", "a task's job carries its arguments as a JSON object")
        return self.arguments.load(values, job)

    def handler(self) -> Callable[[Job], Any]:
        """What the consumer runs for a job of this task (sync or async, as the task)."""
        if self.is_async:
            async def run_async(job: Job) -> Any:
                return await self.fn(**self._kwargs(job))

            return run_async

        def run(job: Job) -> Any:
            return self.fn(**self._kwargs(job))

        return run

    # sending ------------------------------------------------------------------------

    def send(self, *args: Any, job_id: str | int | None = None, connection: Any = None,
             **kwargs: Any) -> JobHandle:
        """Enqueue a job now. `job_id`: the job's identity (the same id runs once);
        `connection`: your own PostgreSQL connection (psycopg, or a SQLAlchemy session or
        connection), so the job commits or rolls back with your transaction."""
        return self._send(None, args, kwargs, job_id, connection)

    def send_in(self, delay: timedelta | float, *args: Any, job_id: str | int | None = None,
                connection: Any = None, **kwargs: Any) -> JobHandle:
        """Enqueue a job due after `delay` (a timedelta, or seconds; milliseconds count)."""
        if isinstance(delay, timedelta):
            ms = delay // timedelta(milliseconds=1)
        elif isinstance(delay, int | float) and not isinstance(delay, bool):
            ms = int(delay * 1000)
        else:
            raise ValidationError("delay", "must be a timedelta or a number of seconds")
        if ms < 0:
            raise ValidationError("delay", "must not be negative")
        return self._send(self.app.client().clock.now_ms() + ms, args, kwargs, job_id,
                          connection)

    def send_at(self, when: datetime, *args: Any, job_id: str | int | None = None,
                connection: Any = None, **kwargs: Any) -> JobHandle:
        """Enqueue a job due at `when`, an aware datetime (milliseconds honoured; a naive
        one is refused: it names no instant)."""
        if not isinstance(when, datetime):
            raise ValidationError("when", "must be a timezone-aware datetime")
        return self._send(to_ms(when, "when"), args, kwargs, job_id, connection)

    async def send_async(self, *args: Any, **kwargs: Any) -> JobHandle:
        """`send` for asyncio code: the database work runs through the client's bridge
        (`Tidings.bridge`, sized by the store), not on the loop, and not on a thread of
        asyncio's default pool, which nothing sizes for the store."""
        return await self.app.client().bridge.run(functools.partial(self.send, *args,
                                                                    **kwargs))

    async def send_in_async(self, delay: timedelta | float, *args: Any,
                            **kwargs: Any) -> JobHandle:
        return await self.app.client().bridge.run(functools.partial(self.send_in, delay,
                                                                    *args, **kwargs))

    async def send_at_async(self, when: datetime, *args: Any, **kwargs: Any) -> JobHandle:
        return await self.app.client().bridge.run(functools.partial(self.send_at, when,
                                                                    *args, **kwargs))

    def _send(self, due_ms: int | None, args: tuple[Any, ...], kwargs: dict[str, Any],
              job_id: Any, connection: Any) -> JobHandle:
        values = self.arguments.bind(args, kwargs)  # before anything is stored
        t = self.app.client()
        return send_job(t, self.name, self.queue, values, due_ms=due_ms, job_id=job_id,
                        connection=unwrap_connection(connection),
                        declare=lambda: self.app.declare(t))


def unwrap_connection(connection: Any) -> Any:
    """The psycopg connection under a SQLAlchemy Session or Connection (duck-typed, so
    SQLAlchemy stays optional); anything else as it is, for the store to judge."""
    if connection is None:
        return None
    get = getattr(connection, "connection", None)
    if callable(get):  # a Session: its Connection in the current transaction
        connection = get()
    pooled = getattr(connection, "connection", None)
    raw = getattr(pooled, "dbapi_connection", None)
    return raw if raw is not None else connection
