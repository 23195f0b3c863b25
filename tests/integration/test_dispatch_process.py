"""The dispatcher process beside a node on a SQLite file (tidings/dispatch_process.py): real
child processes, a real SQLite file, real signals. SQLite only: it is what runs it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import IO, Any

import httpx
from serving import run_with, running_server

from tidings import App, Job
from tidings.client import Tidings
from tidings.model.schedules import ActionAfterCompletion, ScheduleSpec, Target, TargetKind
from tidings.node import Node
from tidings.runtime import metrics
from tidings.settings import Settings


def at(seconds_from_now: float) -> str:
    return time.strftime("at(%Y-%m-%dT%H:%M:%S)", time.gmtime(time.time() + seconds_from_now))


def one_shots(t: Tidings, n: int, due: str, queue: str = "jobs") -> None:
    results = t.schedules.create_many(
        ScheduleSpec(f"s{i}", due, Target(TargetKind.QUEUE, queue, input=f"s{i}"),
                     action_after_completion=ActionAfterCompletion.DELETE)
        for i in range(n))
    assert sum(r.created for r in results) == n


def bodies(t: Tidings, queue: str = "jobs") -> Counter[str]:
    seen: Counter[str] = Counter()
    while got := t.queues.receive(queue, 10, wait_s=0, visibility_s=3600):
        seen.update(m.body for m in got)
    return seen


def fired_total() -> float:
    return sum(s.value for f in metrics.REGISTRY.collect() if f.name == "tidings_schedule_firings"
               for s in f.samples if s.name.endswith("_total"))


def alive(pid: int) -> bool:
    """A process that exited but was not reaped (its parent died: orphans go to an init that
    may not reap) counts as gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def dispatcher_of(pid: int) -> int | None:
    """The dispatcher process among `pid`'s children (not a short-lived helper some
    library starts, such as ctypes looking for a shared library)."""
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        for child in f.read().split():
            try:
                with open(f"/proc/{child}/cmdline", "rb") as cmd:
                    if b"tidings.dispatch_process" in cmd.read():
                        return int(child)
            except FileNotFoundError:
                continue
    return None


def test_wake_ups_cross_both_ways_and_the_node_counts_the_child_firings(
        tmp_path: Path) -> None:
    # Neither side polls within the test's time: the child sleeps 60 s between looks at
    # the next due instant, the node's consumer 60 s between receives. A job created after
    # both are asleep runs at once only if the node woke the child (a schedule due soon)
    # and the child woke the node's consumer (a message in its queue).
    settings = Settings(db=f"sqlite:///{tmp_path}/t.db", poll_fallback_s=60)
    app = App(queue="jobs")
    ran: list[float] = []
    dues: list[int] = []

    @app.handler("ping")
    def ping(job: Job) -> None:
        ran.append(time.time())

    with Tidings(settings=settings) as t:
        node = Node(t, settings, app=app, dispatcher_process=True)
        assert node.dispatcher is None and node.dispatcher_process is not None
        before = fired_total()

        async def scenario(running: asyncio.Task[None]) -> None:
            proc = node.dispatcher_process
            assert proc is not None
            await asyncio.wait_for(proc.ready.wait(), 30)
            await asyncio.sleep(1.5)  # both asleep now
            # due at a whole second (at()) 0.3-1.3 s ahead: within the wake horizon
            dues.append(int(time.time() + 1.3))
            t.schedules.create(ScheduleSpec(
                "ping", time.strftime("at(%Y-%m-%dT%H:%M:%S)", time.gmtime(dues[0])),
                Target(TargetKind.QUEUE, "jobs", input='{"type": "ping", "id": "p1"}'),
                action_after_completion=ActionAfterCompletion.DELETE))
            deadline = time.monotonic() + 10
            while not ran and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            await asyncio.sleep(METRICS_WAIT_S)

        run_with(node, scenario)
        assert ran, "the job never ran: a wake-up was lost on one side"
        assert ran[0] - dues[0] < 1.0
        assert fired_total() - before == 1  # the child's firing, on the node's /metrics


METRICS_WAIT_S = 1.0  # two of the child's metric reports


def test_a_dispatcher_process_killed_mid_firing_is_restarted_and_fires_each_once(
        tmp_path: Path) -> None:
    n = 30_000
    settings = Settings(db=f"sqlite:///{tmp_path}/t.db")
    with Tidings(settings=settings) as t:
        t.queues.create_queue("jobs", retention_s=86400)
        node = Node(t, settings, dispatcher_process=True)
        proc = node.dispatcher_process
        assert proc is not None
        killed: list[int] = []

        async def scenario(running: asyncio.Task[None]) -> None:
            await asyncio.wait_for(proc.ready.wait(), 30)
            one_shots(t, n, at(1))
            deadline = time.monotonic() + 60
            while t.queues.describe("jobs").counts.visible < n // 10:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.005)
            assert proc.process is not None
            killed.append(proc.process.pid)
            os.kill(proc.process.pid, signal.SIGKILL)
            killed.append(t.store.count_schedules())
            while t.store.count_schedules() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)

        run_with(node, scenario)
        assert killed[1] > 0, "the kill landed mid-firing"
        assert proc.started == 2, "the node started a new dispatcher process"
        assert t.store.count_schedules() == 0, "every schedule fired"
        seen = bodies(t)
        assert len(seen) == n and max(seen.values()) == 1, "each fired exactly once"


def starts_total() -> float:
    return metrics.REGISTRY.get_sample_value("tidings_dispatcher_process_starts_total") or 0.0


