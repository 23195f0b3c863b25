"""`@app.task` through real databases: argument checks at send time, the job format, how
a job waits (a delayed message or a one-shot schedule), handles that cancel, and the
tasks run by the engine's own consumer."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pydantic
import pytest

import tidings
from tidings.client import Tidings
from tidings.clock import FrozenClock, from_ms
from tidings.errors import ValidationError
from tidings.jobs.handlers import Job
from tidings.node import Node
from tidings.settings import Settings
from tidings.tasks.sending import JOBS_GROUP


class Order(pydantic.BaseModel):
    sku: str
    quantity: int


@pytest.fixture
def app(t: Tidings) -> Iterator[tidings.App]:
    a = tidings.App(queue="jobs")
    a.bind(t)
    yield a
    a.close()


def test_arguments_are_checked_at_send_time_naming_the_argument(app: tidings.App,
                                                                t: Tidings) -> None:
    @app.task
    def generate(invoice_id: int, order: Order, note: str = "") -> None: ...

    with pytest.raises(ValidationError, match="invoice_id.*required"):
        generate.send(order=Order(sku="a", quantity=1))
    with pytest.raises(ValidationError, match="invoice_id.*integer"):
        generate.send(invoice_id="forty-two", order={"sku": "a", "quantity": 1})
    with pytest.raises(ValidationError, match="order.*quantity"):
        generate.send(invoice_id=1, order={"sku": "a"})
    with pytest.raises(ValidationError, match="colour.*not an argument"):
        generate.send(invoice_id=1, order={"sku": "a", "quantity": 1}, colour="red")

    @app.task
    def loose(value) -> None: ...  # type: ignore[no-untyped-def]

    with pytest.raises(ValidationError, match="value.*JSON value"):
        loose.send(value={1, 2})
    # Nothing of the refused sends was stored (the queue was not even needed).
    assert all(t.queues.describe(q).counts.visible == 0
               for q in ("jobs",) if q in [r.name for r in t.queues.list_queues()[0]])


def test_the_job_format_is_the_engines(app: tidings.App, t: Tidings) -> None:
    @app.task(name="invoice.generate")
    def generate(invoice_id: int, order: Order) -> None: ...

    handle = generate.send(42, order=Order(sku="x", quantity=2), job_id="inv-42")
    assert handle.job_id == "inv-42" and handle.message_id and handle.schedule is None
    [msg] = t.queues.receive("jobs", wait_s=0)
    assert json.loads(msg.body) == {"type": "invoice.generate", "id": "inv-42",
                                    "args": {"invoice_id": 42,
                                             "order": {"sku": "x", "quantity": 2}}}


def test_a_naive_datetime_is_refused_and_milliseconds_are_kept(app: tidings.App, t: Tidings,
                                                             clock: FrozenClock) -> None:
    @app.task
    def remind(user: str) -> None: ...

    with pytest.raises(ValidationError, match="when.*timezone-aware"):
        remind.send_at(datetime(2030, 1, 1, 9, 0), user="u1")
    when = from_ms(clock.now_ms() + 60_000 + 123)
    handle = remind.send_at(when, user="u1")
    assert handle.due_at == when and handle.message_id is not None
    [view] = t.queues.peek("jobs")[0]
    assert view.message.visible_at == clock.now_ms() + 60_123


def test_short_delays_are_delayed_messages_long_ones_schedules(app: tidings.App, t: Tidings,
                                                              clock: FrozenClock) -> None:
    @app.task
    def remind(user: str) -> None: ...

    soon = remind.send_in(timedelta(minutes=5), user="u1")
    later = remind.send_in(timedelta(days=30), user="u2", job_id="u2-month")
    assert soon.message_id is not None and soon.schedule is None
    assert later.schedule is not None and later.message_id is None
    [s] = t.schedules.list(group=JOBS_GROUP)[0]
    assert s.next_fire_at == clock.now_ms() + 30 * 86_400_000
    assert json.loads(s.spec.target.input or "") == {
        "type": "remind", "id": "u2-month", "args": {"user": "u2"}, "once": True}
    # the same job id again is the same schedule, not a second one
    again = remind.send_in(timedelta(days=30), user="u2", job_id="u2-month")
    assert again.schedule == later.schedule and len(t.schedules.list(group=JOBS_GROUP)[0]) == 1


def test_handles_cancel_only_what_is_not_due(app: tidings.App, t: Tidings,
                                             clock: FrozenClock) -> None:
    @app.task
    def remind(user: str) -> None: ...

    now = remind.send(user="a")
    soon = remind.send_in(60, user="b")
    later = remind.send_in(timedelta(days=10), user="c")
    assert not now.cancel()  # visible already: no longer the sender's to withdraw
    assert soon.cancel() and not soon.cancel()
    assert later.cancel() and not later.cancel()
    clock.advance(120_000)
    got = t.queues.receive("jobs", 10, wait_s=0)
    assert [json.loads(m.body)["args"]["user"] for m in got] == ["a"]
    assert t.schedules.list(group=JOBS_GROUP)[0] == []


def test_send_async_does_not_block_the_loop(app: tidings.App, t: Tidings) -> None:
    @app.task
    async def ping(n: int) -> None: ...

    async def main() -> list[str]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        runner = asyncio.create_task(ticker())
        handles = await asyncio.gather(*(ping.send_async(n=i) for i in range(20)))
        runner.cancel()
        assert ticks > 1  # the loop ran while the sends were on threads
        return [h.job_id for h in handles]

    assert len(set(asyncio.run(main()))) == 20


def test_tasks_run_in_a_node_and_jobs_from_any_client_reach_them(db_url: str) -> None:
    """A node runs the app; a task sent with `.send()` and one written as raw JSON (what
    boto3 or the HTTP API send) run the same function; a job id runs once; a sync and an
    async task both run; the task receives its pydantic model back."""
    app = tidings.App(queue="work")
    seen: list[Any] = []
    done = threading.Event()

    @app.task
    def ship(order: Order, job: Job) -> None:
        seen.append((job.id, order))
        if sum(x != "ping" for x in seen) >= 3:
            done.set()

    @app.task(queue="other")
    async def ping() -> None:
        seen.append("ping")

    t = Tidings(settings=Settings(db=db_url))
    app.bind(t)
    node = Node(t, Settings(db=db_url), app=app)

    async def main() -> None:
        runner = asyncio.create_task(node.run())
        ship.send(order=Order(sku="a", quantity=1), job_id="o-1")
        ship.send(order=Order(sku="a", quantity=1), job_id="o-1")  # same id: runs once
        await ping.send_async()
        t.queues.send("work", {"type": "ship", "id": "o-2",
                               "args": {"order": {"sku": "b", "quantity": 2}}})
        ship.send_in(0.2, order={"sku": "c", "quantity": 3}, job_id="o-3")
        deadline = time.monotonic() + 10
        while not done.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # a second o-1 would have run by now
        node.stop()
        await runner

    try:
        asyncio.run(main())
    finally:
        node.bridge.close()
        t.close()
    orders = sorted((i, o.sku, o.quantity) for i, o in (x for x in seen if x != "ping"))
    assert orders == [("o-1", "a", 1), ("o-2", "b", 2), ("o-3", "c", 3)]
    assert "ping" in seen


def test_the_app_opens_its_db_when_no_node_runs_it(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path}/app.db"
    app = tidings.App(queue="jobs", db=url)

    @app.task
    def hello(name: str) -> None: ...

    hello.send(name="x")
    app.close()
    with tidings.connect(url) as t:
        assert t.queues.describe("jobs").counts.visible == 1


def test_registration_mistakes_fail_at_import() -> None:
    app = tidings.App()

    @app.task
    def once() -> None: ...

    with pytest.raises(ValidationError, match="already registered"):
        app.task(name="once")(lambda: None)
    with pytest.raises(ValidationError, match="job_id"):
        app.task(lambda job_id: None)
    with pytest.raises(ValidationError, match="own"):
        app.task(name="a", queue="q", visibility_timeout_s=30)(lambda: None)
        app.task(name="b", queue="q", visibility_timeout_s=60)(lambda: None)
    assert datetime.now(UTC)  # (keeps the import honest)
