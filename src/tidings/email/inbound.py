"""The inbound SMTP listener for returned mail (TIDINGS_BOUNCE_LISTEN): receiving MTAs
deliver DSNs (RFC 3464) and ARF complaint reports (RFC 5965) to the Return-Path of the
mail tidings sent (TIDINGS_BOUNCE_ADDRESS, VERP-tagged per delivery); each report is
parsed (`returns.py`) and recorded (`bounces.py`) before the 250, so a report that could
not be stored gets a 451 and its MTA tries again later.

It is an SMTP server on the node's event loop (aiosmtpd's protocol), a service with
`run()` and `stop()` like the node's other loops. No AUTH: the MTAs that send bounces do
not authenticate. Instead it never relays and accepts only recipients of the bounce
address's own domain (and refuses the rest with 550): beyond loopback that address is
required; on loopback without one, any recipient is taken. Messages are capped
at `MAX_BYTES`. Anything else that arrives (an auto-reply, a human answer) is accepted
and dropped, with a debug line.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiosmtpd.smtp import SMTP, Envelope, Session

from tidings.email.bounces import ReturnedMail
from tidings.email.returns import Returned, delivery_of_verp, parse_report
from tidings.errors import ValidationError
from tidings.runtime.bridge import Bridge
from tidings.settings import Settings, is_loopback

log = logging.getLogger("tidings.email.inbound")
MAX_BYTES = 1024 * 1024  # reports quote the original, or only its headers


def listen_address(value: str) -> tuple[str, int]:
    host, colon, port = value.rpartition(":")
    if not colon or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValidationError("TIDINGS_BOUNCE_LISTEN", "must be host:port")
    return host.strip("[]") or "127.0.0.1", int(port)


class _Handler:
    def __init__(self, listener: BounceListener) -> None:
        self.listener = listener

    async def handle_RCPT(self, server: SMTP, session: Session, envelope: Envelope,
                          address: str, rcpt_options: list[str]) -> str:
        domain = self.listener.domain
        if domain is not None and address.rpartition("@")[2].lower() != domain:
            return "550 5.7.1 This server takes returned mail for its own domain only"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        data = envelope.original_content or envelope.content or b""
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogateescape")
        found: list[Returned] = []
        for rcpt in envelope.rcpt_tos or [""]:
            found += parse_report(data, delivery_of_verp(rcpt))
            if found:
                break  # one report, however many of our addresses it was sent to
        if not found:
            log.debug("inbound mail from %s is neither a DSN nor an ARF report: dropped",
                      envelope.mail_from)
            return "250 OK"
        try:
            events = await self.listener.bridge.run(self.listener.returns.record, found)
        except Exception as exc:  # the store is away: the sending MTA retries
            log.warning("could not record %d returned-mail events: %s", len(found), exc)
            return "451 4.3.0 Could not record the report now; try again later"
        for e in events:
            log.info("returned mail: %s %s (%s) delivery %s", e.kind, e.address, e.detail,
                     e.delivery_id or "-")
        return "250 OK"


class BounceListener:
    def __init__(self, returns: ReturnedMail, bridge: Bridge, settings: Settings) -> None:
        if not settings.bounce_listen:
            raise ValidationError("TIDINGS_BOUNCE_LISTEN", "is not set")
        self.returns = returns
        self.bridge = bridge
        self.host, self.port = listen_address(settings.bounce_listen)
        address = settings.bounce_address or ""
        if not is_loopback(self.host) and "@" not in address:
            raise ValidationError("TIDINGS_BOUNCE_ADDRESS", "is needed with a bounce "
                                  "listener beyond loopback: its domain is the only one "
                                  "the listener takes mail for")
        self.domain = address.rpartition("@")[2].lower() if "@" in address else None
        self._stopping = asyncio.Event()
        self.bound: tuple[str, int] | None = None  # the address it listens on, once it does

    def _protocol(self) -> Any:
        return SMTP(_Handler(self), data_size_limit=MAX_BYTES, hostname="tidings",
                    enable_SMTPUTF8=True, ident="tidings returned-mail listener")

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(self._protocol, self.host, self.port)
        sockname = server.sockets[0].getsockname()
        self.bound = (sockname[0], sockname[1])
        log.info("listening for returned mail (DSNs, ARF reports) on %s:%d", *self.bound)
        try:
            await self._stopping.wait()
        finally:
            server.close()
            await server.wait_closed()

    def stop(self) -> None:
        self._stopping.set()
