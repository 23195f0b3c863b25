"""A real SMTP relay for the email tests: aiosmtpd on a free loopback port, in a thread.

It records every accepted message, answers MAIL and DATA from scripts (e.g. "451 …"
twice, then 250), refuses chosen recipients at RCPT, counts simultaneous sessions, and
offers PIPELINING when asked (aiosmtpd reads commands one after another from the stream,
so it serves a pipelining client correctly; it just does not say so by default), and
CHUNKING when asked: aiosmtpd has no BDAT, so `_CountingSMTP` adds one (RFC 3030: the
chunk's size, its bytes as they are, LAST ends the message; a chunk without MAIL and RCPT
is read and refused, and the transaction ends).
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session


@dataclass
class Received:
    mail_from: str
    rcpt_tos: list[str]
    data: bytes
    at: float = 0.0  # time.monotonic() when accepted

    @property
    def message(self) -> EmailMessage:
        msg = message_from_bytes(self.data, policy=policy.default)
        assert isinstance(msg, EmailMessage)
        return msg


@dataclass
class Relay:
    data_replies: list[str] = field(default_factory=list)  # consumed one per DATA
    mail_replies: list[str] = field(default_factory=list)  # consumed one per MAIL
    pipelining: bool = False
    chunking: bool = False
    bdat_messages: int = 0  # messages that came in BDAT chunks
    refuse_rcpt: dict[str, str] = field(default_factory=dict)  # address → reply
    #: domain → replies, consumed one per RCPT to the domain (then 250)
    rcpt_replies: dict[str, list[str]] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    data_delay_s: float = 0.0  # a slow relay, so concurrent sessions pile up
    data_attempts: int = 0
    #: the relay drops the connection, unanswered, when the content of this DATA (or
    #: BDAT) call (1-based) has arrived: a session lost in the middle of a flow
    drop_at_data: int | None = None
    sessions: int = 0
    peak_sessions: int = 0
    total_sessions: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_EHLO(self, server: SMTP, session: Session, envelope: Envelope,
                          hostname: str, responses: list[str]) -> list[str]:
        session.host_name = hostname
        if self.pipelining:
            responses.insert(-1, "250-PIPELINING")
        if self.chunking:
            responses.insert(-1, "250-CHUNKING")
        return responses

    async def handle_MAIL(self, server: SMTP, session: Session, envelope: Envelope,
                          address: str, mail_options: list[str]) -> str:
        with self.lock:
            scripted = self.mail_replies.pop(0) if self.mail_replies else None
        if scripted is not None:
            return scripted
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 OK"

    async def handle_RCPT(self, server: SMTP, session: Session, envelope: Envelope,
                          address: str, rcpt_options: list[str]) -> str:
        reply = self.refuse_rcpt.get(address.lower())
        with self.lock:
            script = self.rcpt_replies.get(address.rpartition("@")[2].lower())
            if not reply and script:
                reply = script.pop(0)
        if reply:
            return reply
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        if self.data_delay_s:
            await asyncio.sleep(self.data_delay_s)
        with self.lock:
            self.data_attempts += 1
            if self.data_attempts == self.drop_at_data:
                assert server.transport is not None
                server.transport.abort()
                return "421 4.3.2 dropped"  # never reaches the client
            if self.data_replies:
                return self.data_replies.pop(0)
            assert isinstance(envelope.content, bytes)
            self.received.append(Received(str(envelope.mail_from), list(envelope.rcpt_tos),
                                          envelope.original_content or envelope.content,
                                          time.monotonic()))
        return "250 OK queued"

    def opened(self) -> None:
        with self.lock:
            self.sessions += 1
            self.total_sessions += 1
            self.peak_sessions = max(self.peak_sessions, self.sessions)

    def closed(self) -> None:
        with self.lock:
            self.sessions -= 1


class _CountingSMTP(SMTP):
    def connection_made(self, transport: Any) -> None:
        self.event_handler.opened()
        super().connection_made(transport)

    def connection_lost(self, error: Exception | None) -> None:
        self.event_handler.closed()
        super().connection_lost(error)

    async def smtp_BDAT(self, arg: str | None) -> None:
        words = (arg or "").split()
        if not self.event_handler.chunking or not words or not words[0].isdigit() or \
                len(words) > 2 or (len(words) == 2 and words[1].upper() != "LAST"):
            await self.push("501 Syntax: BDAT size [LAST]")
            return
        data = await self._reader.readexactly(int(words[0]))
        envelope = self.envelope
        assert envelope is not None
        chunks = getattr(envelope, "chunks", b"") + data
        if not envelope.mail_from or not envelope.rcpt_tos:
            self._set_post_data_state()  # refused: the chunk is dropped, the transaction ends
            await self.push("554 5.5.1 Error: no valid recipients")
            return
        if len(words) == 1:
            envelope.chunks = chunks  # type: ignore[attr-defined]
            await self.push(f"250 2.0.0 {len(data)} octets received")
            return
        envelope.content = envelope.original_content = chunks
        with self.event_handler.lock:
            self.event_handler.bdat_messages += 1
        status = await self._call_handler_hook("DATA")
        self._set_post_data_state()
        await self.push(status)


class _Controller(Controller):
    def factory(self) -> SMTP:
        return _CountingSMTP(self.handler, **self.SMTP_kwargs)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_relay(relay: Relay, port: int | None = None) -> Iterator[str]:
    """Yields the relay's URL, smtp://127.0.0.1:PORT (a free port unless given)."""
    port = port or free_port()
    controller = _Controller(relay, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield f"smtp://127.0.0.1:{port}"
    finally:
        controller.stop()
