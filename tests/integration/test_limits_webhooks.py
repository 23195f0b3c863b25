"""Limits on webhook deliveries, against a real HTTP server over loopback: a 429 with
Retry-After pauses the host's key and burns no attempt, and a limit set for a host holds
its deliveries to it."""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Callable, Iterator

import pytest
from prometheus_client import generate_latest
from serving import run_until, running_server
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route as HttpRoute

from tidings.client import Tidings
from tidings.model.schedules import RetryPolicy, ScheduleSpec, Target, TargetKind
from tidings.node import Node
from tidings.runtime.metrics import REGISTRY
from tidings.settings import Settings


@pytest.fixture
def t(db_url: str) -> Iterator[Tidings]:
    with Tidings(settings=Settings(db=db_url)) as client:
        yield client


class Host:
    """Answers 429 with `Retry-After` (`retry_after()`: 1 second) to the first `pushbacks`
    requests, then 200 after `hold_s`; records each request's arrival, end and attempt
    header."""

    def __init__(self, pushbacks: int = 0, hold_s: float = 0.0,
                 retry_after: Callable[[], str] = lambda: "1") -> None:
        self.pushbacks = pushbacks
        self.retry_after = retry_after
        self.hold_s = hold_s
        self.log: list[tuple[float, float, str, int]] = []  # start, end, attempt, status
        self.running = 0
        self.peak = 0

    async def handle(self, request: Request) -> PlainTextResponse:
        start = time.monotonic()
        attempt = request.headers.get("x-tidings-attempt", "?")
        if self.pushbacks > 0:
            self.pushbacks -= 1
            self.log.append((start, start, attempt, 429))
            return PlainTextResponse("slow down", status_code=429,
                                     headers={"retry-after": self.retry_after()})
        self.running += 1
        self.peak = max(self.peak, self.running)
        await asyncio.sleep(self.hold_s)
        self.running -= 1
        self.log.append((start, time.monotonic(), attempt, 200))
        return PlainTextResponse("ok")

    def app(self) -> Starlette:
        return Starlette(routes=[HttpRoute("/hook", self.handle, methods=["POST"])])

    def delivered(self) -> int:
        return sum(1 for *_, status in self.log if status == 200)


def now_expression() -> str:
    return time.strftime("at(%Y-%m-%dT%H:%M:%S)", time.gmtime())


def webhook(name: str, base: str) -> ScheduleSpec:
    # No retries allowed: a pushback that counted as an attempt would end in the DLQ.
    return ScheduleSpec(name, now_expression(), Target(
        TargetKind.WEBHOOK, f"{base}/hook", input="{}", dead_letter_queue="hook-dlq",
        retry_policy=RetryPolicy(maximum_retry_attempts=0)))


def run_node(t: Tidings, until: object, timeout: float = 30.0) -> None:
    node = Node(t, Settings(db=t.settings.db, concurrency=8, shutdown_grace_s=2))
    run_until(node, until, timeout=timeout)  # type: ignore[arg-type]


def in_two_seconds() -> str:
    """An HTTP-date (IMF-fixdate) 1 to 2 s ahead (it has whole seconds)."""
    return email.utils.formatdate(time.time() + 2, usegmt=True)


@pytest.mark.parametrize("retry_after", [lambda: "1", in_two_seconds],
                         ids=["delay-seconds", "http-date"])
def test_a_429_with_retry_after_pauses_the_host_and_burns_no_attempt(
        t: Tidings, retry_after: Callable[[], str]) -> None:
    t.queues.create_queue("hook-dlq")
    host = Host(pushbacks=1, retry_after=retry_after)
    with running_server(host.app()) as base:
        t.schedules.create(webhook("first", base))
        run_node(t, lambda: len(host.log) >= 1)
        assert host.log[0][3] == 429
        # another delivery to the paused host waits for the pause too
        t.schedules.create(webhook("second", base))
        run_node(t, lambda: host.delivered() >= 2)
    pushed = host.log[0][0]
    delivered = [entry for entry in host.log if entry[3] == 200]
    assert all(start >= pushed + 0.9 for start, *_ in delivered)
    assert [attempt for _, _, attempt, _ in delivered] == ["1", "1"]
    assert t.queues.describe("hook-dlq").counts.visible == 0


def test_a_limit_set_for_a_host_holds_its_deliveries(t: Tidings) -> None:
    t.queues.create_queue("hook-dlq")
    host = Host(hold_s=0.2)
    t.limits.set("webhook:127.0.0.1", concurrency=1)
    with running_server(host.app()) as base:
        for n in range(5):
            t.schedules.create(webhook(f"s{n}", base))
        run_node(t, lambda: host.delivered() >= 5)
    assert host.peak == 1  # one at a time, though the node runs 8 deliveries at once
    assert t.queues.describe("hook-dlq").counts.visible == 0
    # the key's gauge is exported (slots in use, read from the store each second)
    assert 'tidings_limit_in_use{key="webhook:127.0.0.1"}' in generate_latest(
        REGISTRY).decode()
