"""One SMTP session with a relay, carrying many messages, pipelined when the relay allows.

aiosmtplib opens the session: TCP or TLS, the greeting, EHLO, STARTTLS and AUTH, the parts
that need its care. Then the transport is handed to a `Session` (`transport.set_protocol`,
asyncio's way to change who reads a connection), which carries the mail transactions:
aiosmtplib awaits one reply per command and cannot read several replies that arrive in one
segment, so it cannot pipeline.

With PIPELINING (RFC 2920) a transaction is two writes and two waits, not 3 + recipients
of each: MAIL, every RCPT and DATA go out together, then the content. The content may
also lead a group (RFC 2920 §3.1), so a session with more mail waiting sends one message's
content and the next one's MAIL/RCPT/DATA in one write: at a steady flow, one write and
one read a message. Without PIPELINING every command waits for its reply, as RFC 5321
asks. The socket write was a quarter of the node's time on the email path with a write
per command (bench/email.py).

With CHUNKING as well (RFC 3030: Postfix since 3.4, Exchange, Gmail), BDAT carries the
content after its size, with no 354 to wait for: several messages' MAIL, RCPT and BDAT
go in one write and their replies come back in one read (`RelayPool`), where DATA's
354 held a session to one write per message.
"""

from __future__ import annotations

import asyncio
import re
import socket
from typing import NamedTuple

import aiosmtplib

_LOCAL_HOSTNAME = socket.gethostname() or "localhost"  # not getfqdn(): no DNS per connect
_BARE_LINE_END = re.compile(rb"\r\n|\r|\n")


class Reply(NamedTuple):
    code: int
    text: str

    def __str__(self) -> str:
        return f"{self.code} {self.text}"


class SessionLost(Exception):
    """The connection closed or stopped answering; `replies` are those of the exchange
    that came before (a relay sends 421 and then closes)."""

    def __init__(self, message: str, replies: list[Reply]) -> None:
        super().__init__(message)
        self.replies = replies


def envelope(sender: str, recipients: tuple[str, ...] | list[str], *,
             data: bool = True) -> list[bytes]:
    """MAIL, one RCPT per recipient and DATA (unless `data` is False: a BDAT follows).
    The addresses were validated when the message was accepted (no spaces, brackets or
    line breaks)."""
    commands = [b"MAIL FROM:<" + sender.encode() + b">\r\n",
                *(b"RCPT TO:<" + r.encode() + b">\r\n" for r in recipients)]
    if data:
        commands.append(b"DATA\r\n")
    return commands


def _crlf(data: bytes) -> bytes:
    if data.count(b"\n") != data.count(b"\r\n"):  # a Raw message with bare line ends
        data = _BARE_LINE_END.sub(b"\r\n", data)
    if not data.endswith(b"\r\n"):
        data += b"\r\n"
    return data


def content(data: bytes) -> bytes:
    """The message as DATA carries it: CRLF line ends, a leading dot doubled (RFC 5321
    §4.5.2), ended by a line with one dot."""
    data = _crlf(data).replace(b"\r\n.", b"\r\n..")
    if data.startswith(b"."):
        data = b"." + data
    return data + b".\r\n"


def chunk(data: bytes) -> bytes:
    """The message as one last BDAT chunk (RFC 3030): its size, then the bytes as they
    are (CRLF line ends; no dot-stuffing and no end marker, the size says where it
    ends)."""
    data = _crlf(data)
    return b"BDAT %d LAST\r\n" % len(data) + data


