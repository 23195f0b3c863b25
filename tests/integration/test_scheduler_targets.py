"""Schedules firing into real targets through a running node: webhooks over loopback HTTP,
function targets, retries and the schedule's dead-letter queue."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from parked import ParkedNotifier
from serving import run_until, running_server
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route as HttpRoute

from tidings import App
from tidings.client import Tidings, default_notifier
from tidings.clock import from_ms
from tidings.model.schedules import RetryPolicy, ScheduleSpec, Target, TargetKind
from tidings.node import Node
from tidings.notify.base import POLL_FALLBACK_S, SCHEDULES_CHANNEL, wake_horizon_ms
from tidings.settings import Settings
from tidings.targets.base import Route, Suppress
from tidings.targets.function import FunctionEvent


@pytest.fixture
def t(db_url: str) -> Iterator[Tidings]:
    """On the wall clock (conftest's `t` is frozen): schedules fire and webhooks retry in
    real time."""
    with Tidings(settings=Settings(db=db_url)) as client:
        yield client


class Receiver:
    """A webhook endpoint that answers from a script of statuses and records requests."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.lock = threading.Lock()

    async def handle(self, request: Request) -> PlainTextResponse:
        body = await request.body()
        with self.lock:
            self.requests.append((dict(request.headers), body))
            status = self.statuses.pop(0) if self.statuses else 200
        return PlainTextResponse("ok" if status < 300 else "nope", status_code=status)

    def app(self) -> Starlette:
        return Starlette(routes=[HttpRoute("/hook", self.handle, methods=["POST"])])


def run_node(t: Tidings, until: Callable[[], bool], *, app: App | None = None,
             timeout: float = 30.0) -> None:
    node = Node(t, Settings(db=t.settings.db, concurrency=4, shutdown_grace_s=2), app=app)
    run_until(node, until, timeout=timeout)


def just_now() -> str:
    """An at() expression for the current second (UTC): due at once, and recent enough
    for the default maximum event age."""
    return time.strftime("at(%Y-%m-%dT%H:%M:%S)", time.gmtime())


def dlq_messages(t: Tidings, name: str) -> list[Any]:
    return t.queues.receive(name, 10, wait_s=0)


def test_webhook_delivery_signed_and_retried(t: Tidings) -> None:
    receiver = Receiver([503, 500, 200])
    with running_server(receiver.app()) as base:
        t.schedules.create(ScheduleSpec(
            "hook", just_now(),
            Target(TargetKind.WEBHOOK, f"{base}/hook",
                   input='{"attempt": <aws.scheduler.attempt-number>,'
                         ' "id": "<aws.scheduler.execution-id>"}',
                   options={"secret": "s3cret", "timeout_s": 5})))
        run_node(t, lambda: len(receiver.requests) >= 3)
    assert len(receiver.requests) == 3
    headers, body = receiver.requests[-1]
    doc = json.loads(body)
    assert doc["attempt"] == 3 and headers["x-tidings-attempt"] == "3"
    assert headers["x-tidings-execution-id"] == doc["id"]
    assert headers["x-tidings-schedule"] == "default/hook"
    assert headers["x-tidings-scheduled-time"].endswith("Z")
    ts, mac = (part.split("=", 1)[1] for part in headers["x-tidings-signature"].split(","))
    expected = hmac.new(b"s3cret", ts.encode() + b"." + body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(mac, expected)


def test_webhook_permanent_failure_and_exhaustion_go_to_dlq(t: Tidings) -> None:
    t.queues.create_queue("sched-dlq")
    rejecting = Receiver([400] * 10)
    failing = Receiver([500] * 10)
    with running_server(rejecting.app()) as bad, running_server(failing.app()) as flaky:
        t.schedules.create(ScheduleSpec(
            "bad-request", just_now(),
            Target(TargetKind.WEBHOOK, f"{bad}/hook", input="{}",
                   dead_letter_queue="sched-dlq")))
        t.schedules.create(ScheduleSpec(
            "flaky", just_now(),
            Target(TargetKind.WEBHOOK, f"{flaky}/hook", input='{"n": 1}',
                   retry_policy=RetryPolicy(maximum_retry_attempts=1),
                   dead_letter_queue="sched-dlq")))
        run_node(t, lambda: t.queues.describe("sched-dlq").counts.visible >= 2)
    dead = {m.body: m.attributes for m in dlq_messages(t, "sched-dlq")}
    assert set(dead) == {"{}", '{"n": 1}'}
    permanent, exhausted = dead["{}"], dead['{"n": 1}']
    assert permanent["EXHAUSTED_RETRY_CONDITION"].string_value == "NonRetryableError"
    assert permanent["ERROR_CODE"].string_value == "HTTP400"
    assert exhausted["EXHAUSTED_RETRY_CONDITION"].string_value == "MaximumRetryAttempts"
    assert exhausted["RETRY_ATTEMPTS"].string_value == "1"
    assert len(rejecting.requests) == 1  # a 4xx is not retried
    assert len(failing.requests) == 2  # the first attempt and its one retry


def test_function_targets_enrich_suppress_route(t: Tidings) -> None:
    t.queues.create_queue("jobs")
    t.queues.create_queue("vip")
    app = App(queue="unused")
    seen: list[FunctionEvent] = []

    @app.function("prepare")
    def prepare(event: FunctionEvent) -> Any:
        seen.append(event)
        user = event.input["user"]
        if user == "unsubscribed":
            return Suppress("user unsubscribed")
        if user == "vip":
            return Route("vip", {"user": user, "tier": "gold"})
        return {**event.input, "name": user.title()}  # enrich, then the `then` target

    then = Target(TargetKind.QUEUE, "jobs").to_json()
    for user in ("alice", "unsubscribed", "vip"):
        t.schedules.create(ScheduleSpec(
            f"f-{user}", just_now(),
            Target(TargetKind.FUNCTION, "prepare", input=json.dumps({"user": user}),
                   options={"then": then})))
    run_node(t, lambda: len(seen) == 3 and t.queues.describe("jobs").counts.visible == 1
             and t.queues.describe("vip").counts.visible == 1
             and t.queues.describe("tidings-deliveries").counts.in_flight == 0, app=app)
    [enriched] = t.queues.receive("jobs", 10, wait_s=0)
    assert json.loads(enriched.body) == {"user": "alice", "name": "Alice"}
    [routed] = t.queues.receive("vip", 10, wait_s=0)
    assert json.loads(routed.body) == {"user": "vip", "tier": "gold"}
    assert {e.schedule for e in seen} == {"default/f-alice", "default/f-unsubscribed",
                                          "default/f-vip"}


def _lateness_of_one_created_while_idle(db_url: str, due_ms: Callable[[], int], *,
                                        poll_fallback_s: float = POLL_FALLBACK_S,
                                        ) -> tuple[float, bool]:
    """Run a node until its dispatcher idles, then create a one-shot due at `due_ms()`
    (from another thread, as an API call would) and receive what it fires. The long poll's
    own fallback is 30 s, far beyond any assertion: only a wake-up ends it early. Returns
    (seconds from the due instant to the receive, whether the creation sent a wake-up)."""
    notifier = ParkedNotifier(default_notifier(db_url))
    settings = Settings(db=db_url, poll_fallback_s=poll_fallback_s)
    with Tidings(settings=settings, notifier=notifier, fallback_poll_s=30) as t:
        t.queues.create_queue("jobs")
        t.schedules.create(ScheduleSpec("far", "at(2099-01-01T00:00:00)",
                                        Target(TargetKind.QUEUE, "jobs")))
        node = Node(t, settings)
        found: list[tuple[float, bool]] = []

        async def main() -> None:
            task = asyncio.create_task(node.run())
            parked = notifier.parked(SCHEDULES_CHANNEL)
            assert await asyncio.to_thread(parked.wait, 10), "the dispatcher never idled"
            seen = notifier.version(SCHEDULES_CHANNEL)
            due = due_ms()
            await asyncio.to_thread(t.schedules.create, ScheduleSpec.once(
                "created", from_ms(due), Target(TargetKind.QUEUE, "jobs", input="x")))
            woke = notifier.version(SCHEDULES_CHANNEL) != seen
            msgs = await t.queues.receive_async(node.bridge, "jobs", 1, wait_s=10)
            found.append((time.time() - due / 1000, woke))
            node.stop()
            await task
            assert [m.body for m in msgs] == ["x"]

        try:
            asyncio.run(main())
        finally:
            node.bridge.close()
    return found[0]


def test_new_earlier_schedule_wakes_the_dispatcher(db_url: str) -> None:
    """The dispatcher sleeps until the next due instant; creating an earlier schedule
    wakes it at once. Its idle poll is set far beyond the assertion, so the test fails if
    a notification does not arrive."""
    late, woke = _lateness_of_one_created_while_idle(
        db_url, lambda: time.time_ns() // 1_000_000 + 1_000, poll_fallback_s=30)
    assert woke and 0 <= late < 0.2


def test_a_schedule_due_beyond_the_wake_horizon_fires_on_time_unannounced(db_url: str,
                                                                          ) -> None:
    """Created due just past the horizon, a schedule sends no wake-up: the idle dispatcher
    finds it on its fallback poll (1 s here) and then sleeps until its instant, so it
    still fires within milliseconds of it, not a poll late."""
    late, woke = _lateness_of_one_created_while_idle(
        db_url, lambda: time.time_ns() // 1_000_000 + wake_horizon_ms(1.0) + 300,
        poll_fallback_s=1.0)
    assert not woke and 0 <= late < 0.25


def test_delivered_and_abandoned_firings_are_in_the_firing_history(t: Tidings) -> None:
    t.queues.create_queue("sched-dlq")
    app = App(queue="unused")
    app.function("quiet")(lambda event: Suppress("not today"))
    ok, rejecting = Receiver([200]), Receiver([400])
    with running_server(ok.app()) as good, running_server(rejecting.app()) as bad:
        made = [t.schedules.create(ScheduleSpec(name, just_now(), target)) for name, target in (
            ("hook-ok", Target(TargetKind.WEBHOOK, f"{good}/hook", input="{}")),
            ("hook-bad", Target(TargetKind.WEBHOOK, f"{bad}/hook", input="{}",
                                dead_letter_queue="sched-dlq")),
            ("quiet", Target(TargetKind.FUNCTION, "quiet", input="{}")))]
        run_node(t, lambda: all(t.firing_log.recent(s.id) for s in made), app=app)
    (hook_ok,), (hook_bad,), (quiet,) = (t.firing_log.recent(s.id) for s in made)
    assert (hook_ok.outcome, hook_ok.attempts, hook_ok.occurrence) == (
        "delivered", 1, made[0].next_fire_at)
    assert hook_bad.outcome == "dead-lettered" and hook_bad.attempts == 1
    assert hook_bad.detail is not None and hook_bad.detail.startswith("HTTP400")
    assert "NonRetryableError" in hook_bad.detail
    assert quiet.outcome == "suppressed"
