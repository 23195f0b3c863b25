"""Limits on schedule targets, with a real node: a queue target's firings held back by a
rate keep their occurrence (fired later, once, as attempt 1, none lost); a function
target's deliveries by a concurrency; an email target's by its recipient's domain and by
the SMTP relay (a real SMTP server over loopback)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from email_relay import Relay, running_relay
from prometheus_client import generate_latest
from serving import run_until

from tidings.client import Tidings
from tidings.model.email import DeliveryState
from tidings.model.schedules import ScheduleSpec, Target, TargetKind
from tidings.node import Node
from tidings.runtime.metrics import REGISTRY
from tidings.settings import Settings
from tidings.tasks.app import App


@pytest.fixture
def t(db_url: str) -> Iterator[Tidings]:
    """On the wall clock: the node fires and delivers in real time."""
    with Tidings(settings=Settings(db=db_url, public_url="https://mail.example.test")) as c:
        yield c


def just_now() -> str:
    return time.strftime("at(%Y-%m-%dT%H:%M:%S)", time.gmtime())


def run_node(t: Tidings, until: Callable[[], bool], *, app: App | None = None,
             timeout: float = 30.0, **settings: Any) -> None:
    node = Node(t, Settings(db=t.settings.db, concurrency=8, shutdown_grace_s=2,
                            **settings), app=app)
    run_until(node, until, timeout=timeout)


def held_firings(kind: str) -> float:
    for family in REGISTRY.collect():
        if family.name == "tidings_limit_held_firings":
            return sum(s.value for s in family.samples
                       if s.name.endswith("_total") and s.labels.get("kind") == kind)
    return 0.0


def busiest(instants_ms: list[int], window_ms: int) -> int:
    """The most instants within any window of `window_ms`."""
    ordered = sorted(instants_ms)
    return max(sum(1 for b in ordered[i:] if b - a < window_ms)
               for i, a in enumerate(ordered))


def test_a_queue_targets_firings_wait_for_its_rate_and_keep_their_occurrence(
        t: Tidings) -> None:
    t.queues.create_queue("orders")
    t.limits.set("queue:orders", rate="2/s")
    before = held_firings("queue")
    made = [t.schedules.create(ScheduleSpec(f"o{n}", just_now(), Target(
        TargetKind.QUEUE, "orders", input=json.dumps({"n": n})))) for n in range(6)]
    run_node(t, lambda: t.queues.describe("orders").counts.visible == 6)
    got = t.queues.receive("orders", 10, wait_s=0)
    assert sorted(json.loads(m.body)["n"] for m in got) == list(range(6))  # once each
    assert busiest([m.sent_at for m in got], 1000) <= 2  # never above the rate
    assert max(m.sent_at for m in got) - min(m.sent_at for m in got) >= 2000
    assert held_firings("queue") - before >= 4  # (the metric a dashboard reads)
    for s in made:  # each fired its own occurrence, as its first attempt
        [record] = t.firing_log.recent(s.id)
        assert (record.outcome, record.attempts) == ("delivered", 1)
        assert record.occurrence == s.next_fire_at


def test_a_paused_queue_key_holds_its_firings_until_resumed(t: Tidings) -> None:
    t.queues.create_queue("orders")
    t.limits.pause("queue:orders", t.clock.now_ms() + 3_600_000)
    t.schedules.create(ScheduleSpec("held", just_now(), Target(TargetKind.QUEUE, "orders")))
    before = held_firings("queue")
    resumed: list[float] = []

    def resume_once_held() -> bool:
        if not resumed and held_firings("queue") > before:
            t.limits.resume("queue:orders")  # (another thread: the node's loop runs on)
            resumed.append(time.monotonic())
        return t.queues.describe("orders").counts.visible == 1

    run_node(t, resume_once_held)
    assert resumed and time.monotonic() - resumed[0] < 10  # the pause's hour was not waited


def test_a_function_targets_deliveries_wait_for_its_concurrency(t: Tidings) -> None:
    app = App(queue="unused")
    lock = threading.Lock()
    running: list[int] = [0, 0]  # now, peak
    calls: list[int] = []

    @app.function("slow")
    def slow(event: Any) -> None:
        with lock:
            running[0] += 1
            running[1] = max(running[1], running[0])
        time.sleep(0.1)
        with lock:
            running[0] -= 1
            calls.append(event.input["n"])

    t.limits.set("function:slow", concurrency=1)
    for n in range(4):
        t.schedules.create(ScheduleSpec(f"f{n}", just_now(), Target(
            TargetKind.FUNCTION, "slow", input=json.dumps({"n": n}))))
    run_node(t, lambda: len(calls) == 4, app=app)
    assert running[1] == 1  # one at a time, though the node runs 8 deliveries at once
    assert sorted(calls) == [0, 1, 2, 3]


def email_to(address: str) -> Target:
    return Target(TargetKind.EMAIL, "", input=json.dumps({
        "FromEmailAddress": "news@example.com", "Destination": {"ToAddresses": [address]},
        "Content": {"Simple": {"Subject": {"Data": "hi"}, "Body": {"Text": {"Data": "b"}}}}}))


def sent(t: Tidings) -> int:
    return sum(d.state is DeliveryState.SENT for d in t.email.log()[0])


@pytest.mark.parametrize("key", ["email-domain:slow.example", "smtp:127.0.0.1"])
def test_an_email_targets_deliveries_wait_for_their_domain_or_relay(
        t: Tidings, key: str) -> None:
    relay = Relay(data_delay_s=0.1)  # a slow relay: sessions would pile up
    t.limits.set(key, concurrency=1)
    before = held_firings("email")
    for n in range(4):
        t.schedules.create(ScheduleSpec(f"e{n}", just_now(), email_to(f"u{n}@slow.example")))
    with running_relay(relay) as url:
        run_node(t, lambda: sent(t) == 4, smtp_url=url)
    assert relay.peak_sessions == 1 and len(relay.received) == 4
    assert all(d.attempts == 1 for d in t.email.log()[0])  # waiting burnt no attempt
    assert held_firings("email") >= before  # (held in the consumer, or in the queue)
    assert f'tidings_limit_in_use{{key="{key}"}}' in generate_latest(REGISTRY).decode()
