"""The dispatcher in a process of its own, beside a node on a SQLite file.

Why: a node firing 10,000 schedules a second and running their handlers spent ~80 % of
its one core on the store thread, planning firings, and the handlers waited for it
(bench/delayed_jobs.py, 1,000,000 jobs over 100 s: p99 30 s late). A child process
(`child_process.py`: the pipe, restarts, metrics and readiness) uses the second core; the
two share the database file through SQLite's locking and the writer lock
(store/drivers/writer_lock.py), and a firing pass plans outside any lock
(dispatcher.py), so neither stalls the other for longer than a commit.

Beyond the child's common wire, the node sends `schedules` whenever a schedule due soon
was written in the node (`notify.base.wakes_dispatchers`), and the child says `n
<channel>` for each queue a pass wrote into. While no child runs nothing fires, and what
fell due fires as soon as the next one runs (missed occurrences, dispatcher.py). A pass
killed mid-transaction was rolled back; an old child finishing its pass beside a new one
cannot fire an occurrence twice (the completion's compare-and-set).
"""

from __future__ import annotations

from collections.abc import Callable

from tidings.child_process import (
    EXIT_SCHEMA_TOO_NEW,
    Child,
    ChildProcess,
    Role,
    Wire,
    run_child,
)
from tidings.errors import ValidationError
from tidings.notify.base import SCHEDULES_CHANNEL, Notifier
from tidings.runtime import metrics
from tidings.runtime.health import Health
from tidings.runtime.service import Service
from tidings.settings import Settings, variable

__all__ = ["DispatcherProcess", "EXIT_SCHEMA_TOO_NEW", "runs_apart"]

ROLE = Role("tidings.dispatch_process", "dispatcher", metrics.DISPATCHER_STARTS,
            forwards=SCHEDULES_CHANNEL)


def runs_apart(settings: Settings) -> bool:
    """Whether this node fires its schedules in a dispatcher process (`settings.dispatcher`).

    `auto` chooses it on a SQLite file only: on PostgreSQL the database already works in
    processes of its own, and several nodes share the firing."""
    sqlite = settings.db.startswith("sqlite:")
    memory = sqlite and settings.db.rstrip("/").endswith(":memory:")
    if settings.dispatcher == "process" and memory:
        raise ValidationError(variable("dispatcher"), "cannot be process with an in-memory "
                              "database (another process cannot open it)")
    if settings.dispatcher == "auto":
        return sqlite and not memory
    return settings.dispatcher == "process"


class DispatcherProcess(ChildProcess):
    """A service of the node (run/stop): keeps one dispatcher process running."""

    def __init__(self, settings: Settings, notifier: Notifier, *,
                 health: Health | None = None) -> None:
        super().__init__(ROLE, settings, notifier, health=health)


class _ForwardingNotifier:
    """The child dispatcher's notifier: its wake-ups (a queue it wrote into) reach the
    node as well as this process, and `moved` (from the store thread) tells the metrics
    reporter that a pass counted something."""

    def __init__(self, local: Notifier, wire: Wire, moved: Callable[[], None]) -> None:
        self._local = local
        self._wire = wire
        self._moved = moved

    def version(self, channel: str) -> int:
        return self._local.version(channel)

    def notify(self, channel: str) -> None:
        self._local.notify(channel)
        self._wire.send(f"n {channel}")
        self._moved()

    async def wait(self, channel: str, seen: int, timeout: float) -> bool:
        return await self._local.wait(channel, seen, timeout)

    def wait_sync(self, channel: str, seen: int, timeout: float) -> bool:
        return self._local.wait_sync(channel, seen, timeout)

    def close(self) -> None:
        self._local.close()


def _build(child: Child) -> tuple[list[Service], None]:
    from tidings.limits.book import LimitBook
    from tidings.schedules.dispatcher import Dispatcher

    t, settings = child.t, child.t.settings
    # Its own copy of the limits (queue targets), woken as the node's is.
    book = LimitBook(t.store, t.clock, child.bridge, t.notifier,
                     fallback_s=settings.poll_fallback_s)
    dispatcher = Dispatcher(t.schedules, t.queues, t.store, t.clock,
                            _ForwardingNotifier(t.notifier, child.wire, child.moved),
                            child.bridge, idle_poll_s=settings.poll_fallback_s,
                            health=child.health, book=book, place=t.campaigns.limit_place)
    return [dispatcher, book], None


def main() -> None:
    """The child: `python -m tidings.dispatch_process`, started by `DispatcherProcess`."""
    run_child(_build, "dispatcher process")


if __name__ == "__main__":
    main()
