"""The forecast shows when a burst held back by a limit drains: per limit key with a rate,
node-wide (`tidings forecast`, /v1/forecast's `limited`) and for one campaign (its page)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import UTC, date, datetime

import pytest

from tidings.campaigns.fanout import FanoutOptions
from tidings.campaigns.limited import spread_by_rate
from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.model.campaigns import Step
from tidings.model.schedules import ScheduleSpec, Target, TargetKind
from tidings.settings import Settings


def utc(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


@pytest.fixture
def t(db_url: str, clock: FrozenClock) -> Iterator[Tidings]:
    clock.set(utc("2027-03-01T08:00"))
    with Tidings(settings=Settings(db=db_url, smtp_url="smtp://Relay.Example:25"),
                 clock=clock) as client:
        yield client


def test_a_limited_queue_burst_drains_at_its_rate(t: Tidings) -> None:
    t.queues.create_queue("orders")
    specs = [ScheduleSpec(f"o{n}", "at(2027-03-01T08:30:00)", Target(TargetKind.QUEUE, "orders"))
             for n in range(300)]
    for spec in specs:
        t.schedules.create(spec)
    t.schedules.create(ScheduleSpec("h", "at(2027-03-01T08:30:00)",
                                    Target(TargetKind.WEBHOOK, "https://hooks.example/x")))
    assert t.campaigns.forecast(hours=1).limited == []  # no limit: nothing shown
    t.limits.set("queue:orders", rate="1/s")
    t.limits.set("webhook", concurrency=2)  # no rate: nothing to forecast
    [orders] = t.campaigns.forecast(hours=1).limited
    assert (orders["key"], orders["rate"], orders["firings"]) == ("queue:orders", "1/s", 300)
    assert orders["started"][30:35] == [60] * 5 and sum(orders["started"]) == 300
    assert orders["drains_at_ms"] == utc("2027-03-01T08:35")
    t.limits.set("queue", rate="1/min")  # (the queue's own setting stands)
    [still] = t.campaigns.forecast(hours=1).limited
    assert still["drains_at_ms"] == utc("2027-03-01T08:35")
    t.limits.delete("queue:orders")  # now the name's: one a minute, past the horizon
    [slow] = t.campaigns.forecast(hours=1).limited
    assert slow["rate"] == "1/min" and sum(slow["started"]) == 30
    assert slow["drains_at_ms"] is None


def test_a_campaigns_page_shows_when_its_mail_drains_through_the_relay(t: Tidings) -> None:
    t.email.create_template("welcome", "Welcome", text="Hi")
    rows = "id,email,timezone\n" + "".join(f"r{i},u{i}@example.com,UTC\n" for i in range(40))
    t.campaigns.fanout(io.BytesIO(rows.encode()), FanoutOptions(
        campaign="spring", template="welcome", sender="news@example.com",
        steps=(Step("only", 0),), on=date(2027, 3, 1), local_time="09:00"))
    assert t.campaign_views.limited("spring") == []
    t.limits.set("smtp", rate="10/min")  # each relay: this node's is relay.example
    [relay] = t.campaign_views.limited("spring")
    assert (relay.key, relay.firings) == ("smtp:relay.example", 40)
    assert relay.drains_at_ms == utc("2027-03-01T09:04")
    assert t.campaigns.forecast(hours=6).limited[0]["key"] == "smtp:relay.example"


def test_spread_by_rate_carries_the_excess_forward() -> None:
    assert spread_by_rate([5, 0, 0, 1], 2) == [2, 2, 1, 1]
    assert spread_by_rate([3, 0, 0, 0, 0, 0], 0.5) == [0, 1, 0, 1, 0, 1]
