"""A message in a relay pool's line, and what the relay's replies to its envelope make of
it: the rules `RelayPool` (relay.py) applies to every transaction, DATA or BDAT alike.

With CHUNKING, many messages share one write and one read: `ChunkedRound` says what each
of them is owed and reads their replies back.

A reply about the relay's pace rather than the message ("slow down": see `slow_down`)
raises `SlowDown`, so the pool holds the relay and gives the message back untried; a
refusal of the message settles it with the error its retry policy reads (4xx: temporary,
5xx: permanent, the refused recipients named).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from tidings.email.session import Reply, chunk, envelope
from tidings.email.smtp_errors import (
    SendResult,
    SmtpPermanentError,
    SmtpSlowDown,
    SmtpTemporaryError,
)

_RATE_TEXT = re.compile(r"\brate\b|throttl|slow down|too fast|"
                        r"too many (messages|connections|emails|sessions)", re.IGNORECASE)


def slow_down(reply: Reply) -> bool:
    """With CHUNKING, many messages share one write and one read: `ChunkedRound` says what each
of them is owed and reads their replies back.

A reply about the relay's pace rather than this message: 421 (the relay closes
    the session: RFC 5321 §3.8), or a 4xx that says so ("454 Throttling failure: Maximum
    sending rate exceeded", "451 4.7.0 rate limited"). Other 4xx ("451 4.3.0 try later",
    "452 4.2.2 mailbox full") concern the message: it is retried by its policy."""
    return reply.code == 421 or (400 <= reply.code < 500 and bool(_RATE_TEXT.search(reply.text)))


class SlowDown(Exception):
    def __init__(self, reply: Reply) -> None:
        super().__init__(str(reply))
        self.reply = reply


@dataclass(slots=True)
class Outbound:
    """A message waiting for, or in, a session."""

    sender: str
    recipients: tuple[str, ...]
    data: bytes
    future: asyncio.Future[SendResult]
    since: float  # when it joined the line (monotonic)

    def settle(self, result: SendResult | BaseException) -> None:
        if self.future.done():
            return
        if isinstance(result, BaseException):
            self.future.set_exception(result)
        else:
            self.future.set_result(result)


def envelope_outcome(item: Outbound, got: list[Reply], *,
                     chunked: bool = False) -> dict[str, Reply] | None:
    """The refused recipients when the content may follow, else None (the item is
    settled). `got`: the replies to MAIL, each RCPT and (unless `chunked`: BDAT needs no
    go-ahead) DATA, whose 354 says the content may follow. Raises SlowDown when the
    relay asked to slow down (the item is not settled: it goes back in line)."""
    mail = got[0]
    if slow_down(mail):
        raise SlowDown(mail)
    refused: dict[str, Reply] = {}
    for rcpt, reply in zip(item.recipients, got[1:1 + len(item.recipients)], strict=False):
        if reply.code not in (250, 251):
            refused[rcpt] = reply
    data = got[1 + len(item.recipients)] if len(got) > 1 + len(item.recipients) else None
    if mail.code == 250 and len(refused) < len(item.recipients) and (
            chunked or (data is not None and data.code == 354)):
        return refused
    if mail.code != 250:
        item.settle(error_of(mail, item.recipients))
    elif len(refused) == len(item.recipients):
        replies = list(refused.values())
        if any(r.code == 421 for r in replies):
            raise SlowDown(replies[0])  # the relay closes the session: its own pace
        if all(slow_down(r) for r in replies):
            # a rate reply to RCPT concerns the recipients' domains (a relay paces
            # each destination): they are held, the relay goes on with other mail
            item.settle(SmtpSlowDown(replies[0].code, replies[0].text, sorted(
                {a.rpartition("@")[2].lower() for a in refused})))
            return None
        if all(400 <= r.code < 500 for r in replies):
            item.settle(SmtpTemporaryError(replies[0].code, replies[0].text))
        else:
            item.settle(SmtpPermanentError(replies[0].code, replies[0].text,
                                           [a for a, r in refused.items() if r.code >= 500]))
    else:
        assert data is not None
        item.settle(error_of(data, item.recipients))
    return None


def error_of(reply: Reply, recipients: Sequence[str]) -> Exception:
    if 500 <= reply.code < 600:
        return SmtpPermanentError(reply.code, reply.text, recipients)
    return SmtpTemporaryError(reply.code, reply.text)


@dataclass(slots=True)
class ChunkedRound:
    """One write of a chunked session (CHUNKING with PIPELINING, RFC 3030): each
    message's MAIL, RCPT and BDAT LAST with its content, one after another, led by an
    RSET when the round before ended a transaction without 250 (`reset`). An entry's
    refused recipients are known already when its envelope was answered alone (the
    session's first message); None: its envelope goes in this round.

    `read` sorts the replies: `done` (the relay's final reply: the pool settles it),
    `slowed` (it asked to slow down: back in line, untried), `unanswered` (the session
    ended after its content went out and before its answer: it may have been taken)."""

    reset: bool = False
    entries: list[tuple[Outbound, dict[str, Reply] | None]] = field(default_factory=list)
    done: list[tuple[Outbound, Reply, dict[str, Reply]]] = field(default_factory=list)
    slowed: list[Outbound] = field(default_factory=list)
    slowed_by: Reply | None = None
    unanswered: list[Outbound] = field(default_factory=list)
    refused: bool = False  # a transaction ended without 250: the next round resets

    def commands(self) -> tuple[list[bytes], int]:
        """The round's commands and how many replies they are owed."""
        commands = [b"RSET\r\n"] if self.reset else []
        want = len(commands)
        for item, accepted in self.entries:
            if accepted is None:
                commands += envelope(item.sender, item.recipients, data=False)
                want += 1 + len(item.recipients)
            commands.append(chunk(item.data))
            want += 1
        return commands, want

    def read(self, got: list[Reply]) -> None:
        at = int(self.reset)
        for item, accepted in self.entries:
            need = 1 if accepted is not None else 2 + len(item.recipients)
            replies, at = got[at:at + need], at + need
            if len(replies) < need:  # the session ended first
                if accepted is None and replies and slow_down(replies[0]):
                    self._slowed(item, replies[0])  # refused at MAIL: not taken
                else:
                    self.unanswered.append(item)
                continue
            try:
                if accepted is None:
                    accepted = envelope_outcome(item, replies[:-1], chunked=True)
                    if accepted is None:  # settled; its BDAT was refused and dropped
                        self.refused = True
                        continue
            except SlowDown as exc:
                self._slowed(item, exc.reply)
                continue
            final = replies[-1]
            if slow_down(final):
                self._slowed(item, final)
            else:
                self.refused |= final.code != 250
                self.done.append((item, final, accepted))

    def _slowed(self, item: Outbound, reply: Reply) -> None:
        self.slowed.append(item)
        self.slowed_by = self.slowed_by or reply
