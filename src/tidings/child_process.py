"""A node's child processes: work on a second core, beside the node, over a pipe.

Why: a Python process computes on one core at a time (the GIL). Two parts of a node can
each keep a core busy on their own: the dispatcher firing thousands of schedules a second
(`dispatch_process.py`) and the email sender rendering and sending thousands of emails a
second (`email_process.py`). Each may run as a child process of the node; the database is
what they share (SQLite's locking and the writer lock on a file, rows on PostgreSQL), the
pipe only carries what makes the node one thing to its operator: its metrics, its
readiness, its wake-ups.

The wire is the child's stdin and stdout, one line per item. The node writes its
settings as one JSON line, then the name of a notification channel whenever that channel
moves in the node and the child waits on it (the dispatcher: `schedules`). The child
writes `ready` once it runs, `n <channel>` for each channel it notified (the node's
consumers and long polls wake at once), `m <json>` with the metrics it counted since its
last report, `f <json>` for a delivery that failed (the console's failing targets) and
`h <json>` with its troubles (the node's readiness names them). Notifications only wake
things up: a lost one costs latency, never work (notify/base.py).

Lifetimes: a child stops when its stdin ends, so it never outlives the node, even one
killed -9 (the kernel closes the pipe). The node starts a new child when one dies, after
a backoff. Whatever the child held when it died is the database's to give back: a
firing pass was rolled back; a job's lease runs out and its message is received again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from tidings.errors import SchemaTooNew, TidingsError
from tidings.notify.base import Notifier
from tidings.runtime import metrics
from tidings.runtime.backoff import Backoff
from tidings.runtime.collector import settle_after_startup
from tidings.runtime.health import Health
from tidings.runtime.service import Service
from tidings.runtime.waits import first_of
from tidings.settings import Settings
from tidings.store import Create

if TYPE_CHECKING:
    from prometheus_client import Counter

    from tidings.client import Tidings
    from tidings.runtime.bridge import Bridge

log = logging.getLogger("tidings.child_process")

METRICS_EVERY_S = 0.5  # how stale the node's view of the child's counters may be
#: ... after the child said something moved; counters that moved without it are
#: reported within this, and an idle child wakes for nothing else.
METRICS_FALLBACK_S = 30.0
#: How long the node's forwarding of wake-ups waits on its notifier between two looks at
#: the pipe (it is cancelled when the child ends, so this is only a bound).
FORWARD_CHECK_S = 60.0
STOP_WAIT_S = 15.0  # a child still running this long after its stdin closed is killed
STEADY_S = 30.0  # a child that ran this long died of something new: restart at once
EXIT_SCHEMA_TOO_NEW = 3  # a child's exit code when a newer tidings migrated the database


@dataclass(frozen=True)
class Role:
    """What one kind of child is: its module (run as `python -m`), the component name its
    troubles and the node's readiness use, the counter of its starts, and the channel
    the node forwards to it (None: none)."""

    module: str
    component: str
    starts: Counter
    forwards: str | None = None


# the node's side ------------------------------------------------------------------------------

class ChildProcess:
    """A service of the node (run/stop): keeps one child process of `role` running with
    `settings` (the node's, or the share of them the child is to use)."""

    def __init__(self, role: Role, settings: Settings, notifier: Notifier, *,
                 health: Health | None = None) -> None:
        self.role = role
        self.settings = settings
        # The component is failing from each start until the child says it is ready,
        # while the child backs off (the reason it forwards), and from an exit until the
        # next child is ready.
        self.health = health if health is not None else Health(export=False)
        self.notifier = notifier
        self.process: asyncio.subprocess.Process | None = None
        self.started = 0  # children started, for tests and the log
        self.ready = asyncio.Event()
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        backoff = Backoff(first_s=0.5, max_s=10.0)
        name = self.role.component
        while not self._stopping.is_set():
            began = time.monotonic()
            code = await self._run_child()
            if self._stopping.is_set():
                return
            if code == EXIT_SCHEMA_TOO_NEW:  # the node stops: its schema guard says why
                raise SchemaTooNew(f"the {name} process found the database migrated by a "
                                   "newer tidings")
            if time.monotonic() - began > STEADY_S:
                backoff.reset()
            exited = RuntimeError(f"the {name} process exited with {_describe(code)}; "
                                  f"its work waits until it is back")
            self.health.failing(name, str(exited))
            await backoff.wait(log, f"{name} process", exited, self._stopping)

    def stop(self) -> None:
        self._stopping.set()
        proc = self.process
        if proc is not None and proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()  # its cue to finish what it is doing and exit

    async def _run_child(self) -> int:
        self.ready.clear()
        name = self.role.component
        if name not in self.health.troubles():
            self.health.failing(name, f"the {name} process is starting")
        self.role.starts.inc()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", self.role.module,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        self.process, self.started = proc, self.started + 1
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({"settings": self.settings.values()}).encode() + b"\n")
        wakes = asyncio.create_task(self._forward_wakeups(proc.stdin))
        try:
            if self._stopping.is_set():
                proc.stdin.close()
            await self._read(proc.stdout)
        finally:
            wakes.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await wakes
        try:
            return await asyncio.wait_for(proc.wait(), STOP_WAIT_S)
        except TimeoutError:
            log.error("the %s process did not exit %.0f s after its output ended; killing it",
                      name, STOP_WAIT_S)
            proc.kill()
            return await proc.wait()

    async def _read(self, stdout: asyncio.StreamReader) -> None:
        notify = self.notifier.notify
        name = self.role.component
        while line := await stdout.readline():
            kind, _, rest = line.rstrip(b"\n").decode().partition(" ")
            if kind == "n":
                notify(rest)
            elif kind == "m":
                metrics.merge_snapshot(json.loads(rest))
            elif kind == "f":
                metrics.FAILURES.add(*json.loads(rest))
            elif kind == "ready":
                self.ready.set()
                self.health.recovered(name)
            elif kind == "h":  # the child's troubles now (none: it works again)
                troubles: dict[str, str] = json.loads(rest)
                if troubles:
                    self.health.failing(name, "; ".join(troubles.values()))
                else:
                    self.health.recovered(name)
            else:
                log.warning("%s process: unexpected line %r", name, line[:80])

    async def _forward_wakeups(self, stdin: asyncio.StreamWriter) -> None:
        """The role's channel down the pipe each time it moves here (several moves
        between two looks are one wake-up: the child looks at the database again)."""
        channel = self.role.forwards
        if channel is None:
            return
        with contextlib.suppress(ConnectionError):
            while not stdin.is_closing():
                seen = self.notifier.version(channel)
                if await self.notifier.wait(channel, seen, FORWARD_CHECK_S):
                    stdin.write(channel.encode() + b"\n")
                    await stdin.drain()


