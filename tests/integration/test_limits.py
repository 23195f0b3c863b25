"""Downstream limits with real `tidings worker` processes on one database (a PostgreSQL
schema, or one SQLite file): the limit holds across nodes, a node killed -9 while holding
slots gives them back with its leases, `RetryAfter` pauses its key without burning an
attempt, a change made with the CLI is obeyed by the running nodes, and no limited job is
lost or run twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conftest import BACKENDS, pg_url
from tidings.client import Tidings
from tidings.settings import Settings

pytestmark = pytest.mark.slow

APP = """
import os, time, tidings
app = tidings.App(queue="lim", concurrency=8)
# two receives each (one for a killed node): a job held back many times that counted
# as an attempt each time would go to the DLQ
app.declare_queue("lim", visibility_timeout_s={visibility}, max_receive_count=2)
LOG = os.environ["LIMIT_LOG"]

def note(*parts):
    with open(LOG, "a") as f:
        f.write(" ".join(str(p) for p in parts) + "\\n")

@app.task(limit=tidings.Limit(concurrency=2, key="tenant", name="work"))
def work(tenant: str, n: int, sleep: float = 0.2) -> None:
    note("start", tenant, n, os.getpid(), time.time())
    time.sleep(sleep)
    note("end", tenant, n, os.getpid(), time.time())

@app.task(limit=tidings.Limit(name="live", concurrency=1))
def live(n: int) -> None:
    note("start", "live", n, os.getpid(), time.time())
    time.sleep(0.3)
    note("end", "live", n, os.getpid(), time.time())

@app.task(limit=tidings.Limit(name="pushy", concurrency=5))
def pushy(n: int) -> None:
    marker = LOG + ".pushed"
    if not os.path.exists(marker):
        open(marker, "w").close()
        note("pushback", n, time.time())
        raise tidings.RetryAfter(1.5)
    note("ran", n, time.time())
