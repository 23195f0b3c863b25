"""Several `tidings serve` / `tidings worker` processes on one PostgreSQL database split the
work and lose or double nothing: also when one is killed. (PostgreSQL killed or restarted
under the nodes: test_pg_faults.py, on a private cluster.)"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from conftest import pg_url
from tidings.client import Tidings
from tidings.model.messages import OutgoingMessage
from tidings.model.schedules import ActionAfterCompletion, ScheduleSpec, Target, TargetKind
from tidings.settings import Settings

pytestmark = pytest.mark.slow


@pytest.fixture
def pg(pg_schema: str) -> str:
    return pg_url(pg_schema)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Nodes:
    def __init__(self, url: str, tmp_path: Path) -> None:
        self.url = url
        self.tmp_path = tmp_path
        self.procs: list[tuple[subprocess.Popen[bytes], int]] = []

    def start(self, n: int, *extra: str, command: str = "serve") -> None:
        for _ in range(n):
            port = free_port()
            args = [sys.executable, "-m", "tidings", command, "--db", self.url]
            if command == "serve":
                args += ["--port", str(port)]
            env = {**os.environ,
                   "PYTHONPATH": f"{self.tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
            env.pop("PYTHONDONTWRITEBYTECODE", None)  # cached bytecode: faster starts
            log = open(self.tmp_path / f"node-{len(self.procs)}.log", "wb")  # noqa: SIM115
            self.procs.append((subprocess.Popen([*args, *extra], cwd=self.tmp_path, env=env,
                                                stdout=log, stderr=log), port))
            log.close()

    def fired_by_node(self) -> list[int]:
        shares = []
        for _, port in self.procs:
            text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
            found = re.findall(r'^tidings_schedule_firings_total\{target="queue"\} (\S+)$', text,
                               re.MULTILINE)
            shares.append(int(float(found[0])) if found else 0)
        return shares

    def wait_ready(self) -> None:
        for proc, port in self.procs:
            deadline = time.monotonic() + 90  # a loaded CI machine starts Python slowly
            while True:
                assert proc.poll() is None, "a node exited at start"
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline
                time.sleep(0.1)

    def wait_logged(self, text: str) -> None:
        """Wait until every node's log has `text` (a `tidings worker` has no port to ask)."""
        for i, (proc, _) in enumerate(self.procs):
            deadline = time.monotonic() + 90
            while text not in (self.tmp_path / f"node-{i}.log").read_text(errors="replace"):
                assert proc.poll() is None, "a node exited at start"
                assert time.monotonic() < deadline
                time.sleep(0.1)

    def stop(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc, _ in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture
def nodes(pg: str, tmp_path: Path) -> Iterator[Nodes]:
    n = Nodes(pg, tmp_path)
    yield n
    n.stop()


def make_schedules(url: str, n: int, spread_s: int) -> None:
    start = time.time() + 3
    with Tidings(settings=Settings(db=url)) as t:
        t.queues.create_queue("jobs", retention_s=86400)
        target = {}
        specs = []
        for i in range(n):
            when = time.strftime("at(%Y-%m-%dT%H:%M:%S)",
                                 time.gmtime(start + i * spread_s / n))
            target[i] = Target(TargetKind.QUEUE, "jobs", input=f"s{i}")
            specs.append(ScheduleSpec(f"s{i}", when, target[i],
                                      action_after_completion=ActionAfterCompletion.DELETE))
        assert sum(r.created for r in t.schedules.create_many(specs, chunk=10_000)) == n


def wait_until_queued(url: str, minimum: int, timeout: float = 120) -> None:
    """Until more than `minimum` firings are in the queue: mid-dispatch."""
    deadline = time.monotonic() + timeout
    while True:
        with Tidings(settings=Settings(db=url)) as t:
            if t.queues.describe("jobs").counts.visible > minimum:
                return
        assert time.monotonic() < deadline
        time.sleep(0.1)


def wait_all_fired(url: str, n: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with Tidings(settings=Settings(db=url)) as t:
            left = t.store.count_schedules()
        if left == 0:
            return
        assert time.monotonic() < deadline, f"{left} of {n} schedules never fired"
        time.sleep(0.5)


def queue_bodies(url: str) -> list[str]:
    bodies: list[str] = []
    with Tidings(settings=Settings(db=url)) as t:
        while msgs := t.queues.receive("jobs", 10, wait_s=0, visibility_s=3600):
            bodies.extend(m.body for m in msgs)
    return bodies


def test_three_nodes_fire_100k_schedules_exactly_once_and_share_the_work(
    nodes: Nodes, pg: str
) -> None:
    n = 100_000
    nodes.start(3)
    nodes.wait_ready()
    make_schedules(pg, n, spread_s=30)
    wait_all_fired(pg, n, timeout=240)
    # Each node counts a firing just after its transaction commits: wait for the last few.
    deadline = time.monotonic() + 10
    while sum(shares := nodes.fired_by_node()) < n and time.monotonic() < deadline:
        time.sleep(0.1)
    print(f"firings per node: {shares}")
    assert sum(shares) == n
    assert all(share > n * 0.05 for share in shares), shares  # every node took part
    nodes.stop()  # once they are gone, nothing more can land: count now
    bodies = queue_bodies(pg)
    assert len(bodies) == n and len(set(bodies)) == n


def test_kill_9_of_one_node_mid_dispatch_others_finish_exactly_once(
    nodes: Nodes, pg: str
) -> None:
    n = 60_000
    nodes.start(3)
    nodes.wait_ready()
    make_schedules(pg, n, spread_s=20)
    wait_until_queued(pg, n // 4)
    victim, _ = nodes.procs[0]
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    wait_all_fired(pg, n, timeout=240)
    nodes.stop()  # once they are gone, nothing more can land: count now
    bodies = queue_bodies(pg)
    assert len(bodies) == n and len(set(bodies)) == n


APP = textwrap.dedent("""
    import os
    import time
    from tidings import App
    app = App(queue="work")

    @app.handler("task")
    def task(job):
        time.sleep(0.001)  # a job that takes a moment: no node's prefetch swallows the queue
        with open(os.environ["JOB_LOG"], "a") as f:
            f.write(f"{os.getpid()} {job.id}\\n")
""")


def test_consumers_on_three_nodes_drain_one_queue_once_per_job(
    nodes: Nodes, pg: str, tmp_path: Path
) -> None:
    (tmp_path / "multiapp.py").write_text(APP)
    os.environ["JOB_LOG"] = str(tmp_path / "jobs.log")
    n = 3000
    try:
        with Tidings(settings=Settings(db=pg)) as t:
            t.queues.create_queue("work", visibility_timeout_s=60)
            # Every node consuming before the jobs arrive: one that started first could
            # otherwise drain the whole queue before the last one had imported its app.
            nodes.start(3, "--app", "multiapp:app", command="worker")
            nodes.wait_logged("tidings worker on")
            for base in range(0, n, 10):
                t.queues.send_batch("work", [OutgoingMessage(
                    json.dumps({"type": "task", "id": str(base + i)}), entry_id=str(i))
                    for i in range(10)])
            # a few jobs sent twice: the idempotent consumer runs them once
            for dup in range(0, 30):
                t.queues.send("work", json.dumps({"type": "task", "id": str(dup)}))
        deadline = time.monotonic() + 120
        while True:
            with Tidings(settings=Settings(db=pg)) as t:
                c = t.queues.describe("work").counts
            if c.visible + c.in_flight == 0:
                break
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        del os.environ["JOB_LOG"]
    lines = (tmp_path / "jobs.log").read_text().split("\n")
    ids = Counter(line.split()[1] for line in lines if line)
    assert set(ids) == {str(i) for i in range(n)} and max(ids.values()) == 1
    workers = Counter(line.split()[0] for line in lines if line)
    print(f"jobs per worker: {sorted(workers.values())}")
    assert len(workers) == 3
