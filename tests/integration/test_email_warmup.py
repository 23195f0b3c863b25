"""A sending domain's warm-up (TIDINGS_EMAIL_WARMUP) through a running node into a real
aiosmtpd relay, on both backends: mail over the day's cap is paced to the next UTC day,
not failed, and no attempt is counted; another domain has a ladder of its own. The node's
wall clock is injected and stepped a day forward (and starts at noon UTC, so the test does
not depend on the hour it runs at)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from email_relay import Relay, running_relay
from serving import run_with

from tidings.client import Tidings
from tidings.email.warmup import DAY_MS, parse_ladder
from tidings.errors import ValidationError
from tidings.model.email import DeliveryState, EmailMessage
from tidings.node import Node
from tidings.settings import Settings


class OffsetClock:
    """The wall clock plus an offset the test sets (monotonic time runs on untouched)."""

    def __init__(self) -> None:
        real = time.time_ns() // 1_000_000
        self.offset = (real // DAY_MS + 1) * DAY_MS + DAY_MS // 2 - real  # tomorrow noon

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset


@pytest.fixture
def t(db_url: str) -> Iterator[Tidings]:
    with Tidings(settings=Settings(db=db_url), clock=OffsetClock()) as c:
        yield c


def states(t: Tidings) -> dict[str, DeliveryState]:
    return {d.recipients[0]: d.state for d in t.email.log()[0]}


async def until(check: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def test_mail_over_the_days_cap_is_paced_to_the_next_day(t: Tidings) -> None:
    clock = t.clock
    assert isinstance(clock, OffsetClock)
    for who, sender in (("a", "news@example.com"), ("b", "news@example.com"),
                        ("c", "news@example.com"), ("d", "hi@other.example")):
        t.email.send(EmailMessage(from_address=sender, to=(f"{who}@example.org",),
                                  subject="Hello", text="Hi"))
    relay = Relay()
    with running_relay(relay) as url:
        node = Node(t, Settings(db=t.settings.db, smtp_url=url, email_warmup="2,3",
                                poll_fallback_s=0.2, concurrency=4, shutdown_grace_s=2))

        def day_one_done() -> bool:
            rows = t.email.log()[0]
            return sorted(d.state for d in rows) == [DeliveryState.QUEUED] + [
                DeliveryState.SENT] * 3 and any((d.detail or "").startswith("paced:")
                                                for d in rows)

        async def scenario(_: asyncio.Task[None]) -> None:
            await until(day_one_done)
            [paced] = [d for d in t.email.log()[0] if d.state is DeliveryState.QUEUED]
            assert paced.detail == ("paced: the warm-up's daily cap for example.com is "
                                    "reached today (TIDINGS_EMAIL_WARMUP); it goes after "
                                    "midnight UTC")
            assert len(relay.received) == 3  # still: not retried within the day
            clock.offset += DAY_MS  # the next UTC day: its cap is 3
            await until(lambda: len(relay.received) == 4)
            await until(lambda: set(states(t).values()) == {DeliveryState.SENT})

        run_with(node, scenario)
    senders = [r.message["From"] for r in relay.received]
    assert senders.count("news@example.com") == 3 and senders.count("hi@other.example") == 1
    assert [d.attempts for d in t.email.log()[0]] == [1, 1, 1, 1]  # pacing cost none


def test_a_ladder_is_whole_numbers() -> None:
    assert parse_ladder("50, 100,250") == (50, 100, 250)
    assert parse_ladder(None) == ()
    for bad in ("50,x", "0,10", "-5", "1.5"):
        with pytest.raises(ValidationError, match="TIDINGS_EMAIL_WARMUP"):
            parse_ladder(bad)