"""


def wait_for(check: Callable[[], bool], timeout: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


class Workers:
    def __init__(self, db: str, tmp: Path) -> None:
        self.db, self.tmp = db, tmp
        self.log = tmp / "starts.log"
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, n: int) -> None:
        env = {**os.environ, "LIMIT_LOG": str(self.log),
               "PYTHONPATH": f"{self.tmp}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        for i in range(n):
            out = open(self.tmp / f"worker-{len(self.procs)}-{i}.log", "wb")  # noqa: SIM115
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "tidings", "worker", "--db", self.db, "--app",
                 "limapp:app"], cwd=self.tmp, env=env, stdout=out, stderr=out))
            out.close()

    def lines(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [line.split() for line in self.log.read_text().splitlines() if line]

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


@pytest.fixture(params=BACKENDS)
def workers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Workers]:
    if request.param == "sqlite":
        db = f"sqlite:///{tmp_path}/t.db"
    else:
        db = pg_url(request.getfixturevalue("pg_schema"))
    visibility = getattr(request, "param_visibility", 4)
    (tmp_path / "limapp.py").write_text(textwrap.dedent(APP.format(visibility=visibility)))
    w = Workers(db, tmp_path)
    try:
        yield w
    finally:
        w.stop()


def max_concurrent(lines: list[list[str]], tenant: str) -> int:
    events = sorted((float(p[4]), 1 if p[0] == "start" else -1)
                    for p in lines if p[0] in ("start", "end") and p[1] == tenant)
    running = peak = 0
    for _, step in events:  # an end at the same instant as a start comes first
        running += step
        peak = max(peak, running)
    return peak


def send(db: str, jobs: list[tuple[str, int]], sleep: float = 0.2) -> None:
    with Tidings(settings=Settings(db=db)) as t:
        for tenant, n in jobs:
            t.queues.send("lim", json.dumps({"type": "work", "id": f"{tenant}-{n}", "args": {
                "tenant": tenant, "n": n, "sleep": sleep}}))


def test_a_keyed_concurrency_holds_across_nodes_and_slots_come_back_after_a_kill(
        workers: Workers) -> None:
    workers.start(3)
    wait_for(lambda: (workers.tmp / "worker-0-0.log").exists()
             and "tidings worker on" in (workers.tmp / "worker-0-0.log").read_text(),
             what="the first worker")
    jobs = [(tenant, n) for n in range(12) for tenant in ("a", "b")]
    send(workers.db, jobs)

    def ended() -> int:
        return sum(1 for p in workers.lines() if p[0] == "end")

    wait_for(lambda: ended() >= 4, what="jobs to run")
    # kill -9 a node while it holds slots: they come back with its leases (4 s)
    victim = next(p for p in workers.procs)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    wait_for(lambda: {(p[1], int(p[2])) for p in workers.lines() if p[0] == "end"}
             >= set(jobs), timeout=120, what="every job to end")
    lines = workers.lines()
    # each tenant had its own limit of 2, on every node together
    assert max_concurrent([p for p in lines if int(p[3]) != victim.pid], "a") <= 2
    assert max_concurrent([p for p in lines if int(p[3]) != victim.pid], "b") <= 2
    # (a job the killed node ran to its end, and died before acknowledging, runs again:
    # at least once; the others exactly once)
    ends = Counter((p[1], int(p[2])) for p in lines if p[0] == "end"
                   and int(p[3]) != victim.pid)
    assert all(count == 1 for count in ends.values()), "a job ran to its end twice"
    # both tenants ran side by side: a limit per key, not one for all
    assert max_concurrent(lines, "a") + max_concurrent(lines, "b") >= 3
    with Tidings(settings=Settings(db=workers.db)) as t:
        assert t.queues.describe("lim").counts.visible == 0
        assert t.queues.describe("lim-dlq").counts.visible == 0  # waiting burnt no attempt
        assert {v.key: v.setting.concurrency for v in t.limits.list()
                if v.setting is not None} == {"work": 2, "pushy": 5, "live": 1}


def test_retry_after_pauses_the_key_and_burns_no_attempt(workers: Workers) -> None:
    workers.start(2)
    with Tidings(settings=Settings(db=workers.db)) as t:
        wait_for(lambda: any(v.key == "pushy" for v in t.limits.list()), what="a worker")
        t.queues.send("lim", '{"type": "pushy", "id": "p0", "args": {"n": 0}}')
        wait_for(lambda: any(p[0] == "pushback" for p in workers.lines()), what="pushback")
        pushed_at = float(next(p for p in workers.lines() if p[0] == "pushback")[2])
        for n in range(1, 4):
            t.queues.send("lim", json.dumps({"type": "pushy", "id": f"p{n}", "args": {"n": n}}))
        wait_for(lambda: sum(p[0] == "ran" for p in workers.lines()) >= 4, what="all ran")
        ran = [p for p in workers.lines() if p[0] == "ran"]
        # nothing of the paused key ran before the pause ended (1.5 s, less clock slack)
        assert min(float(p[2]) for p in ran) >= pushed_at + 1.4
        assert sorted(int(p[1]) for p in ran) == [0, 1, 2, 3]
        # the pushed-back job's attempt was not counted (two receives allowed): no DLQ
        assert t.queues.describe("lim").counts.visible == 0
        assert t.queues.describe("lim-dlq").counts.visible == 0


def cli(db: str, *args: str) -> tuple[float, float]:
    """Run `tidings limit …` as a user does; the instants it started and returned."""
    started = time.time()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    r = subprocess.run([sys.executable, "-m", "tidings", "limit", *args, "--db", db],
                       capture_output=True, text=True, env=env, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    return started, time.time()


def test_a_change_from_the_cli_is_obeyed_by_running_nodes(workers: Workers) -> None:
    workers.start(2)
    with Tidings(settings=Settings(db=workers.db)) as t:
        wait_for(lambda: any(v.key == "live" for v in t.limits.list()), what="a worker")
        for n in range(40):
            t.queues.send("lim", json.dumps({"type": "live", "id": f"l{n}", "args": {"n": n}}))

    def live(kind: str) -> list[float]:
        return [float(p[4]) for p in workers.lines() if p[0] == kind and p[1] == "live"]

    wait_for(lambda: len(live("end")) >= 3, what="the first jobs")
    raised, _ = cli(workers.db, "set", "live", "--concurrency", "3")
    before = [p for p in workers.lines() if p[1] == "live" and float(p[4]) < raised]
    assert max_concurrent(before, "live") == 1
    # the nodes read the change within a second: three at once from then on
    wait_for(lambda: max_concurrent(workers.lines(), "live") == 3, what="3 at once")
    _, paused = cli(workers.db, "pause", "live", "--until", "4s")
    wait_for(lambda: len(live("end")) >= 40, timeout=120, what="every job")
    lines = workers.lines()
    assert max_concurrent(lines, "live") == 3
    # nothing started while the pause held on every node (read within a second)
    # (the pause ends 4 s after the command began, at least 4 s after it returned - the
    # command's own start-up)
    assert not [s for s in live("start") if paused + 1.0 <= s <= paused + 2.5]
    ends = Counter(p[2] for p in lines if p[0] == "end" and p[1] == "live")
    assert sorted(ends.values()) == [1] * 40  # none lost, none run twice
