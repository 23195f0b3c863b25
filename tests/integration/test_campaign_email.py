"""End to end: a 1,000-recipient, 2-step campaign fanned out, fired by a node and delivered
to a real SMTP relay (aiosmtpd); then the campaign's counts."""

from __future__ import annotations

import asyncio
import io
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from email_relay import Relay, running_relay

from tidings.campaigns.fanout import FanoutOptions
from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.model.campaigns import Step
from tidings.node import Node
from tidings.queues.internal import DELIVERY_QUEUE, EMAIL_QUEUE
from tidings.settings import Settings

pytestmark = pytest.mark.slow
N = 1000
ZONES = ["UTC", "Etc/UTC", "Africa/Abidjan"]  # UTC+0 all year: the same wall time
#: The campaign's day, on a frozen clock: the steps fire when the test moves it, not when
#: the wall clock gets there.
START = datetime(2030, 6, 3, 11, 59, tzinfo=UTC)


def ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def test_campaign_of_1000_recipients_and_2_steps_is_delivered(tmp_path: Path) -> None:
    clock = FrozenClock(ms(START))
    first, second = START + timedelta(minutes=1), START + timedelta(minutes=1, seconds=3)
    with Tidings(settings=Settings(db=f"sqlite:///{tmp_path}/c.db"), clock=clock) as t:
        t.email.create_template("hello", "Hello {{name}}", text="Hi {{name}}, plan {{plan}}")
        t.email.create_template("later", "Later {{name}}", text="Again, {{name}}")
        rows = "id,email,timezone,name,plan\n" + "".join(
            f"p{i},person{i}@example.org,{ZONES[i % 3]},Person {i},pro\n" for i in range(N))
        summary = t.campaigns.fanout(io.BytesIO(rows.encode()), FanoutOptions(
            campaign="launch", template="hello", sender="news@example.com",
            steps=(Step("hello", 0, first.strftime("%H:%M:%S")),
                   Step("later", 0, second.strftime("%H:%M:%S"), "later")),
            on=first.date(), local_time="00:00"))
        assert (summary.schedules_created, summary.errors) == (2 * N, 0)
        relay = Relay()
        with running_relay(relay) as url:
            # The dispatcher looks at the (frozen) clock every 50 ms: moving it notifies nothing.
            node = Node(t, Settings(db=t.settings.db, smtp_url=url, concurrency=8,
                                    shutdown_grace_s=2, poll_fallback_s=0.05))

            def drained() -> bool:
                counts = [t.queues.describe(q).counts for q in (DELIVERY_QUEUE, EMAIL_QUEUE)]
                return sum(c.visible + c.in_flight + c.delayed for c in counts) == 0 and \
                    t.campaigns.status("launch").counts.sent == len(relay.received)

            async def main() -> None:
                task = asyncio.create_task(node.run())

                async def until(done: Callable[[], bool], what: str) -> None:
                    deadline = time.monotonic() + 120
                    while not done():
                        assert not task.done(), "the node stopped"
                        assert time.monotonic() < deadline, f"timed out waiting for {what}"
                        await asyncio.sleep(0.05)

                clock.set(ms(first))
                await until(lambda: len(relay.received) >= N and drained(), "the first step")
                assert len(relay.received) == N  # the second step waits for its own time
                clock.set(ms(second))
                await until(lambda: len(relay.received) >= 2 * N and drained(), "the second step")
                node.stop()
                await task

            try:
                asyncio.run(main())
            finally:
                node.bridge.close()
        assert len(relay.received) == 2 * N
        per_person = Counter(tuple(r.rcpt_tos) for r in relay.received)
        assert set(per_person.values()) == {2} and len(per_person) == N
        subjects = Counter(r.message["Subject"].split()[0] for r in relay.received)
        assert subjects == {"Hello": N, "Later": N}
        sample = next(r for r in relay.received if r.rcpt_tos == ["person7@example.org"]
                      and r.message["Subject"] == "Hello Person 7")
        assert "Hi Person 7, plan pro" in sample.message.get_body(("plain",)).get_content()
        # Bulk mail: every message carries the one-click unsubscribe (its target says so;
        # a SendEmail without ListManagementOptions alone would not).
        assert {r.message["List-Unsubscribe-Post"] for r in relay.received} == {
            "List-Unsubscribe=One-Click"}
        assert "/unsubscribe/" in sample.message["List-Unsubscribe"]
        hello_at = min(r.at for r in relay.received if r.message["Subject"].startswith("Hello"))
        later_at = min(r.at for r in relay.received if r.message["Subject"].startswith("Later"))
        assert later_at > hello_at  # the second step waited for its own time
        view = t.campaigns.status("launch")
        assert (view.counts.scheduled, view.counts.fired, view.counts.sent) == (0, 2 * N, 2 * N)
        assert (view.counts.failed, view.counts.suppressed) == (0, 0)
