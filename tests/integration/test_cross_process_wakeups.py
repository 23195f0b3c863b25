"""Work created by another process starts at once, not at the node's next poll.

The node's consumer poll is raised to 30 s here (`poller.POLL_S`), so a job found by
polling would start 30 s late: each test asserts a start within 5 s, which only a wake-up
(a datagram between the processes of one SQLite file, LISTEN/NOTIFY on PostgreSQL) or the
poller's timer for a delayed message can give."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from serving import run_with

from tidings.client import Tidings
from tidings.jobs.consumer import poller
from tidings.jobs.handlers import Handlers, Job
from tidings.node import Node
from tidings.settings import Settings

SENDER = """
import sys, time
from tidings.client import Tidings
from tidings.settings import Settings
with Tidings(settings=Settings(db=sys.argv[1])) as t:
    t.queues.send("jobs", '{"type": "hit", "id": "%s"}' % sys.argv[2],
                  delay_s=int(sys.argv[3]))
    print(time.time(), flush=True)
"""


@pytest.fixture
def t(db_url: str) -> Iterator[Tidings]:
    with Tidings(settings=Settings(db=db_url)) as client:
        client.queues.create_queue("jobs")
        yield client


def _run(t: Tidings, scenario_steps: list[tuple[str, int]]) -> dict[str, float]:
    """Run a node handling `hit` jobs while another process sends each (id, delay_s) in
    turn, the next once the previous has started; (id -> seconds from send to start)."""
    started: dict[str, float] = {}
    app = Handlers(queue="jobs")

    @app.handler("hit")
    def hit(job: Job) -> None:
        started[str(job.id)] = time.time()

    node = Node(t, Settings(db=t.settings.db, concurrency=2, shutdown_grace_s=1), app=app)
    latency: dict[str, float] = {}

    async def scenario(running: object) -> None:
        import asyncio

        await asyncio.sleep(1.0)  # the consumer is waiting on an empty queue
        for ident, delay in scenario_steps:
            out = await asyncio.to_thread(
                subprocess.run, [sys.executable, "-c", SENDER, t.settings.db, ident,
                                 str(delay)], capture_output=True, text=True, timeout=60,
                check=True)
            sent = float(out.stdout.split()[-1])
            deadline = time.monotonic() + 20
            while ident not in started and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert ident in started, f"job {ident} never started"
            latency[ident] = started[ident] - sent - delay

    run_with(node, scenario)  # type: ignore[arg-type]
    return latency


def test_a_job_sent_by_another_process_wakes_the_consumer(
        t: Tidings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(poller, "POLL_S", 30.0)
    latency = _run(t, [("a", 0), ("b", 0), ("c", 0)])
    assert max(latency.values()) < 5, latency  # by polling: up to 30 s


def test_a_delayed_job_starts_at_its_instant_without_a_poll(
        t: Tidings, monkeypatch: pytest.MonkeyPatch) -> None:
    """The send wakes the consumer, which finds nothing visible yet: it must sleep until
    the message becomes visible, not until its poll."""
    monkeypatch.setattr(poller, "POLL_S", 30.0)
    latency = _run(t, [("later", 1)])
    assert -0.05 < latency["later"] < 5, latency
