"""A node's email through a relay that asks it to slow down (421), or is down and comes
back: the mail waits without burning attempts, and the log says so once per change of
the relay's state, never a traceback per message. Both backends, real aiosmtpd."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Iterator

import pytest
from email_relay import Relay, free_port, running_relay
from serving import run_with

from tidings.client import Tidings
from tidings.model.email import DeliveryState
from tidings.model.schedules import ScheduleSpec, Target, TargetKind
from tidings.node import Node
from tidings.settings import Settings

NODE = {"concurrency": 4, "shutdown_grace_s": 2}


@pytest.fixture
def t(db_url: str) -> Iterator[Tidings]:
    with Tidings(settings=Settings(db=db_url, public_url="https://mail.example.test")) as c:
        c.email.create_template("welcome", "Hello {{name}}", text="Hi {{name}}")
        yield c


def schedule_mail(t: Tidings, names: list[str]) -> None:
    when = time.strftime("at(%Y-%m-%dT%H:%M:%S)", time.gmtime())
    for name in names:
        doc = ('{"FromEmailAddress": "news@example.com", "Destination": {"ToAddresses": '
               f'["{name}@example.org"]}}, "Content": {{"Template": {{"TemplateName": '
               f'"welcome", "TemplateData": "{{\\"name\\": \\"{name}\\"}}"}}}}}}')
        t.schedules.create(ScheduleSpec(name, when, Target(TargetKind.EMAIL, "", input=doc)))


def sent(t: Tidings, n: int) -> bool:
    rows = t.email.log()[0]
    return len(rows) == n and all(d.state is DeliveryState.SENT for d in rows)


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "tidings.email.relay"]


async def until(check: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def test_421_backs_the_relay_off_and_costs_no_attempt(
        t: Tidings, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    relay = Relay(mail_replies=["421 4.7.0 Too many messages, slow down"] * 2)
    with running_relay(relay) as url:
        schedule_mail(t, ["ann", "bo"])
        node = Node(t, Settings(db=t.settings.db, smtp_url=url, smtp_max_connections=1,
                                **NODE))  # type: ignore[arg-type]

        async def scenario(_: asyncio.Task[None]) -> None:
            await until(lambda: sent(t, 2))

        run_with(node, scenario)
    host = url.removeprefix("smtp://")
    assert lines(caplog)[0] == (f"SMTP relay {host} asked to slow down: 421 4.7.0 Too many "
                                "messages, slow down; holding its emails, trying it again "
                                "in about 1 s")
    # the second 421 (the probe's) changes no state: one line when it takes mail again
    assert re.fullmatch(rf"SMTP relay {re.escape(host)} accepts mail again after "
                        r"\d+\.\d s", lines(caplog)[1])
    assert len(lines(caplog)) == 2, lines(caplog)
    assert [d.attempts for d in t.email.log()[0]] == [1, 1]
    assert not [r for r in caplog.records if r.exc_info or "failed (attempt" in r.message]


def test_a_relay_down_then_up_is_two_lines_and_the_mail_goes(
        t: Tidings, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    port = free_port()
    schedule_mail(t, ["cy", "di", "ed"])
    node = Node(t, Settings(db=t.settings.db, smtp_url=f"smtp://127.0.0.1:{port}",
                            **NODE))  # type: ignore[arg-type]
    relay = Relay()

    async def scenario(_: asyncio.Task[None]) -> None:
        await until(lambda: lines(caplog))  # down, noticed: now the relay starts
        with running_relay(relay, port):
            await until(lambda: sent(t, 3))

    run_with(node, scenario)
    down, up = lines(caplog)
    assert re.fullmatch(rf"SMTP relay 127\.0\.0\.1:{port} is down: cannot connect \(.*"
                        rf"{port}.*\); \d emails wait for it", down), down
    assert re.fullmatch(rf"SMTP relay 127\.0\.0\.1:{port} is back up after \d+\.\d s", up)
    assert [d.attempts for d in t.email.log()[0]] == [1, 1, 1]
    assert len(relay.received) == 3
    assert not [r for r in caplog.records if r.exc_info or "failed (attempt" in r.message]


def domain_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "tidings.email.domains"]


def test_a_slow_down_at_rcpt_holds_that_domain_only_and_costs_no_attempt(
        t: Tidings, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    slow = "450 4.7.1 Too many messages to this domain, slow down"
    relay = Relay(rcpt_replies={"slow.example": [slow, slow]})
    with running_relay(relay) as url:
        when = time.strftime("at(%Y-%m-%dT%H:%M:%S)", time.gmtime())
        for name, domain in (("ann", "slow.example"), ("bo", "fast.example"),
                             ("cy", "fast.example")):
            doc = ('{"FromEmailAddress": "news@example.com", "Destination": {"ToAddresses":'
                   f' ["{name}@{domain}"]}}, "Content": {{"Simple": {{"Subject": {{"Data": '
                   '"Hi"}, "Body": {"Text": {"Data": "Hello"}}}}}')
            t.schedules.create(ScheduleSpec(name, when, Target(TargetKind.EMAIL, "",
                                                               input=doc)))
        node = Node(t, Settings(db=t.settings.db, smtp_url=url, **NODE))  # type: ignore[arg-type]

        async def scenario(_: asyncio.Task[None]) -> None:
            await until(lambda: sent(t, 3))

        run_with(node, scenario)
    order = [r.rcpt_tos[0] for r in relay.received]
    assert order.index("ann@slow.example") == 2  # held: the other domain went first
    assert not relay.rcpt_replies["slow.example"]  # two slow-downs, then taken
    held = domain_lines(caplog)
    assert held[0] == f"SMTP relay asked to slow down for slow.example: {slow}; holding " \
        "its emails for 1 s"
    assert held[1] == f"SMTP relay asked to slow down for slow.example: {slow}; holding " \
        "its emails for 2 s"
    assert held[2:] == ["SMTP relay takes mail for slow.example again"]
    assert lines(caplog) == []  # the relay itself was never slowed
    rows = {d.recipients[0]: d for d in t.email.log()[0]}
    assert [rows[a].attempts for a in sorted(rows)] == [1, 1, 1]  # the holds cost none
    assert not [r for r in caplog.records if r.exc_info or "failed (attempt" in r.message]