class Session(asyncio.Protocol):
    """Writes groups of commands and hands back their replies, in order."""

    def __init__(self, transport: asyncio.Transport, *, pipelining: bool,
                 timeout_s: float, chunking: bool = False) -> None:
        self.transport = transport
        self.pipelining = pipelining
        #: The relay offers CHUNKING (BDAT, RFC 3030) as well as PIPELINING: messages
        #: need no 354 before their content, so several go in one write (relay.py).
        self.chunking = chunking and pipelining
        self.timeout_s = timeout_s
        self.messages = 0  # transactions completed on this session
        self._buffer = b""
        self._lines: list[str] = []  # a multi-line reply so far
        self._replies: list[Reply] = []
        self._want = 0
        self._waiter: asyncio.Future[list[Reply]] | None = None
        self.lost: str | None = None  # why the session ended, once it has
        transport.set_protocol(self)

    @property
    def usable(self) -> bool:
        return self.lost is None and not self.transport.is_closing()

    async def exchange(self, commands: list[bytes], replies: int) -> list[Reply]:
        """Write `commands` (one group: callers split them when not pipelining) and wait
        for `replies` replies."""
        if self.lost is not None:
            raise SessionLost(self.lost, [])
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[list[Reply]] = loop.create_future()
        self._waiter = waiter
        self._replies, self._want = [], replies
        timer = loop.call_later(self.timeout_s, self._timed_out)
        self.transport.write(b"".join(commands))
        try:
            return await waiter
        finally:
            timer.cancel()
            self._waiter = None

    def close(self) -> None:
        self.lost = self.lost or "closed"
        self.transport.close()

    async def quit(self) -> None:
        if self.usable:
            try:
                await asyncio.wait_for(self.exchange([b"QUIT\r\n"], 1), 2)
            except (SessionLost, TimeoutError):
                pass
        self.close()

    # asyncio.Protocol -----------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer + data if self._buffer else data
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            line = buffer[start:end].rstrip(b"\r")
            start = end + 1
            text = line[4:].decode("utf-8", "replace")
            if line[3:4] == b"-":
                self._lines.append(text)
                continue
            try:
                code = int(line[:3])
            except ValueError:
                self._fail(f"the relay answered with a malformed line: {line[:80]!r}")
                return
            if self._lines:
                self._lines.append(text)
                text, self._lines = "\n".join(self._lines), []
            self._replies.append(Reply(code, text))
        self._buffer = buffer[start:]
        waiter = self._waiter
        if waiter is not None and len(self._replies) >= self._want and not waiter.done():
            waiter.set_result(self._replies)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(f"connection lost ({type(exc).__name__}: {exc})" if exc
                   else "connection closed by the relay")

    def eof_received(self) -> bool:
        self._fail("connection closed by the relay")
        return False

    def _timed_out(self) -> None:
        self._fail(f"no reply within {self.timeout_s:g} s")
        self.transport.abort()

    def _fail(self, why: str) -> None:
        self.lost = self.lost or why
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(SessionLost(self.lost, self._replies))


async def open_session(client: aiosmtplib.SMTP, timeout_s: float) -> Session:
    """Connect `client` (greeting, STARTTLS and AUTH as its settings say), say EHLO,
    and take its connection over. aiosmtplib's errors propagate."""
    await client.connect()
    if client.is_ehlo_or_helo_needed:
        try:
            await client.ehlo()
        except aiosmtplib.SMTPHeloError:
            await client.helo()
    protocol = client.protocol
    transport = protocol.transport if protocol is not None else None
    if transport is None:
        raise aiosmtplib.SMTPServerDisconnected("connection lost during setup")
    return Session(transport, pipelining=client.supports_extension("pipelining"),  # type: ignore[arg-type]
                   timeout_s=timeout_s, chunking=client.supports_extension("chunking"))


def new_client(host: str, port: int, *, username: str | None, password: str | None,
               implicit_tls: bool, start_tls: bool | None, verify: bool,
               timeout_s: float) -> aiosmtplib.SMTP:
    return aiosmtplib.SMTP(hostname=host, port=port, username=username, password=password,
                           use_tls=implicit_tls, start_tls=start_tls, validate_certs=verify,
                           timeout=timeout_s, local_hostname=_LOCAL_HOSTNAME)
