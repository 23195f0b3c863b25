"""A pool of sessions with one relay, and what the pool knows of the relay's state.

Mail to send waits in one line (`RelayPool.send` puts it there, in arrival order); up to
`max_connections` sessions take from it, each carrying message after message over one
connection (pipelined when the relay allows: `session.py`). A session opens only when
mail waits and every open one is busy, and closes after `idle_s` without work.

The relay's state (`RelayState`, changed only through `TRANSITIONS`, one log line per
change, never a traceback per message):
- UP: sessions send.
- DOWN: a connection could not be opened (refused, timed out, TLS or AUTH refused, a
  4xx/5xx greeting). One probe reconnects after a back-off that doubles up to
  `backoff_max_s`; mail waits meanwhile.
- SLOWED: the relay said "slow down" (421 anywhere, or a 4xx about its sending rate to
  MAIL or DATA: see `slow_down`). The message that got it goes back to the head of the
  line, untried as far as its retry policy knows, and nothing is sent for the back-off.
  A rate reply to RCPT is about the recipients' domains instead: the message fails with
  `SmtpSlowDown` naming them, and the email target holds those domains
  (`domain_holds.py`) while the relay carries on with other mail.
Waiting mail does not burn its attempts: it goes when the relay is back. Mail that has
waited `wait_s` fails as a temporary error (the job is retried later by the queue), so a
relay down for hours does not hold deliveries forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import aiosmtplib

from tidings.email.outbound import (
    ChunkedRound,
    Outbound,
    SlowDown,
    envelope_outcome,
    error_of,
    slow_down,
)
from tidings.email.pace import TokenBucket
from tidings.email.session import (
    Reply,
    Session,
    SessionLost,
    content,
    envelope,
    open_session,
)
from tidings.email.smtp_errors import SendResult, SmtpTemporaryError

log = logging.getLogger("tidings.email.relay")


class RelayState(StrEnum):
    UP = "UP"
    DOWN = "DOWN"
    SLOWED = "SLOWED"


TRANSITIONS: dict[RelayState, frozenset[RelayState]] = {
    RelayState.UP: frozenset({RelayState.DOWN, RelayState.SLOWED}),
    RelayState.DOWN: frozenset({RelayState.UP, RelayState.SLOWED}),
    RelayState.SLOWED: frozenset({RelayState.UP, RelayState.DOWN}),
}

#: Messages a chunked session (CHUNKING: `_carry_chunked`) writes at once: enough that a
#: busy session's write and read carry many, few enough that a session lost mid-write
#: leaves few messages in doubt.
CHUNKED_BATCH = 16


@dataclass
class RelayStatus:
    """What the pool tells about its relay: its state, since when and why."""

    state: RelayState = RelayState.UP
    since: float = field(default_factory=time.monotonic)
    reason: str = ""


class RelayPool:
    """Sessions with one relay, at most `max_connections` at once."""

    def __init__(self, name: str, connect: Callable[[], aiosmtplib.SMTP], *,
                 timeout_s: float = 30.0, max_connections: int = 4,
                 backoff_first_s: float = 1.0, backoff_max_s: float = 60.0,
                 wait_s: float = 300.0, idle_s: float = 60.0,
                 bucket: TokenBucket | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name  # host:port, for logs
        self.connect = connect
        self.timeout_s = timeout_s
        self.max_connections = max_connections
        self.backoff_first_s = backoff_first_s
        self.backoff_max_s = backoff_max_s
        self.wait_s = wait_s
        self.idle_s = idle_s
        self.clock = clock
        # The relay's pace, taken when a session is about to carry a message (not when
        # the message joins the line: the rate is what the relay sees, session opening
        # included). A paced pool does not pipeline one message into the next.
        self.bucket = bucket
        self.status = RelayStatus(since=clock())
        self.sent = 0
        self._line: deque[Outbound] = deque()
        self._workers: set[asyncio.Task[None]] = set()
        self._idle = 0  # workers waiting for mail
        self._wake = asyncio.Event()
        self._probe: asyncio.Task[None] | None = None
        self._backoff = backoff_first_s
        self._closing = False

    # the caller's side ---------------------------------------------------------------------

    async def send(self, sender: str, recipients: Sequence[str], data: bytes) -> SendResult:
        future: asyncio.Future[SendResult] = asyncio.get_running_loop().create_future()
        self._line.append(Outbound(sender, tuple(recipients), data, future, self.clock()))
        self._more()
        return await future

    @property
    def waiting(self) -> int:
        return len(self._line)

    async def close(self) -> None:
        self._closing = True
        self._wake.set()
        if self._probe is not None:
            self._probe.cancel()
        for item in self._line:
            item.settle(SmtpTemporaryError(0, "the node is stopping"))
        self._line.clear()
        await asyncio.gather(*self._workers, *([self._probe] if self._probe else []),
                             return_exceptions=True)

    # state -----------------------------------------------------------------------------------

    def _move(self, to: RelayState, reason: str) -> None:
        status = self.status
        if to is status.state:
            return
        if to not in TRANSITIONS[status.state]:
            raise RuntimeError(f"relay {self.name}: {status.state} → {to} is not a transition")
        now = self.clock()
        was, after = status.state, now - status.since
        self.status = RelayStatus(to, now, reason)
        if to is RelayState.DOWN:
            log.warning("SMTP relay %s is down: %s; %d emails wait for it", self.name, reason,
                        len(self._line))
        elif to is RelayState.SLOWED:
            log.warning("SMTP relay %s asked to slow down: %s; holding its emails, trying "
                        "it again in about %g s", self.name, reason, self._backoff)
        elif was is RelayState.DOWN:
            log.info("SMTP relay %s is back up after %.1f s", self.name, after)
        else:
            log.info("SMTP relay %s accepts mail again after %.1f s", self.name, after)

    def _more(self) -> None:
        """Mail was added or given back: wake an idle session, or open one."""
        if self.status.state is not RelayState.UP or self._closing:
            return
        if self._idle:
            self._wake.set()
        elif len(self._workers) < self.max_connections:
            self._start(None)

    def _start(self, session: Session | None, *, probe: bool = False) -> None:
        task = asyncio.create_task(self._work(session, probe), name=f"smtp:{self.name}")
        self._workers.add(task)
        task.add_done_callback(self._workers.discard)

    def _trouble(self, to: RelayState, reason: str, items: Sequence[Outbound]) -> None:
        """Give `items` back at the head of the line (untried) and start the back-off."""
        self._line.extendleft(reversed(items))
        if self.status.state is RelayState.UP or to is RelayState.DOWN:
            self._move(to, reason)
        if self._probe is None or self._probe.done():
            self._probe = asyncio.create_task(self._recover(), name=f"smtp-probe:{self.name}")

    async def _recover(self) -> None:
        """After a back-off, one session tries the relay again; others follow once it is up."""
        while not self._closing:
            delay = self._backoff * random.uniform(0.8, 1.2)
            self._backoff = min(self._backoff * 2, self.backoff_max_s)
            await asyncio.sleep(delay)
            self._expire()
            if not self._line:
                continue  # nothing to send: probe when mail comes (still not UP)
            try:
                session = await self._open()
            except SmtpTemporaryError as exc:
                self._move(_trouble_of(exc), exc.message)
                continue
            if self.status.state is RelayState.DOWN:
                self._move(RelayState.UP, "")  # reachable again: every session may go
                self._more()
            # A slowed relay is UP again only once it takes a message (`_settle`): this
            # session tries one, the others wait.
            self._start(session, probe=True)
            return

    def _expire(self) -> None:
        """Fail what waited longer than `wait_s`: its job is retried later by the queue."""
        limit = self.clock() - self.wait_s
        if not self._line or self._line[0].since > limit and self._line[-1].since > limit:
            return
        why = f"relay {self.name} is {self.status.state.lower()} ({self.status.reason})"
        kept: deque[Outbound] = deque()
        for item in self._line:
            if item.since <= limit:
                item.settle(SmtpTemporaryError(0, f"{why}; waited {self.wait_s:g} s"))
            else:
                kept.append(item)
        self._line = kept

    # a session's loop --------------------------------------------------------------------------

    async def _open(self) -> Session:
        client = self.connect()
        try:
            return await open_session(client, self.timeout_s)
        except aiosmtplib.SMTPResponseException as exc:
            # Even a 5xx here (e.g. 535 bad credentials) refuses the session, not a
            # message: no bounce, and mail goes once the relay or setup is fixed.
            client.close()
            raise SmtpTemporaryError(exc.code, f"{exc.code} {exc.message}") from None
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
            client.close()
            text = str(exc) or type(exc).__name__
            raise SmtpTemporaryError(0, f"cannot connect ({text})") from None

    async def _work(self, session: Session | None, probe: bool = False) -> None:
        """Carry mail while the relay is UP (a probe: one round whatever the state)."""
        try:
            while not self._closing and (probe or self.status.state is RelayState.UP):
                if not self._line:
                    if not await self._wait_for_mail():
                        return
                    continue
                if session is None or not session.usable:
                    try:
                        session = await self._open()
                    except SmtpTemporaryError as exc:
                        self._trouble(_trouble_of(exc), exc.message, ())
                        return
                if not self._line:
                    continue
                session = await self._carry(session)
                if probe and self.status.state is not RelayState.UP and (
                        self._probe is None or self._probe.done()):
                    # answered, and not with "slow down" (a refusal of that message)
                    self._move(RelayState.UP, "")
                    self._more()
                probe = False
        finally:
            if session is not None:
                await session.quit()

    async def _wait_for_mail(self) -> bool:
        self._idle += 1
        self._wake.clear()
        try:
            # (asyncio.timeout, not wait_for: no task made per wait, and a busy session
            # waits here after every round)
            async with asyncio.timeout(self.idle_s):
                await self._wake.wait()
            return True
        except TimeoutError:
            return False
        finally:
            self._idle -= 1

    async def _carry(self, session: Session) -> Session | None:
        """Send from the line while there is mail, one transaction after another; returns
        the session, or None when it ended."""
        if session.chunking and self.bucket is None:
            return await self._carry_chunked(session)
        item = self._line.popleft()
        if self.bucket is not None:
            await self.bucket.acquire()
        pending = [item]  # taken from the line and not settled
        accepted: dict[str, Reply] = {}
        content_out = False  # item's content went out: a lost session may have taken it
        try:
            got = await self._commands(session, envelope(item.sender, item.recipients))
            while True:
                outcome = envelope_outcome(item, got)
                following = None
                if self._line and session.pipelining and self.bucket is None and \
                        self.status.state is RelayState.UP:
                    following = self._line.popleft()
                    pending.append(following)
                if outcome is None:  # refused (and settled) before its content
                    pending.remove(item)
                    await self._commands(session, [b"RSET\r\n"])
                    if following is None:
                        return session
                    item = following
                    got = await self._commands(session, envelope(item.sender, item.recipients))
                    continue
                accepted, content_out = outcome, True
                commands = [content(item.data)]
                if following is not None:
                    commands += envelope(following.sender, following.recipients)
                got = await self._commands(session, commands)
                final, got = got[0], got[1:]
                if slow_down(final):
                    raise SlowDown(final)
                pending.remove(item)
                content_out = False
                self._settle(item, final, accepted)
                session.messages += 1
                if following is None:
                    return session
                item = following
        except SlowDown as exc:
            self._trouble(RelayState.SLOWED, str(exc.reply), pending)
        except SessionLost as exc:
            self._lost(session, exc, pending, item if content_out else None, accepted)
        session.close()
        return None

    async def _carry_chunked(self, session: Session) -> Session | None:
        """`_carry` with CHUNKING: up to CHUNKED_BATCH messages in one write and their
        replies in one read (`ChunkedRound`). The first message's envelope goes alone: a
        session the relay closed while it waited is found before any content is out (its
        mail goes back in line, untried). A message whose content went out and got no
        answer may have been taken (SMTP cannot tell): a temporary failure, retried by
        its policy, as with DATA."""
        item = self._line.popleft()
        try:
            got = await session.exchange(envelope(item.sender, item.recipients, data=False),
                                         1 + len(item.recipients))
            accepted = envelope_outcome(item, got, chunked=True)
        except SlowDown as exc:
            self._trouble(RelayState.SLOWED, str(exc.reply), [item])
            session.close()
            return None
        except SessionLost as exc:
            self._lost(session, exc, [item], None, {})
            session.close()
            return None
        this = ChunkedRound(reset=accepted is None,
                            entries=[] if accepted is None else [(item, accepted)])
        while True:
            while self._line and len(this.entries) < CHUNKED_BATCH and \
                    self.status.state is RelayState.UP:
                this.entries.append((self._line.popleft(), None))
            commands, want = this.commands()
            lost: SessionLost | None = None
            try:
                got = await session.exchange(commands, want) if commands else []
            except SessionLost as exc:
                got, lost = exc.replies, exc
            this.read(got)
            for done, final, refused in this.done:
                self._settle(done, final, refused)
                session.messages += 1
            for gone in this.unanswered:
                gone.settle(SmtpTemporaryError(0, f"relay {self.name}: {lost}"))
            if this.slowed:
                self._trouble(RelayState.SLOWED, str(this.slowed_by), this.slowed)
            if lost is not None or this.slowed:
                session.close()
                return None
            if not this.entries:
                return session
            this = ChunkedRound(reset=this.refused)

    def _lost(self, session: Session, exc: SessionLost, pending: list[Outbound],
              sent: Outbound | None, accepted: dict[str, Reply]) -> None:
        """The session ended mid-exchange. Mail whose content went out without an answer
        may have been taken (SMTP cannot tell): a temporary failure, retried by its
        policy. The rest goes back in line, untried."""
        replies = exc.replies
        if sent is not None:
            pending.remove(sent)
            if replies and not slow_down(replies[0]):
                self._settle(sent, replies[0], accepted)
            else:
                sent.settle(SmtpTemporaryError(0, f"relay {self.name}: {exc}"))
        slowed = next((r for r in replies if slow_down(r)), None)
        if slowed is not None:
            self._trouble(RelayState.SLOWED, str(slowed), pending)
        elif session.messages == 0:  # a fresh session failing: trouble, not a stale one
            self._trouble(RelayState.DOWN, str(exc), pending)
        else:  # a reused session the relay had closed: a fresh one carries on
            self._line.extendleft(reversed(pending))

    async def _commands(self, session: Session, commands: list[bytes]) -> list[Reply]:
        """One exchange when pipelining; otherwise each command waits for its reply (and
        the rest of a refused envelope is not sent)."""
        if session.pipelining or len(commands) == 1:
            return await session.exchange(commands, len(commands))
        replies: list[Reply] = []
        for command in commands:
            replies += await session.exchange([command], 1)
            if replies[-1].code >= 400 and command.startswith(b"MAIL"):
                break
        return replies

    def _settle(self, item: Outbound, final: Reply, refused: dict[str, Reply]) -> None:
        if final.code == 250:
            self.sent += 1
            self._backoff = self.backoff_first_s  # it takes mail: the next trouble starts short
            if self.status.state is not RelayState.UP:
                self._move(RelayState.UP, "")
                self._more()
            item.settle(SendResult(reply=str(final),
                                   refused={a: str(r) for a, r in refused.items()}))
        else:
            item.settle(error_of(final, item.recipients))


def _trouble_of(exc: SmtpTemporaryError) -> RelayState:
    """A session refused with "slow down" (421 at the greeting: too many connections)
    is the relay's pace; anything else, the relay is down."""
    return RelayState.SLOWED if slow_down(Reply(exc.code, exc.message)) else RelayState.DOWN


async def close_all(pools: Sequence[RelayPool]) -> None:
    for pool in pools:
        with contextlib.suppress(Exception):
            await pool.close()
