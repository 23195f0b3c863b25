"""Consumers run by a node over a real SQLite store, in real time."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from serving import run_until

from tidings import App, Job
from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.model.messages import OutgoingMessage
from tidings.model.queues import RedrivePolicy
from tidings.model.schedules import ScheduleSpec, Target, TargetKind
from tidings.node import Node
from tidings.settings import Settings


@pytest.fixture
def t(db_url: str) -> Iterator[Tidings]:
    """On the wall clock (conftest's `t` is frozen): consumers and heartbeats run in real
    time."""
    with Tidings(settings=Settings(db=db_url)) as client:
        yield client


def run_node_until(t: Tidings, app: App, done: Callable[[], bool], *, timeout: float = 20.0,
                   grace: float = 5.0) -> Node:
    settings = Settings(db=t.settings.db, concurrency=4, shutdown_grace_s=grace,
                        sweep_interval_s=0.2)
    node = Node(t, settings, app=app)

    run_until(node, done, timeout=timeout, poll_s=0.02)
    return node


def job(type_: str, id_: object, **extra: object) -> str:
    return json.dumps({"type": type_, "id": id_, **extra})


def test_handlers_run_once_per_job_id(t: Tidings) -> None:
    app = App(queue="jobs")
    calls: Counter[str] = Counter()

    @app.handler("invoice.generate")
    def generate(j: Job) -> None:
        calls[j.id] += 1

    @app.handler("export.build")
    async def export(j: Job) -> None:
        await asyncio.sleep(0.01)
        calls["export-" + j.id] += 1

    t.queues.create_queue("jobs")
    for i in range(20):
        t.queues.send("jobs", job("invoice.generate", i))
    t.queues.send("jobs", job("invoice.generate", 7))  # a duplicate delivery of job 7
    t.queues.send("jobs", job("export.build", "a"))
    run_node_until(t, app, lambda: t.queues.describe("jobs").counts.visible == 0
                   and t.queues.describe("jobs").counts.in_flight == 0)
    assert calls["7"] == 1
    assert sum(calls.values()) == 21 and calls["export-a"] == 1
    counts = t.queues.describe("jobs").counts
    assert (counts.visible, counts.in_flight) == (0, 0)


def test_failures_retry_with_backoff_then_dead_letter_with_error(t: Tidings) -> None:
    t.queues.create_queue("jobs-dlq")
    t.queues.create_queue("jobs", redrive_policy=RedrivePolicy("jobs-dlq", 3))
    app = App(queue="jobs", retry_base_s=0)
    attempts: list[int] = []

    @app.handler("flaky")
    def flaky(j: Job) -> None:
        attempts.append(j.attempt)
        raise RuntimeError(f"downstream unavailable (attempt {j.attempt})")

    t.queues.send("jobs", job("flaky", 1))
    run_node_until(t, app, lambda: t.queues.describe("jobs-dlq").counts.visible == 1)
    assert attempts == [1, 2, 3]
    [dead] = t.queues.receive("jobs-dlq", wait_s=0)
    assert dead.last_error == "RuntimeError: downstream unavailable (attempt 3)"
    assert dead.dead_letter_source == "arn:aws:sqs:us-east-1:000000000000:jobs"


def test_backoff_grows_exponentially_with_jitter() -> None:
    app = App(retry_base_s=2, retry_max_s=60)
    for attempt, ceiling in [(1, 2), (2, 4), (3, 8), (4, 16), (10, 60)]:
        values = {app.backoff_s(attempt) for _ in range(200)}
        assert min(values) >= ceiling // 2 and max(values) <= ceiling
    assert len({app.backoff_s(6) for _ in range(200)}) > 5  # jittered, not lockstep


def test_unknown_type_and_bad_body_fail_to_dlq(t: Tidings) -> None:
    t.queues.create_queue("dlq")
    t.queues.create_queue("jobs", redrive_policy=RedrivePolicy("dlq", 1))
    app = App(queue="jobs", retry_base_s=0)

    @app.handler("known")
    def known(j: Job) -> None: ...

    t.queues.send("jobs", job("unknown", 1))
    t.queues.send("jobs", "not json")
    run_node_until(t, app, lambda: t.queues.describe("dlq").counts.visible == 2)
    errors = sorted(m.last_error or "" for m in t.queues.receive("dlq", 10, wait_s=0))
    assert "no handler registered for job type 'unknown'" in errors[0] + errors[1]
    assert any("is not JSON" in e for e in errors)


def test_heartbeat_extends_visibility_of_long_jobs(t: Tidings) -> None:
    t.queues.create_queue("jobs", visibility_timeout_s=2)
    app = App(queue="jobs")
    runs: list[str] = []
    stolen: list[int] = []

    @app.handler("slow")
    async def slow(j: Job) -> None:
        runs.append(j.id)
        for _ in range(9):  # 4.5 s: more than twice the visibility timeout
            await asyncio.sleep(0.5)
            with Tidings(settings=Settings(db=t.settings.db)) as other:
                stolen.extend(m.receive_count for m in other.queues.receive("jobs", wait_s=0))

    t.queues.send("jobs", job("slow", "s"))
    run_node_until(t, app, lambda: t.queues.describe("jobs").counts.in_flight == 0
                   and bool(runs))
    assert runs == ["s"] and stolen == []


def test_graceful_shutdown_releases_unfinished_work(t: Tidings) -> None:
    t.queues.create_queue("jobs", visibility_timeout_s=600)
    app = App(queue="jobs")
    started = threading.Event()

    @app.handler("forever")
    async def forever(j: Job) -> None:
        started.set()
        await asyncio.sleep(60)

    t.queues.send("jobs", job("forever", 1))
    begin = time.monotonic()
    run_node_until(t, app, started.is_set, grace=0.3)
    assert time.monotonic() - begin < 10
    # released, not lost: visible again at once despite the 600 s visibility timeout
    [m] = t.queues.receive("jobs", wait_s=0)
    assert m.receive_count == 2


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_shutdown_gives_back_jobs_handed_over_but_not_begun(t: Tidings, kind: str) -> None:
    """Handler threads and async runners pull ready jobs from one queue, which can hold
    more than `concurrency`: at shutdown those not begun are given back, never run."""
    t.queues.create_queue("jobs", visibility_timeout_s=600)
    app = App(queue="jobs", concurrency=2)
    release = threading.Event()
    ran: list[str] = []
    n = 30

    if kind == "sync":
        @app.handler("slow")
        def slow(j: Job) -> None:
            ran.append(j.id)
            release.wait(10)
    else:
        @app.handler("slow")
        async def slow_async(j: Job) -> None:
            ran.append(j.id)
            while not release.is_set():
                await asyncio.sleep(0.01)

    for i in range(0, n, 10):
        t.queues.send_batch("jobs", [OutgoingMessage(job("slow", i + k), entry_id=str(k))
                                     for k in range(10)])
    # The two running jobs finish 0.5 s after the node is told to stop (within the grace
    # period): by then every job not begun has been taken back.
    releaser = threading.Timer(0.5, release.set)

    def two_running() -> bool:
        if len(ran) >= 2 and not releaser.is_alive():
            releaser.start()
        return len(ran) >= 2

    try:
        node = run_node_until(t, app, two_running, grace=5.0)
    finally:
        releaser.cancel()
        release.set()
    assert len(ran) == 2  # only the two that had begun: the rest were handed back
    assert node.consumer is not None and node.consumer.handled == 2
    counts = t.queues.describe("jobs").counts
    # given back at once, despite the 600 s visibility timeout
    assert (counts.visible, counts.in_flight) == (n - 2, 0)


def test_a_recurring_schedules_job_runs_at_every_occurrence(db_url: str) -> None:
    """The nightly example of docs/jobs.md: a fixed id in the input, fired again and again."""
    clock = FrozenClock(1_800_000_000_000)
    with Tidings(settings=Settings(db=db_url), clock=clock) as t:
        t.queues.create_queue("jobs-dlq")
        t.queues.create_queue("jobs", redrive_policy=RedrivePolicy("jobs-dlq", 5))
        app = App(queue="jobs")
        runs: list[str | None] = []

        @app.handler("reconcile")
        def reconcile(j: Job) -> None:
            runs.append(j.scheduled_time)

        t.schedules.create(ScheduleSpec("nightly", "rate(1 minute)", Target(
            TargetKind.QUEUE, "jobs", input=job("reconcile", "nightly"))))
        occurrences = 3

        seen = [-1]

        def advance_and_wait() -> bool:
            if len(runs) >= occurrences:
                return True
            if len(runs) != seen[0]:  # the last occurrence ran: make the next one due
                seen[0] = len(runs)
                clock.advance(60_000)
            return False

        run_node_until(t, app, advance_and_wait, timeout=30)
        assert len(runs) == occurrences and len(set(runs)) == occurrences and None not in runs
