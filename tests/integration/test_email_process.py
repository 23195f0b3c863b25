"""The email process beside a node (tidings/email_process.py): a real child process
consuming the email queue with the node, a real aiosmtpd relay, both backends. Mail is
shared between the two processes, each delivery is sent once and logged once, the child's
counts reach the node's metrics, and a child killed -9 mid-flow is started again without
losing mail."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

from email_relay import Relay, running_relay
from serving import run_with

from tidings.client import Tidings
from tidings.model.email import DeliveryState
from tidings.model.schedules import ScheduleSpec, Target, TargetKind
from tidings.node import Node
from tidings.queues.internal import EMAIL_QUEUE, ensure_internal_queues
from tidings.runtime import metrics
from tidings.settings import Settings

N = 120


def email_specs(prefix: str, n: int) -> list[ScheduleSpec]:
    now = time.strftime("at(%Y-%m-%dT%H:%M:%S)", time.gmtime())
    specs = []
    for i in range(n):
        doc = {"FromEmailAddress": "news@example.com",
               "Destination": {"ToAddresses": [f"{prefix}{i}@example.org"]},
               "Content": {"Template": {"TemplateName": "hello",
                                        "TemplateData": json.dumps({"name": f"N{i}"})}}}
        specs.append(ScheduleSpec(f"{prefix}{i}", now,
                                  Target(TargetKind.EMAIL, "", input=json.dumps(doc))))
    return specs


def delivered_email() -> float:
    return metrics.REGISTRY.get_sample_value("tidings_deliveries_total",
                                             {"target": "email"}) or 0.0


def sent(t: Tidings) -> int:
    return sum(d.state is DeliveryState.SENT for d in t.email.log(limit=1000)[0])


async def until(check: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


def node_for(t: Tidings, db_url: str, relay_url: str) -> Node:
    # A slow relay and few deliveries at once per process, so mail is still waiting
    # when the child is ready and both processes take their share.
    settings = Settings(db=db_url, smtp_url=relay_url, smtp_max_connections=4,
                        concurrency=4, shutdown_grace_s=2, email_sender="process")
    return Node(t, settings, email_process=True)


def test_the_node_and_its_email_process_share_the_mail_each_sent_once(db_url: str) -> None:
    relay = Relay(data_delay_s=0.02)
    before = delivered_email()
    with Tidings(settings=Settings(db=db_url)) as t:
        t.email.create_template("hello", "Hello {{name}}", text="Hi {{name}}")
        with running_relay(relay) as url:
            node = node_for(t, db_url, url)
            assert node.email_process is not None and node.mailer is not None
            # each keeps half of the relay's sessions
            assert node.targets.reach.email is not None
            assert node.email_process.settings.smtp_max_connections == 2

            async def scenario(running: asyncio.Task[None]) -> None:
                assert node.email_process is not None
                await asyncio.wait_for(node.email_process.ready.wait(), 30)
                for made in t.schedules.create_many(email_specs("a", N)):
                    assert made.error is None
                await until(lambda: sent(t) == N, 60)
                # the child's deliveries reach the node's metrics (within half a second)
                await until(lambda: delivered_email() - before == N, 10)

            run_with(node, scenario)
            assert node.mailer is not None
            mine = node.mailer.handled
            assert 0 < mine < N, f"the node sent {mine} of {N}: the child should send some"
        assert len(t.email.log(limit=1000)[0]) == N  # one log row per delivery
    got = sorted(r.rcpt_tos[0] for r in relay.received)
    assert got == sorted(f"a{i}@example.org" for i in range(N))  # each once


def test_an_email_process_killed_9_mid_flow_is_restarted_and_no_mail_is_lost(
        db_url: str) -> None:
    relay = Relay(data_delay_s=0.02)
    before = delivered_email()
    with Tidings(settings=Settings(db=db_url)) as t:
        t.email.create_template("hello", "Hello {{name}}", text="Hi {{name}}")
        # What the dead child held comes back once its lease runs out: 5 s here, not the
        # email queue's 60 (the queue is closed to every face, so through the store).
        ensure_internal_queues(t.queues)
        attrs = t.store.get_queue(EMAIL_QUEUE).attributes.merged(visibility_timeout_s=5)
        t.store.update_queue(EMAIL_QUEUE, attrs, t.clock.now_ms())
        with running_relay(relay) as url:
            node = node_for(t, db_url, url)
            child = node.email_process
            assert child is not None

            async def scenario(running: asyncio.Task[None]) -> None:
                await asyncio.wait_for(child.ready.wait(), 30)
                for made in t.schedules.create_many(email_specs("k", N)):
                    assert made.error is None
                assert node.mailer is not None
                # the child has sent some (counted by the node beyond its own)
                await until(lambda: delivered_email() - before > node.mailer.handled, 30)
                assert child.process is not None
                os.kill(child.process.pid, signal.SIGKILL)
                await until(lambda: child.started == 2 and child.ready.is_set(), 30)
                await until(lambda: sent(t) == N, 60)

            run_with(node, scenario)
            assert "email sender" not in node.health.troubles()
        log = t.email.log(limit=1000)[0]
        assert len(log) == N and all(d.state is DeliveryState.SENT for d in log)
    # every mail reached the relay; one the child had handed to the relay when it died
    # may have gone twice (its log row was not final yet), no other
    got = [r.rcpt_tos[0] for r in relay.received]
    assert set(got) == {f"k{i}@example.org" for i in range(N)}
    assert len(got) - N <= 4 * 2  # at most what the child's deliveries held at once