def _describe(code: int) -> str:
    return f"signal {-code}" if code < 0 else f"code {code}"


# the child's side -----------------------------------------------------------------------------

class Wire:
    """The child's end of its stdout: one locked write per line, from any thread. A node
    that went away (a broken pipe) stops the child instead of failing its work."""

    def __init__(self, out: IO[bytes], on_broken: Callable[[], None]) -> None:
        self._out = out
        self._lock = threading.Lock()
        self._on_broken = on_broken
        self.broken = False

    def send(self, line: str) -> None:
        with self._lock:
            if self.broken:
                return
            try:
                self._out.write(line.encode() + b"\n")
                self._out.flush()
            except (OSError, ValueError):  # BrokenPipeError; ValueError: closed
                self.broken = True
                self._on_broken()


def forward_failures(wire: Wire) -> None:
    """This process's delivery failures go to the node too, whose heartbeat carries them
    to the console's failing targets."""
    metrics.FAILURES.listener = lambda item: wire.send("f " + json.dumps(item))


@dataclass
class Child:
    """What a role's child builds its services from: its store, bridge and health (whose
    troubles go to the node), the wire, and `moved`, to call (from any thread) when it
    counted something the node's metrics should show soon; `moved_on_loop` is the same
    from the event loop's thread, for a call per job (no wake-up of the loop to make)."""

    t: Tidings
    bridge: Bridge
    health: Health
    wire: Wire
    moved: Callable[[], None]
    moved_on_loop: Callable[[], None]


