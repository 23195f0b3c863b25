"""The dispatcher in a process of its own, beside a node on a SQLite file.

Why: a Python process computes on one core at a time (the GIL). A node firing 10,000
schedules a second and running their handlers spent ~80 % of that one core on the store
thread, planning firings, and the handlers waited for it (bench/delayed_jobs.py, 1,000,000
jobs over 100 s: p99 30 s late). A second process uses the second core; the two share the
database file through SQLite's locking and the writer lock
(store/drivers/writer_lock.py), and a firing pass plans outside any lock
(dispatcher.py), so neither stalls the other for longer than a commit.

The wire is the child's stdin and stdout, one line per item. The node writes its
settings as one JSON line, then `schedules` whenever a schedule due soon was written in
the node (`notify.base.wakes_dispatchers`). The child writes `ready` once it runs,
`n <channel>` for each queue a pass wrote into (the node's consumers and long polls wake at
once), and `m <json>` with the metrics it counted since its last report, so the node's
`/metrics` shows every firing. Notifications only wake things up: a lost one costs
latency, not a firing (notify/base.py).

Lifetimes: the child stops when its stdin ends, so it never outlives the node, even one
killed -9 (the kernel closes the pipe). The node starts a new child when one dies, after
a backoff; meanwhile nothing fires, and what fell due fires as soon as the next one runs
(missed occurrences, dispatcher.py). A pass killed mid-transaction was rolled back; an old
child finishing its pass beside a new one cannot fire an occurrence twice (the
completion's compare-and-set).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from tidings.errors import SchemaTooNew, TidingsError, ValidationError
from tidings.notify.base import SCHEDULES_CHANNEL, Notifier
from tidings.runtime import metrics
from tidings.runtime.backoff import Backoff
from tidings.runtime.health import Health
from tidings.runtime.waits import first_of
from tidings.settings import Settings, variable
from tidings.store import Create

log = logging.getLogger("tidings.dispatch_process")

METRICS_EVERY_S = 0.5  # how stale the node's view of the child's counters may be
#: ... after a pass that wrote messages; counters that moved without one (a firing skipped
#: for its age, a drop) are reported within this, and an idle child wakes for nothing else.
METRICS_FALLBACK_S = 30.0
#: How long the node's forwarding of schedule wake-ups waits on its notifier between two
#: looks at the pipe (it is cancelled when the child ends, so this is only a bound).
FORWARD_CHECK_S = 60.0
STOP_WAIT_S = 15.0  # a child still running this long after its stdin closed is killed
STEADY_S = 30.0  # a child that ran this long died of something new: restart at once
EXIT_SCHEMA_TOO_NEW = 3  # the child's exit code when a newer tidings migrated the database


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


# the node's side ------------------------------------------------------------------------------

class DispatcherProcess:
    """A service of the node (run/stop): keeps one dispatcher process running."""

    def __init__(self, settings: Settings, notifier: Notifier, *,
                 health: Health | None = None) -> None:
        self.settings = settings
        # "dispatcher" is failing from each start until the child says it is ready, while
        # the child's own dispatcher backs off (the reason it forwards), and from an exit
        # until the next child is ready: nothing fires meanwhile.
        self.health = health if health is not None else Health(export=False)
        self.notifier = notifier
        self.process: asyncio.subprocess.Process | None = None
        self.started = 0  # children started, for tests and the log
        self.ready = asyncio.Event()
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        backoff = Backoff(first_s=0.5, max_s=10.0)
        while not self._stopping.is_set():
            began = time.monotonic()
            code = await self._run_child()
            if self._stopping.is_set():
                return
            if code == EXIT_SCHEMA_TOO_NEW:  # the node stops: its schema guard says why
                raise SchemaTooNew("the dispatcher process found the database migrated by "
                                   "a newer tidings")
            if time.monotonic() - began > STEADY_S:
                backoff.reset()
            exited = RuntimeError(f"the dispatcher process exited with {_describe(code)};"
                                  " nothing fires until it is back")
            self.health.failing("dispatcher", str(exited))
            await backoff.wait(log, "dispatcher process", exited, self._stopping)

    def stop(self) -> None:
        self._stopping.set()
        proc = self.process
        if proc is not None and proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()  # its cue to finish the pass it is in and exit

    async def _run_child(self) -> int:
        self.ready.clear()
        if "dispatcher" not in self.health.troubles():
            self.health.failing("dispatcher", "the dispatcher process is starting")
        metrics.DISPATCHER_STARTS.inc()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tidings.dispatch_process",
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
            log.error("the dispatcher process did not exit %.0f s after its output ended;"
                      " killing it", STOP_WAIT_S)
            proc.kill()
            return await proc.wait()

    async def _read(self, stdout: asyncio.StreamReader) -> None:
        notify = self.notifier.notify
        while line := await stdout.readline():
            kind, _, rest = line.rstrip(b"\n").decode().partition(" ")
            if kind == "n":
                notify(rest)
            elif kind == "m":
                metrics.merge_snapshot(json.loads(rest))
            elif kind == "ready":
                self.ready.set()
                self.health.recovered("dispatcher")
            elif kind == "h":  # the child's troubles now (none: it works again)
                troubles: dict[str, str] = json.loads(rest)
                if troubles:
                    self.health.failing("dispatcher", "; ".join(troubles.values()))
                else:
                    self.health.recovered("dispatcher")
            else:
                log.warning("dispatcher process: unexpected line %r", line[:80])

    async def _forward_wakeups(self, stdin: asyncio.StreamWriter) -> None:
        """`schedules` down the pipe each time the channel moves here (several moves
        between two looks are one wake-up: the child re-reads the next due instant)."""
        with contextlib.suppress(ConnectionError):
            while not stdin.is_closing():
                seen = self.notifier.version(SCHEDULES_CHANNEL)
                if await self.notifier.wait(SCHEDULES_CHANNEL, seen, FORWARD_CHECK_S):
                    stdin.write(b"schedules\n")
                    await stdin.drain()


def _describe(code: int) -> str:
    return f"signal {-code}" if code < 0 else f"code {code}"


# the child's side -----------------------------------------------------------------------------

class _Wire:
    """The child's end of its stdout: one locked write per line, from any thread. A node
    that went away (a broken pipe) stops the child instead of failing its pass."""

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


class _ForwardingNotifier:
    """The child dispatcher's notifier: its wake-ups (a queue it wrote into) reach the
    node as well as this process, and `moved` (from the store thread) tells the metrics
    reporter that a pass counted something."""

    def __init__(self, local: Notifier, wire: _Wire, moved: Callable[[], None]) -> None:
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


def _read_wakeups(stdin: IO[bytes], notifier: Notifier, on_end: Callable[[], None]) -> None:
    for line in iter(stdin.readline, b""):
        if line.strip() == SCHEDULES_CHANNEL.encode():
            notifier.notify(SCHEDULES_CHANNEL)
    on_end()


async def _report_metrics(wire: _Wire, stop: asyncio.Event, moved: asyncio.Event) -> None:
    """What moved since last time: at most every METRICS_EVERY_S after a pass that wrote
    messages (`moved`), else every METRICS_FALLBACK_S, and once more when stopping."""
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


async def _serve(first: dict[str, Any], out: IO[bytes]) -> None:
    from tidings.client import Tidings
    from tidings.limits.book import LimitBook
    from tidings.runtime.bridge import Bridge
    from tidings.schedules.dispatcher import Dispatcher

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    moved = asyncio.Event()  # a pass counted something: the metrics reporter looks

    def passed() -> None:  # (from the store thread)
        loop.call_soon_threadsafe(moved.set)

    def stop_soon() -> None:  # from any thread: stdin ended, or stdout broke
        loop.call_soon_threadsafe(stop.set)

    settings = Settings.from_values(first["settings"])
    wire = _Wire(out, stop_soon)
    # The node opened (made, migrated) the database before starting this process: here
    # it is only opened. A newer release may have migrated it since: refused (the node's
    # schema guard stops the node for it).
    t = Tidings(settings=settings, create=Create.NOTHING)
    bridge = Bridge.for_store(t.store)
    health = Health(export=False, on_change=lambda troubles: wire.send("h " + json.dumps(
        {name: trouble.reason for name, trouble in troubles.items()})))
    try:
        # Its own copy of the limits (queue targets), woken as the node's is.
        book = LimitBook(t.store, t.clock, bridge, t.notifier,
                         fallback_s=settings.poll_fallback_s)
        dispatcher = Dispatcher(t.schedules, t.queues, t.store, t.clock,
                                _ForwardingNotifier(t.notifier, wire, passed), bridge,
                                idle_poll_s=settings.poll_fallback_s,
                                health=health, book=book,
                                place=t.campaigns.limit_place)
        threading.Thread(target=_read_wakeups, args=(sys.stdin.buffer, t.notifier, stop_soon),
                         name="tidings-wakeups", daemon=True).start()
        # What was built so far lives as long as the process (node.freeze_startup_objects).
        gc.collect()
        gc.freeze()
        task = asyncio.create_task(dispatcher.run())
        reading = asyncio.create_task(book.run())
        reporter = asyncio.create_task(_report_metrics(wire, stop, moved))
        wire.send("ready")
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait([task, stopping], return_when=asyncio.FIRST_COMPLETED)
        dispatcher.stop()
        book.stop()
        stopping.cancel()
        try:
            await task  # a pass under way completes; a dispatcher that died says why
        finally:
            stop.set()
            await reporter
            await reading
    finally:
        bridge.close()
        t.close()


def main() -> None:
    """The child: `python -m tidings.dispatch_process`, started by `DispatcherProcess`."""
    # It lives exactly as long as its stdin. Ctrl-C in a terminal (SIGINT to the whole
    # foreground group) or a service manager's SIGTERM to every process of the unit is
    # the node's to handle: it stops gracefully, then closes this pipe. Only SIGKILL
    # ends the child by itself, and a pass cut short by it is rolled back.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # The protocol owns the real stdout; a stray print goes to stderr, not into it.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    first = json.loads(sys.stdin.buffer.readline() or b"null")
    if first is None:
        return  # the node stopped before it said anything
    logging.basicConfig(level=first["settings"].get("log_level", "info").upper(),
                        format="%(asctime)s %(levelname)s %(name)s[dispatcher process]: "
                        "%(message)s")
    try:
        asyncio.run(_serve(first, out))
    except TidingsError as exc:  # refused at open (SchemaTooNew): one line, not a traceback
        log.error("%s", exc)
        raise SystemExit(EXIT_SCHEMA_TOO_NEW if isinstance(exc, SchemaTooNew) else 1) from None


if __name__ == "__main__":
    main()