def test_readiness_says_the_dispatcher_process_is_down_until_its_successor_is_ready(
        tmp_path: Path) -> None:
    # Over real HTTP, from the node's own app: 200 once the child runs, 503 naming the
    # dispatcher and its exit once it is killed, 200 again when the node's new child is up.
    settings = Settings(db=f"sqlite:///{tmp_path}/t.db")
    with Tidings(settings=settings) as t:
        node = Node(t, settings, dispatcher_process=True)
        proc = node.dispatcher_process
        assert proc is not None
        before = starts_total()
        with running_server(node.http_app()) as url, httpx.Client(base_url=url,
                                                                   timeout=10) as http:
            def ready_within(seconds: float, *, status: int) -> dict[str, Any]:
                deadline = time.monotonic() + seconds
                while (r := http.get("/health/ready")).status_code != status:
                    assert r.status_code in (200, 503), r.text
                    assert time.monotonic() < deadline, r.text
                    time.sleep(0.02)
                body: dict[str, Any] = r.json()
                return body

            up = ready_within(30, status=200)
            assert up["status"] == "ready" and up["db"] == "sqlite"
            assert up["checks"] == {"database": {"ok": True, "reason": None, "since": None},
                                    "dispatcher": {"ok": True, "reason": None, "since": None}}
            assert http.get("/health").status_code == 200
            assert proc.process is not None
            os.kill(proc.process.pid, signal.SIGKILL)
            down = ready_within(10, status=503)
            assert down["status"] == "unavailable" and down["checks"]["database"]["ok"]
            dispatcher = down["checks"]["dispatcher"]
            assert not dispatcher["ok"] and dispatcher["since"].endswith("Z")
            assert ("exited with signal 9" in dispatcher["reason"]
                    or "starting" in dispatcher["reason"]), dispatcher
            assert http.get("/health").status_code == 200  # alive all along
            assert ready_within(30, status=200)["status"] == "ready"
            assert proc.started == 2 and starts_total() - before == 2
            failing = metrics.REGISTRY.get_sample_value("tidings_component_failing",
                                                        {"component": "dispatcher"})
            assert failing == 0


def serve(url: str, tmp_path: Path, *, log: IO[bytes] | None = None
          ) -> tuple[subprocess.Popen[bytes], int]:
    """`tidings serve` on `url` (in a process group of its own, as in a terminal) and the
    pid of its dispatcher process, once it runs."""
    proc = subprocess.Popen(
        # port 0: the kernel's free port at bind time (these tests send no HTTP), so no
        # other test can take it between a pick and the bind
        [sys.executable, "-m", "tidings", "serve", "--db", url, "--port", "0"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, start_new_session=True,
        stderr=subprocess.DEVNULL if log is None else log)
    deadline = time.monotonic() + 30
    while (child := dispatcher_of(proc.pid)) is None:
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            proc.wait(10)
            raise AssertionError("no dispatcher process")
        time.sleep(0.05)
    return proc, child


def ignores(pid: int, sig: int) -> bool:
    """Whether process `pid` ignores `sig` now (the SigIgn mask of /proc/PID/status)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("SigIgn:"):
                return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    return False


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_the_dispatcher_process_stops_with_serve_even_one_killed_9(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/t.db"
    with Tidings(settings=Settings(db=url)) as t:
        t.queues.create_queue("jobs", retention_s=86400)
    # a graceful stop takes its dispatcher process with it
    server, child = serve(url, tmp_path)
    server.send_signal(signal.SIGTERM)
    assert server.wait(30) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal it caught
    assert gone_within(child, 5)
    # kill -9 of the node mid-firing: its child notices its pipe close and exits; the
    # pass it was in completes or rolls back, so after a restart each fired once
    with Tidings(settings=Settings(db=url)) as t:
        one_shots(t, 20_000, at(2))
    server, child = serve(url, tmp_path)
    try:
        with Tidings(settings=Settings(db=url)) as t:
            deadline = time.monotonic() + 60
            while t.queues.describe("jobs").counts.visible < 2_000:
                assert time.monotonic() < deadline
                time.sleep(0.005)
        os.kill(server.pid, signal.SIGKILL)
        server.wait(10)
        assert gone_within(child, 10), "the dispatcher process outlived its node"
        with Tidings(settings=Settings(db=url)) as t:
            assert t.store.count_schedules() > 0, "the kill landed mid-firing"
        server, child = serve(url, tmp_path)
        with Tidings(settings=Settings(db=url)) as t:
            deadline = time.monotonic() + 60
            while t.store.count_schedules():
                assert time.monotonic() < deadline, "schedules left unfired"
                time.sleep(0.1)
            seen = bodies(t)
        assert len(seen) == 20_000 and max(seen.values()) == 1
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)


def test_ctrl_c_stops_serve_and_then_its_dispatcher_process_quietly(tmp_path: Path) -> None:
    # SIGINT to the whole process group (a terminal's Ctrl-C): the node stops gracefully
    # and closes the pipe; the child ignored the signal, so it neither dies with a
    # traceback first nor gets restarted by a node that thought it crashed.
    url = f"sqlite:///{tmp_path}/t.db"
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        server, child = serve(url, tmp_path, log=out)
    try:
        # past its start-up: it ignores SIGTERM once main() has run (on a loaded machine
        # the interpreter's start alone can take longer than any fixed sleep)
        deadline = time.monotonic() + 30
        while not ignores(child, signal.SIGTERM):
            assert alive(child) and time.monotonic() < deadline, log.read_text()
            time.sleep(0.02)
        os.kill(child, signal.SIGTERM)  # a stray SIGTERM to the child alone: ignored too
        time.sleep(0.3)
        assert alive(child), log.read_text()
        os.killpg(server.pid, signal.SIGINT)
        assert server.wait(30) in (0, 130, -signal.SIGINT)  # 130: the shell's Ctrl-C status
        assert gone_within(child, 10)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(10)
    text = log.read_text()
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    assert "exited with" not in text, text  # the node never saw its child die