#: A role's body: the services to run, and what to close after they stopped.
Build = Callable[[Child], tuple[Sequence[Service], Callable[[], Awaitable[None]] | None]]


def _read_wakeups(stdin: IO[bytes], notifier: Notifier, on_end: Callable[[], None]) -> None:
    for line in iter(stdin.readline, b""):
        if channel := line.strip().decode():
            notifier.notify(channel)
    on_end()


async def _report_metrics(wire: Wire, stop: asyncio.Event, moved: asyncio.Event) -> None:
    """What moved since last time: at most every METRICS_EVERY_S after something moved,
    else every METRICS_FALLBACK_S, and once more when stopping."""
    before: metrics.Snapshot | None = None
    while True:
        moved.clear()
        now = metrics.forwarded_snapshot()
        delta = metrics.snapshot_delta(now, before)
        if delta is not None:
            wire.send("m " + json.dumps(delta, separators=(",", ":")))
            before = now
        if stop.is_set():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), METRICS_EVERY_S)  # (spacing the reports)
        if not moved.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(first_of(moved.wait(), stop.wait()),
                                       METRICS_FALLBACK_S)


async def _serve(first: dict[str, Any], out: IO[bytes], build: Build) -> None:
    from tidings.client import Tidings
    from tidings.runtime.bridge import Bridge

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    moved = asyncio.Event()  # something was counted: the metrics reporter looks

    def moved_soon() -> None:  # (from any thread)
        loop.call_soon_threadsafe(moved.set)

    def stop_soon() -> None:  # from any thread: stdin ended, or stdout broke
        loop.call_soon_threadsafe(stop.set)

    settings = Settings.from_values(first["settings"])
    wire = Wire(out, stop_soon)
    forward_failures(wire)
    # The node opened (made, migrated) the database before starting this process: here
    # it is only opened. A newer release may have migrated it since: refused (the node's
    # schema guard stops the node for it).
    t = Tidings(settings=settings, create=Create.NOTHING)
    bridge = Bridge.for_store(t.store)
    health = Health(export=False, on_change=lambda troubles: wire.send("h " + json.dumps(
        {name: trouble.reason for name, trouble in troubles.items()})))
    try:
        services, close = build(Child(t, bridge, health, wire, moved_soon, moved.set))
        threading.Thread(target=_read_wakeups, args=(sys.stdin.buffer, t.notifier, stop_soon),
                         name="tidings-wakeups", daemon=True).start()
        settle_after_startup()  # as a node does (runtime/collector.py)
        tasks = [asyncio.create_task(s.run(), name=type(s).__name__) for s in services]
        reporter = asyncio.create_task(_report_metrics(wire, stop, moved))
        wire.send("ready")
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait([*tasks, stopping], return_when=asyncio.FIRST_COMPLETED)
        for s in services:
            s.stop()
        stopping.cancel()
        try:
            for task in tasks:
                await task  # what is under way completes; a service that died says why
        finally:
            stop.set()
            await reporter
            if close is not None:
                await close()
    finally:
        bridge.close()
        t.close()


def run_child(build: Build, label: str) -> None:
    """A child's `main`: `python -m <role module>`, started by `ChildProcess`."""
    # It lives exactly as long as its stdin. Ctrl-C in a terminal (SIGINT to the whole
    # foreground group) or a service manager's SIGTERM to every process of the unit is
    # the node's to handle: it stops gracefully, then closes this pipe. Only SIGKILL
    # ends the child by itself, and the database gives back what it held.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # The protocol owns the real stdout; a stray print goes to stderr, not into it.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    first = json.loads(sys.stdin.buffer.readline() or b"null")
    if first is None:
        return  # the node stopped before it said anything
    logging.basicConfig(level=first["settings"].get("log_level", "info").upper(),
                        format=f"%(asctime)s %(levelname)s %(name)s[{label}]: %(message)s")
    try:
        asyncio.run(_serve(first, out, build))
    except TidingsError as exc:  # refused at open (SchemaTooNew): one line, not a traceback
        log.error("%s", exc)
        raise SystemExit(EXIT_SCHEMA_TOO_NEW if isinstance(exc, SchemaTooNew) else 1) from None
