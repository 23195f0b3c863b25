"""A webhook sent on a kept-alive connection the receiver closes as the request goes out
(its keep-alive ran out at that instant) is sent again on a new connection at once: the
attempt is not burnt on a request the receiver never saw. On a new connection the same
failure is the attempt's, for webhooks and pushes alike. A real receiver over
loopback, written on asyncio streams so it can hang up exactly there."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from enum import Enum

import pytest

from tidings.model.firings import FiringContext
from tidings.model.schedules import Target, TargetKind
from tidings.push.sender import PushSender
from tidings.targets.base import DeliveryError
from tidings.targets.webhook import WebhookSender

CONTEXT = FiringContext("arn:aws:scheduler:us-east-1:000000000000:schedule/default/s",
                        "default", "s", 1_700_000_000_000, "e-1")


class HangUp(Enum):
    SECOND_ON_EACH = "the second request of each connection"  # a keep-alive running out
    ALWAYS = "every request"
    NEVER = "none, but every answer a 500"


#: (port, n) -> what the sender made of its n-th request: a status or an error text
Send = Callable[[int, int], Awaitable[int | str]]


async def _read_request(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    return await reader.readexactly(length)


async def _exchange(send: Send, close: Callable[[], Awaitable[None]], hang_up: HangUp,
                    ) -> tuple[list[bytes], int, list[int | str]]:
    """Two requests one after the other to a receiver that hangs up unanswered on
    `hang_up`: (bodies it answered, connections it took, the sender's outcomes)."""
    answered: list[bytes] = []
    handlers: list[asyncio.Task[None] | None] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handlers.append(asyncio.current_task())  # type: ignore[arg-type]
        served = 0
        while (body := await _read_request(reader)) is not None:
            if hang_up is HangUp.ALWAYS or (hang_up is HangUp.SECOND_ON_EACH and served):
                break
            answered.append(body)
            served += 1
            status = b"500 Oops" if hang_up is HangUp.NEVER else b"200 OK"
            writer.write(b"HTTP/1.1 " + status + b"\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    outcomes: list[int | str] = []
    try:
        for n in range(2):
            outcomes.append(await send(port, n))
    finally:
        await close()  # (the receiver's handlers then read the end of each connection)
        await asyncio.wait_for(asyncio.gather(*[h for h in handlers if h]), 10)
        server.close()
        await server.wait_closed()
    return answered, len(handlers), outcomes


def _webhook(hang_up: HangUp) -> tuple[list[bytes], int, list[int | str]]:
    async def run() -> tuple[list[bytes], int, list[int | str]]:
        sender = WebhookSender(b"secret")

        async def send(port: int, n: int) -> int | str:
            target = Target(TargetKind.WEBHOOK, f"http://127.0.0.1:{port}/hook")
            try:
                return await sender.send(target, f'{{"n": {n}}}', CONTEXT, 1)
            except DeliveryError as exc:
                assert exc.retryable
                if exc.code.startswith("HTTP"):
                    return int(exc.code.removeprefix("HTTP"))  # an answer, as a push's
                return f"{exc.code}: {exc.message}"

        return await _exchange(send, sender.close, hang_up)

    return asyncio.run(run())


def _push(hang_up: HangUp) -> tuple[list[bytes], int, list[int | str]]:
    async def run() -> tuple[list[bytes], int, list[int | str]]:
        sender = PushSender()

        async def send(port: int, n: int) -> int | str:
            answer = await sender.post(f"http://127.0.0.1:{port}/hook",
                                       f'{{"n": {n}}}'.encode(), {}, timeout_s=10, pool=1)
            return answer.status if answer.status else answer.error

        return await _exchange(send, sender.close, hang_up)

    return asyncio.run(run())


SENDERS = pytest.mark.parametrize("sender", [_webhook, _push], ids=["webhook", "push"])


def test_a_connection_closed_under_the_request_is_replaced_at_once() -> None:
    answered, connections, outcomes = _webhook(HangUp.SECOND_ON_EACH)
    assert outcomes == [200, 200]
    assert answered == [b'{"n": 0}', b'{"n": 1}']
    assert connections == 2  # the second went out again, on a new connection


@SENDERS
def test_a_receiver_that_always_hangs_up_fails_the_attempt_with_a_reason(sender: Callable[
        [HangUp], tuple[list[bytes], int, list[int | str]]]) -> None:
    """On a new connection, no answer is the attempt's: the receiver may have read the
    request and died (it is not sent again at once)."""
    answered, connections, outcomes = sender(HangUp.ALWAYS)
    assert answered == []
    assert connections == 2  # one a request: each was on a new connection
    for outcome in outcomes:
        assert isinstance(outcome, str) and outcome.startswith("ConnectionError: ")
        assert outcome.split(": ", 2)[2]  # says what happened, never empty


@SENDERS
def test_an_answer_is_never_sent_twice(sender: Callable[
        [HangUp], tuple[list[bytes], int, list[int | str]]]) -> None:
    """Only a request that got no answer goes again: a 5xx is the attempt's outcome."""
    answered, connections, outcomes = sender(HangUp.NEVER)
    assert answered == [b'{"n": 0}', b'{"n": 1}'] and connections == 1
    assert outcomes == [500, 500]
