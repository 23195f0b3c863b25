"""A real SMTP relay for the email tests: aiosmtpd on a free loopback port, in a thread.

It records every accepted message, answers MAIL and DATA from scripts (e.g. "451 …"
twice, then 250), refuses chosen recipients at RCPT, counts simultaneous sessions, and
offers PIPELINING when asked (aiosmtpd reads commands one after another from the stream,
so it serves a pipelining client correctly; it just does not say so by default).
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
    refuse_rcpt: dict[str, str] = field(default_factory=dict)  # address → reply
    #: domain → replies, consumed one per RCPT to the domain (then 250)
    rcpt_replies: dict[str, list[str]] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    data_delay_s: float = 0.0  # a slow relay, so concurrent sessions pile up
    data_attempts: int = 0
    sessions: int = 0
    peak_sessions: int = 0
    total_sessions: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_EHLO(self, server: SMTP, session: Session, envelope: Envelope,
                          hostname: str, responses: list[str]) -> list[str]:
        session.host_name = hostname
        if self.pipelining:
            responses.insert(-1, "250-PIPELINING")
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
