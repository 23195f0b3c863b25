"""kill -9 of `tidings serve` while 100,000 schedules are firing: after a restart every
schedule has fired exactly once into its queue."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tidings.client import Tidings
from tidings.model.schedules import ActionAfterCompletion, ScheduleSpec, Target, TargetKind
from tidings.settings import Settings

pytestmark = pytest.mark.slow
N = 100_000


def serve(url: str, tmp_path: Path) -> subprocess.Popen[bytes]:
    # port 0: the kernel's free port at bind time (this test sends no HTTP); a port picked
    # beforehand could be taken by a parallel test before the server binds it
    return subprocess.Popen(
        [sys.executable, "-m", "tidings", "serve", "--db", url, "--port", "0"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def queued(t: Tidings) -> int:
    c = t.queues.describe("jobs").counts
    return c.visible + c.in_flight + c.delayed


def test_kill_9_mid_firing_then_restart_fires_each_exactly_once(
    db_url: str, tmp_path: Path
) -> None:
    url = db_url
    due = time.strftime("at(%Y-%m-%dT%H:%M:%S)", time.gmtime(time.time() + 2))
    with Tidings(settings=Settings(db=url)) as t:
        t.queues.create_queue("jobs", retention_s=86400)
        target_of = lambda i: Target(TargetKind.QUEUE, "jobs", input=f"s{i}")  # noqa: E731
        results = t.schedules.create_many(
            ScheduleSpec(f"s{i}", due, target_of(i),
                         action_after_completion=ActionAfterCompletion.DELETE)
            for i in range(N))
        assert sum(r.created for r in results) == N
    proc = serve(url, tmp_path)
    deadline = time.monotonic() + 120
    # One client, polled every 10 ms: a node drains these 100,000 in 2-3 s, and opening
    # a client per poll (as this test did) could miss the whole of it.
    with Tidings(settings=Settings(db=url)) as watcher:
        while queued(watcher) < N // 10:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        partial = queued(watcher)
    assert 0 < partial < N, "the kill landed mid-dispatch"
    proc = serve(url, tmp_path)
    try:
        deadline = time.monotonic() + 120
        while True:
            with Tidings(settings=Settings(db=url)) as t:
                left = t.store.count_schedules()
            if left == 0:
                break
            assert time.monotonic() < deadline, f"{left} schedules never fired"
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)  # once it is gone, nothing more can land: count now
    bodies: list[str] = []
    with Tidings(settings=Settings(db=url)) as t:
        while msgs := t.queues.receive("jobs", 10, wait_s=0, visibility_s=3600):
            bodies.extend(m.body for m in msgs)
    assert len(bodies) == N and len(set(bodies)) == N  # each exactly once
