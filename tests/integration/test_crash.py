"""kill -9 at any point loses no accepted message: real subprocesses, real SQLite files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from tidings.client import Tidings
from tidings.settings import Settings

pytestmark = pytest.mark.slow

SENDER = textwrap.dedent("""
    import sys
    from tidings.client import connect
    from tidings.model.messages import OutgoingMessage
    t = connect(sys.argv[1])
    batch = 0
    while True:
        t.queues.send_batch("jobs", [OutgoingMessage(f"{batch}-{i}", entry_id=str(i))
                                     for i in range(10)])
        batch += 1
        print(batch, flush=True)  # printed only after the batch was acknowledged
""")


def test_kill_9_mid_batch_loses_no_acknowledged_message(db_url: str) -> None:
    url = db_url
    with Tidings(settings=Settings(db=url)) as t:
        t.queues.create_queue("jobs")
    proc = subprocess.Popen([sys.executable, "-c", SENDER, url], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    acknowledged = 0
    for line in proc.stdout:
        acknowledged = int(line)
        if acknowledged >= 400:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    for line in proc.stdout:  # acknowledgements still in the pipe when it died
        acknowledged = int(line)
    proc.stdout.close()
    with Tidings(settings=Settings(db=url)) as t:
        counts = t.queues.describe("jobs").counts
        stored = counts.visible
        bodies: set[str] = set()
        while True:
            msgs = t.queues.receive("jobs", 10, wait_s=0, visibility_s=600)
            if not msgs:
                break
            bodies.update(m.body for m in msgs)
    assert len(bodies) == stored  # the counter agrees with the rows
    # every acknowledged batch is there, whole; at most the one in progress also landed
    assert all(f"{b}-{i}" in bodies for b in range(acknowledged) for i in range(10))
    assert stored in (acknowledged * 10, (acknowledged + 1) * 10), (stored, acknowledged)


APP = textwrap.dedent("""
    import os, time
    from tidings import App
    app = App(queue="work")
    LOG = os.environ["JOB_LOG"]

    @app.handler("task")
    def task(job):
        time.sleep(0.01)
        with open(LOG, "a") as f:
            f.write(job.id + "\\n")
            f.flush()
            os.fsync(f.fileno())
""")


def _worker(url: str, tmp_path: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "JOB_LOG": str(tmp_path / "done.log"),
           "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.Popen(
        [sys.executable, "-m", "tidings", "worker", "--db", url, "--app", "crashapp:app",
         "--concurrency", "4"],
        env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_kill_9_of_worker_loses_no_job(db_url: str, tmp_path: Path) -> None:
    (tmp_path / "crashapp.py").write_text(APP)
    url = db_url
    n = 600
    with Tidings(settings=Settings(db=url)) as t:
        t.queues.create_queue("work", visibility_timeout_s=2)
        for i in range(0, n, 10):
            t.queues.send_batch("work", [
                __import__("tidings.model.messages", fromlist=["x"]).OutgoingMessage(
                    json.dumps({"type": "task", "id": str(i + k)}), entry_id=str(k))
                for k in range(10)])
    log = tmp_path / "done.log"
    proc = _worker(url, tmp_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if log.exists() and len(log.read_text().split()) >= n // 3:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(log.read_text().split())
    assert 0 < done_before < n
    recorded = _done_keys(url)  # jobs whose done record (and ack) committed before the kill
    proc = _worker(url, tmp_path)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            with Tidings(settings=Settings(db=url)) as t:
                c = t.queues.describe("work").counts
            if c.visible + c.in_flight + c.delayed == 0:
                break
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    ids = log.read_text().split()
    assert set(ids) == {str(i) for i in range(n)}  # nothing lost
    # a job whose done record was written never runs again
    runs = Counter(ids)
    assert recorded and all(runs[key.split(":", 1)[1]] == 1 for key in recorded)
    # only jobs running, or finished and not yet acknowledged, at the kill ran twice: at
    # most the concurrency (4) running plus what finished while the last group commit was
    # being written (handler threads go on with the next held jobs meanwhile): a few
    # jobs at this pace, more when a loaded machine slows the commit (up to 10 seen on
    # PostgreSQL with a load average of 13); 4 x concurrency leaves room for that
    assert len(ids) - n <= 4 + 16


def _done_keys(url: str) -> set[str]:
    """Read straight from the table: what the store considers done, as of now."""
    sql = "SELECT job_key FROM job_keys WHERE state = 'done'"
    if url.startswith("sqlite"):
        import sqlite3

        from tidings.store import sqlite_path

        with sqlite3.connect(sqlite_path(url)) as conn:
            return {r[0] for r in conn.execute(sql)}
    import psycopg

    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute(sql)}
