"""Work created by another process starts at once, not at the node's next poll.

Real processes: a `tidings serve --app` node, and a sender process per step, as a web
process would send (a job now, a job due in 300 ms, a schedule due in 300 ms). Both have
`TIDINGS_POLL_FALLBACK_S=60`: the node's consumers and dispatcher look for work no wake-up
announced only every 60 s, so each step asserts a start within 3 s, which only a wake-up
(a datagram between the processes of one SQLite file, LISTEN/NOTIFY on PostgreSQL) or a
timer set for a delayed message's instant can give. With the wake-ups broken, each step
waits for that poll, and fails.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

FALLBACK_S = 60
WELL_BELOW_S = 3.0  # a start later than this came from a poll, not a wake-up

APP = """
import os, time
import tidings

app = tidings.App(queue="xp", db=os.environ["XP_DB"])

@app.task
def hit(tag: str) -> None:
    with open(os.environ["XP_LOG"], "a") as f:
        f.write(f"{tag} {time.time()}\\n")
"""

#: One step of the web process: prints the instant the job should start (the send's
#: return, or the due instant), after the send returned.
SENDER = """
import sys, time
from datetime import UTC, datetime
from xpnode import app, hit

step, tag = sys.argv[1], sys.argv[2]
if step == "send":
    hit.send(tag=tag)
    print(time.time())
elif step == "send_in":
    due_ms = time.time_ns() // 1_000_000 + 300
    hit.send_at(datetime.fromtimestamp(due_ms / 1000, UTC), tag=tag)
    print(due_ms / 1000)
else:
    from tidings.model.schedules import ScheduleSpec, Target, TargetKind
    from tidings.tasks.sending import job_body
    due_ms = time.time_ns() // 1_000_000 + 300
    app.client().schedules.create(ScheduleSpec.once(
        tag, datetime.fromtimestamp(due_ms / 1000, UTC),
        Target(TargetKind.QUEUE, "xp", input=job_body("hit", tag, {"tag": tag}))))
    print(due_ms / 1000)
app.close()
"""


@pytest.fixture
def node(db_url: str, tmp_path: Path) -> Iterator[Callable[[str, str], float]]:
    """A node serving the app; yields `step(kind, tag)`, which runs one sender process
    and returns the seconds from when the job should have started to when it started."""
    (tmp_path / "xpnode.py").write_text(APP)
    log = tmp_path / "ran.log"
    env = {**os.environ, "XP_DB": db_url, "XP_LOG": str(log),
           "TIDINGS_POLL_FALLBACK_S": str(FALLBACK_S),
           "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with open(tmp_path / "serve.log", "wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "tidings", "serve", "--db", db_url, "--app",
             "xpnode:app", "--port", str(port)], cwd=tmp_path, env=env, stdout=out,
            stderr=out)

    def started(tag: str) -> float | None:
        lines = log.read_text().splitlines() if log.exists() else []
        return next((float(t) for line in lines for name, t in [line.split()]
                     if name == tag), None)

    def step(kind: str, tag: str) -> float:
        out = subprocess.run([sys.executable, "-c", SENDER, kind, tag], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        expected = float(out.stdout.split()[-1])
        deadline = time.monotonic() + FALLBACK_S / 2
        while (at := started(tag)) is None:
            assert time.monotonic() < deadline, f"{tag} did not start within " \
                f"{FALLBACK_S / 2} s: no wake-up reached the node"
            time.sleep(0.02)
        return at - expected

    try:
        deadline = time.monotonic() + 60
        while not _ready(port):
            assert server.poll() is None, (tmp_path / "serve.log").read_text()
            assert time.monotonic() < deadline, "the node never got ready"
            time.sleep(0.1)
        # The first job may be found by the consumer's first receive; every later one
        # comes while the consumer (and the dispatcher) sleep their 60 s.
        step("send", "warm")
        yield step
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def _ready(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health/ready", timeout=1
                         ).status_code == 200
    except httpx.HTTPError:
        return False


def test_work_from_another_process_starts_at_once(
        node: Callable[[str, str], float]) -> None:
    """Three steps on one node (each starts a sender process): a job sent now; a job due
    in 300 ms, whose send wakes the consumer, which finds nothing visible yet and must
    sleep until the message becomes visible, not until its poll; a schedule due in 300 ms,
    whose creation wakes the sleeping dispatcher (on SQLite in the node's dispatcher
    process), whose firing wakes the node's consumer."""
    latencies = [node("send", f"now-{i}") for i in range(3)]
    assert max(latencies) < WELL_BELOW_S, latencies  # by polling: up to 60 s
    late = node("send_in", "later")
    assert -0.05 < late < WELL_BELOW_S, late
    late = node("schedule", "scheduled")
    assert -0.05 < late < WELL_BELOW_S, late
