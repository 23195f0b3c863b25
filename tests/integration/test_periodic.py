"""Periodic jobs: `@app.cron` / `@app.rate` become schedules at start, idempotently by
name, removed with their decorator, and three nodes on one database fire each occurrence
once (real SQLite file and real PostgreSQL; one shared frozen clock steps the minutes)."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

import tidings
from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.errors import ValidationError
from tidings.jobs.handlers import Job
from tidings.node import Node
from tidings.settings import Settings
from tidings.tasks.periodic import PERIODIC_GROUP, cron_expression


@pytest.mark.parametrize(("given", "aws"), [
    ("0 9 ? * MON-FRI *", "cron(0 9 ? * MON-FRI *)"),
    ("cron(0 2 * * ? *)", "cron(0 2 * * ? *)"),
    ("*/5 * * * *", "cron(*/5 * * * ? *)"),
    ("30 8 * * 1-5", "cron(30 8 ? * 2,3,4,5,6 *)"),
    ("0 0 * * 0", "cron(0 0 ? * 1 *)"),
    ("0 0 * * 7", "cron(0 0 ? * 1 *)"),
    ("0 0 * * 5-7", "cron(0 0 ? * 1,6,7 *)"),
    ("0 0 * * */2", "cron(0 0 ? * 1,3,5,7 *)"),
    ("0 0 1 * *", "cron(0 0 1 * ? *)"),
    ("0 12 * * sat", "cron(0 12 ? * SAT *)"),
])
def test_standard_cron_lines_become_eventbridge_expressions(given: str, aws: str) -> None:
    assert cron_expression(given) == aws


def test_what_eventbridge_cannot_say_is_refused_at_import() -> None:
    app = tidings.App()
    with pytest.raises(ValidationError, match="both a day of month and a day of week"):
        app.cron("0 0 1 * 1")
    with pytest.raises(ValidationError, match="5-field"):
        app.cron("0 0 1 *")
    with pytest.raises(ValidationError):
        app.rate("5 fortnights")(lambda: None)
    with pytest.raises(ValidationError, match="required arguments"):
        app.rate("5 minutes", name="needs")(lambda user: None)


def test_periodic_schedules_are_put_at_start_and_removed_with_their_decorator(
        t: Tidings) -> None:
    first = tidings.App(queue="jobs")

    @first.cron("0 9 ? * MON-FRI *", tz="Europe/Paris")
    def standup() -> None: ...

    @first.rate("5 minutes")
    def poll() -> None: ...

    @first.cron("0 2 * * *", name="nightly")
    def reconcile() -> None: ...

    first.start(t)
    first.start(t)  # a second node, or a restart: nothing changes
    stored = {s.name: s for s in t.schedules.list(group=PERIODIC_GROUP)[0]}
    assert sorted(stored) == ["nightly", "poll", "standup"]
    assert stored["poll"].spec.expression == "rate(5 minutes)"
    assert stored["nightly"].spec.expression == "cron(0 2 * * ? *)"
    assert stored["standup"].spec.timezone == "Europe/Paris"
    assert json.loads(stored["nightly"].spec.target.input or "") == {
        "type": "nightly", "id": "nightly", "args": {}}

    # the next release drops `poll` and moves `nightly` to 03:00
    second = tidings.App(queue="jobs")

    @second.cron("0 3 * * *", name="nightly")
    def reconcile2() -> None: ...

    before = stored["nightly"].id
    second.start(t)
    after = {s.name: s for s in t.schedules.list(group=PERIODIC_GROUP)[0]}
    assert sorted(after) == ["nightly"]  # poll and standup went with their decorators
    assert after["nightly"].id == before and after["nightly"].spec.expression == \
        "cron(0 3 * * ? *)"
    first.close()
    second.close()


def test_three_nodes_fire_each_occurrence_once(db_url: str) -> None:
    clock = FrozenClock(1_800_000_000_000 - 1_800_000_000_000 % 60_000)  # on a minute
    app = tidings.App(queue="ticks")
    runs: list[tuple[str | None, int]] = []
    lock = threading.Lock()

    @app.rate("1 minute")
    def tick(job: Job) -> None:
        with lock:
            runs.append((job.scheduled_time, threading.get_ident()))

    settings = Settings(db=db_url, poll_fallback_s=0.05)
    clients = [Tidings(settings=settings, clock=clock) for _ in range(3)]
    nodes = [Node(c, settings, app=app) for c in clients]

    async def main() -> None:
        tasks = [asyncio.create_task(n.run()) for n in nodes]
        for _ in range(5):
            clock.advance(60_000)
            deadline = time.monotonic() + 10
            want = _ + 1
            while time.monotonic() < deadline:
                with lock:
                    if len({r[0] for r in runs}) >= want:
                        break
                await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # a second firing of any occurrence would show by now
        for n in nodes:
            n.stop()
        await asyncio.gather(*tasks)

    try:
        asyncio.run(main())
    finally:
        for n, c in zip(nodes, clients, strict=True):
            n.bridge.close()
            c.close()
        app.close()
    occurrences = [r[0] for r in runs]
    assert len(occurrences) == 5 and len(set(occurrences)) == 5, runs
