"""The relay pool against a real aiosmtpd relay, with and without PIPELINING: message
after message on one session, refusals in the middle of a pipelined flow, and the
relay's state (asked to slow down, down, back up) with its one log line per change."""

from __future__ import annotations

import asyncio
import logging
import re

import pytest
from email_relay import Relay, free_port, running_relay

from tidings.email.relay import CHUNKED_BATCH, RelayState
from tidings.email.smtp import SmtpPermanentError, SmtpSender, SmtpTemporaryError

FROM = "news@example.com"


def message(n: int) -> bytes:
    # a leading dot on a line: dot-stuffed on the wire, received as written
    return (f"Subject: n{n}\r\nMessage-ID: <{n}@example.com>\r\n\r\n"
            f"Body {n}\r\n.hidden line\r\n").encode()


def relay_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "tidings.email.relay"]


@pytest.mark.parametrize(("pipelining", "chunking"), [(True, False), (False, False),
                                                      (True, True)],
                         ids=["pipelining", "lockstep", "chunking"])
def test_one_session_carries_many_messages_and_their_refusals(pipelining: bool,
                                                              chunking: bool) -> None:
    relay = Relay(pipelining=pipelining, chunking=chunking,
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
    # with CHUNKING every message went in BDAT (its bytes as written, no dot-stuffing)
    assert relay.bdat_messages == (19 if chunking else 0)
    assert all(r.data == message(int(r.message["Subject"][1:])) for r in got)


def test_chunked_rounds_settle_each_message_by_its_own_replies() -> None:
    """Many messages per write (BDAT): a refused sender, a refused recipient among
    accepted ones, every recipient refused, a 4xx and a 5xx to the content, and a
    "slow down" to the content in the middle of a round: each message gets its own
    outcome, the one asked to slow down goes again (untried), nothing is sent twice."""
    relay = Relay(pipelining=True, chunking=True,
                  refuse_rcpt={"gone@example.org": "550 5.1.1 no such user",
                               "full@example.org": "452 4.2.2 mailbox full"},
                  data_replies=[])
    recipients = {n: [f"u{n}@example.org"] for n in range(40)}
    recipients[3] = ["gone@example.org", "u3@example.org"]
    recipients[5] = ["gone@example.org"]
    recipients[6] = ["full@example.org"]
    with running_relay(relay) as url:
        async def scenario() -> list[object]:
            sender = SmtpSender(max_connections=1, backoff_first_s=0.02)
            sends = [sender.send(url, "bad@example.com" if n == 4 else FROM, recipients[n],
                                 message(n)) for n in range(40)]
            try:
                return await asyncio.gather(*sends, return_exceptions=True)
            finally:
                await sender.close()

        # the DATA hook's replies, in the order contents arrive: u0 250; u1 451; u2 554;
        # u3 250; then a slow-down for the next content (u7: 4 and 5 and 6 never get
        # that far), the rest 250.
        relay.data_replies[:] = ["250 OK queued", "451 4.3.0 try later",
                                 "554 5.7.1 rejected", "250 OK queued",
                                 "451 4.7.0 rate limited, slow down"]
        relay.mail_replies[:] = []
        relay.refuse_rcpt["bad@example.com"] = ""
        bad_mail = "553 5.7.1 sender refused"
        original = relay.handle_MAIL

        async def handle_mail(server, session, envelope, address, options):  # type: ignore[no-untyped-def]
            if address == "bad@example.com":
                return bad_mail
            return await original(server, session, envelope, address, options)

        relay.handle_MAIL = handle_mail  # type: ignore[method-assign]
        results = asyncio.run(scenario())
    assert isinstance(results[1], SmtpTemporaryError) and results[1].code == 451
    assert isinstance(results[2], SmtpPermanentError) and results[2].code == 554
    assert results[3].refused == {"gone@example.org": "550 5.1.1 no such user"}  # type: ignore[union-attr]
    assert isinstance(results[4], SmtpPermanentError) and results[4].code == 553
    assert isinstance(results[5], SmtpPermanentError) and results[5].refused == \
        ("gone@example.org",)
    assert isinstance(results[6], SmtpTemporaryError) and results[6].code == 452
    sent = [n for n, r in enumerate(results) if not isinstance(r, BaseException)]
    assert sent == [0, 3, *range(7, 40)]
    # (a scripted reply takes the place of recording: u0 and u3 are not in `received`)
    got = [int(r.message["Subject"][1:]) for r in relay.received]
    assert sorted(got) == list(range(7, 40))  # u7 once, after its slow-down
    assert relay.bdat_messages == relay.data_attempts


def test_a_chunked_session_lost_mid_round_fails_only_what_may_have_been_taken() -> None:
    """The relay drops the session after the third content of a round: the two answered
    are sent, the unanswered ones whose content went out may have been taken (a temporary
    failure each, retried by the queue's policy), the rest of the line goes on a new
    session; nothing arrives twice."""
    relay = Relay(pipelining=True, chunking=True, drop_at_data=3)
    with running_relay(relay) as url:
        async def scenario() -> list[object]:
            sender = SmtpSender(max_connections=1)
            sends = [sender.send(url, FROM, [f"u{n}@example.org"], message(n))
                     for n in range(40)]
            try:
                return await asyncio.gather(*sends, return_exceptions=True)
            finally:
                await sender.close()

        results = asyncio.run(scenario())
    failed = [n for n, r in enumerate(results) if isinstance(r, BaseException)]
    assert all(isinstance(results[n], SmtpTemporaryError) for n in failed)
    assert failed[0] == 2 and failed == list(range(2, 2 + len(failed)))
    assert len(failed) <= CHUNKED_BATCH - 2  # only that round's unanswered
    got = sorted(int(r.message["Subject"][1:]) for r in relay.received)
    assert got == [n for n in range(40) if n not in failed]  # each once
    assert relay.total_sessions >= 2


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
