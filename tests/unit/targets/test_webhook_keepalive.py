"""A webhook sent on a kept-alive connection the receiver closes as the request goes out
(its keep-alive ran out at that instant) is sent again on a new connection at once: the
attempt is not burnt on a request the receiver never saw."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from tidings.model.firings import FiringContext
from tidings.model.schedules import Target, TargetKind
from tidings.targets.base import DeliveryError
from tidings.targets.webhook import WebhookSender

CONTEXT = FiringContext("arn:aws:scheduler:us-east-1:000000000000:schedule/default/s",
                        "default", "s", 1_700_000_000_000, "e-1")
OK = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: keep-alive\r\n\r\n"


async def _read_request(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    return await reader.readexactly(length)


async def _hang_up(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()


async def _send_twice(drop_second_on_each: bool, *, always: bool = False
                      ) -> tuple[list[bytes], int, list[int | DeliveryError]]:
    """A receiver over loopback that answers the first request of each connection and
    closes it on reading the second (`drop_second_on_each`), or closes every connection
    unanswered (`always`); two webhooks sent one after the other."""
    answered: list[bytes] = []
    connections = 0

    handlers: list[asyncio.Task[None] | None] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        handlers.append(asyncio.current_task())  # type: ignore[arg-type]
        served = 0
        while (body := await _read_request(reader)) is not None:
            if always or (drop_second_on_each and served == 1):
                break  # closed unanswered, as a keep-alive running out would
            answered.append(body)
            served += 1
            writer.write(OK)
            await writer.drain()
        await _hang_up(writer)

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    sender = WebhookSender(b"secret")
    target = Target(TargetKind.WEBHOOK, f"http://127.0.0.1:{port}/hook")
    outcomes: list[int | DeliveryError] = []
    try:
        for n in range(2):
            try:
                outcomes.append(await sender.send(target, f'{{"n": {n}}}', CONTEXT, 1))
            except DeliveryError as exc:
                outcomes.append(exc)
    finally:
        await sender.close()  # (the receiver's handlers then read the end of each)
        await asyncio.wait_for(asyncio.gather(*[h for h in handlers if h]), 10)
        server.close()
        await server.wait_closed()
    return answered, connections, outcomes


def test_a_connection_closed_under_the_request_is_replaced_at_once() -> None:
    answered, connections, outcomes = asyncio.run(_send_twice(True))
    assert outcomes == [200, 200]
    assert answered == [b'{"n": 0}', b'{"n": 1}']
    assert connections == 2  # the second went out again, on a new connection


def test_a_receiver_that_always_hangs_up_fails_the_attempt_with_a_reason() -> None:
    answered, connections, outcomes = asyncio.run(_send_twice(False, always=True))
    assert answered == []
    assert connections == 4  # each webhook: its request, and once more on a new connection
    for outcome in outcomes:
        assert isinstance(outcome, DeliveryError)
        assert outcome.code == "ConnectionError" and outcome.retryable
        assert outcome.message.split(": ", 1)[1]  # says what happened, never empty


def test_an_answer_is_never_sent_twice() -> None:
    """Only a request that got no answer goes again: a 5xx is the attempt's outcome."""
    answered: list[bytes] = []

    async def scenario() -> DeliveryError:
        handlers: list[asyncio.Task[None] | None] = []

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            handlers.append(asyncio.current_task())  # type: ignore[arg-type]
            while (body := await _read_request(reader)) is not None:
                answered.append(body)
                writer.write(b"HTTP/1.1 500 Oops\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
            await _hang_up(writer)

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        sender = WebhookSender(b"secret")
        try:
            with pytest.raises(DeliveryError) as failed:
                await sender.send(Target(TargetKind.WEBHOOK, f"http://127.0.0.1:{port}/h"),
                                  "{}", CONTEXT, 1)
            return failed.value
        finally:
            await sender.close()
            await asyncio.wait_for(asyncio.gather(*[h for h in handlers if h]), 10)
            server.close()
            await server.wait_closed()

    error = asyncio.run(scenario())
    assert error.code == "HTTP500" and answered == [b"{}"]
