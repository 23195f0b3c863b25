"""The relay pool against a real aiosmtpd relay, with and without PIPELINING: message
after message on one session, refusals in the middle of a pipelined flow, and the
relay's state (asked to slow down, down, back up) with its one log line per change."""

from __future__ import annotations

import asyncio
import logging
import re

import pytest
from email_relay import Relay, free_port, running_relay

from tidings.email.relay import RelayState
from tidings.email.smtp import SmtpPermanentError, SmtpSender, SmtpTemporaryError

FROM = "news@example.com"


def message(n: int) -> bytes:
    # a leading dot on a line: dot-stuffed on the wire, received as written
    return (f"Subject: n{n}\r\nMessage-ID: <{n}@example.com>\r\n\r\n"
            f"Body {n}\r\n.hidden line\r\n").encode()


def relay_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "tidings.email.relay"]


@pytest.mark.parametrize("pipelining", [True, False], ids=["pipelining", "lockstep"])
def test_one_session_carries_many_messages_and_their_refusals(pipelining: bool) -> None:
    relay = Relay(pipelining=pipelining,
                  refuse_rcpt={"gone@example.org": "550 5.1.1 no such user"},
                  data_replies=[])
    recipients = {n: [f"u{n}@example.org"] for n in range(20)}
    recipients[7] = ["gone@example.org"]
    recipients[9] = ["gone@example.org", "u9@example.org"]
    with running_relay(relay) as url:
        opened_before = relay.total_sessions  # (the controller's own check at start)

        async def scenario() -> list[object]:
            sender = SmtpSender(max_connections=1)
            sends = [sender.send(url, FROM, recipients[n], message(n)) for n in range(20)]
            try:
                return await asyncio.gather(*sends, return_exceptions=True)
            finally:
                await sender.close()

        results = asyncio.run(scenario())
    assert isinstance(results[7], SmtpPermanentError) and results[7].refused == \
        ("gone@example.org",)
    assert results[9].refused == {"gone@example.org": "550 5.1.1 no such user"}  # type: ignore[union-attr]
    assert relay.total_sessions - opened_before == 1
    got = sorted(relay.received, key=lambda r: int(r.message["Subject"][1:]))
    assert [r.rcpt_tos for r in got] == [[f"u{n}@example.org"] for n in range(20) if n != 7]
    assert got[0].data.replace(b"\r\n", b"\n") == message(0).replace(b"\r\n", b"\n")


def test_a_relay_asking_to_slow_down_is_backed_off_and_mail_waits(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "tidings.email.relay")
    relay = Relay(pipelining=True, mail_replies=["421 4.7.0 Too many messages, slow down"])
    with running_relay(relay) as url:
        async def scenario() -> list[object]:
            sender = SmtpSender(max_connections=1, backoff_first_s=0.05)
            try:
                return await asyncio.gather(*(sender.send(url, FROM, [f"u{n}@example.org"],
                                                          message(n)) for n in range(3)))
            finally:
                assert sender.pool(url).status.state is RelayState.UP
                await sender.close()

        results = asyncio.run(scenario())
    assert len(results) == 3 and len(relay.received) == 3  # none failed
    host = url.removeprefix("smtp://")
    lines = relay_lines(caplog)
    assert lines[0] == (f"SMTP relay {host} asked to slow down: 421 4.7.0 Too many messages, "
                        "slow down; holding its emails, trying it again in about 0.05 s")
    assert re.fullmatch(rf"SMTP relay {re.escape(host)} accepts mail again after "
                        r"\d+\.\d s", lines[1])
    assert len(lines) == 2


def test_a_down_relay_is_logged_once_and_its_mail_goes_when_it_is_back(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "tidings.email.relay")
    port = free_port()
    url = f"smtp://127.0.0.1:{port}"
    relay = Relay(pipelining=True)

    async def scenario() -> None:
        sender = SmtpSender(max_connections=2, backoff_first_s=0.05, backoff_max_s=0.2)
        sends = asyncio.gather(*(sender.send(url, FROM, [f"u{n}@example.org"], message(n))
                                 for n in range(4)))
        while sender.pool(url).status.state is not RelayState.DOWN:
            await asyncio.sleep(0.01)
        while len(relay_lines(caplog)) < 1:
            await asyncio.sleep(0.01)
        with running_relay(relay, port):
            await sends
        await sender.close()

    asyncio.run(scenario())
    assert len(relay.received) == 4
    lines = relay_lines(caplog)
    assert re.fullmatch(rf"SMTP relay 127\.0\.0\.1:{port} is down: cannot connect \(.*\); "
                        r"\d emails wait for it", lines[0]), lines
    assert re.fullmatch(rf"SMTP relay 127\.0\.0\.1:{port} is back up after \d+\.\d s",
                        lines[1]), lines
    assert len(lines) == 2
    assert not any(r.exc_info for r in caplog.records)


def test_mail_waiting_too_long_for_a_down_relay_fails_as_temporary() -> None:
    url = f"smtp://127.0.0.1:{free_port()}"

    async def scenario() -> BaseException | None:
        sender = SmtpSender(max_connections=1, backoff_first_s=0.02, backoff_max_s=0.05,
                            wait_s=0.1)
        try:
            await sender.send(url, FROM, ["a@example.org"], message(1))
        except SmtpTemporaryError as exc:
            return exc
        finally:
            await sender.close()
        return None

    failure = asyncio.run(scenario())
    assert failure is not None and re.match(r"relay 127\.0\.0\.1:\d+ is down \(cannot connect",
                                            str(failure)), failure
