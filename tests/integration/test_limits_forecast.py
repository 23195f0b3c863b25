"""The forecast shows when a burst held back by a limit drains: per limit key with a rate,
a concurrency or a pause (a queue's, a webhook host's, the relay's, a recipient domain's),
node-wide (`tidings forecast`, /v1/forecast's `limited`) and for one campaign (its page)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import httpx
import pytest
from cli_runner import Cli
from serving import running_server

from tidings.campaigns.fanout import FanoutOptions
from tidings.campaigns.limited import spread, spread_by_rate
from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.model.campaigns import Step
from tidings.model.schedules import ScheduleSpec, Target, TargetKind
from tidings.server.app import create_app
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


def _spring_campaign(t: Tidings) -> None:
    """40 welcome mails to example.com, all due at 09:00 UTC on 1 March 2027."""
    t.email.create_template("welcome", "Welcome", text="Hi")
    rows = "id,email,timezone\n" + "".join(f"r{i},u{i}@example.com,UTC\n" for i in range(40))
    t.campaigns.fanout(io.BytesIO(rows.encode()), FanoutOptions(
        campaign="spring", template="welcome", sender="news@example.com",
        steps=(Step("only", 0),), on=date(2027, 3, 1), local_time="09:00"))


def test_a_campaigns_page_shows_when_its_mail_drains_through_the_relay(t: Tidings) -> None:
    _spring_campaign(t)
    assert t.campaign_views.limited("spring") == []
    t.limits.set("smtp", rate="10/min")  # each relay: this node's is relay.example
    [relay] = t.campaign_views.limited("spring")
    assert (relay.key, relay.firings) == ("smtp:relay.example", 40)
    assert relay.drains_at_ms == utc("2027-03-01T09:04")
    assert t.campaigns.forecast(hours=6).limited[0]["key"] == "smtp:relay.example"


def test_spread_by_rate_carries_the_excess_forward() -> None:
    assert spread_by_rate([5, 0, 0, 1], 2) == [2, 2, 1, 1]
    assert spread_by_rate([3, 0, 0, 0, 0, 0], 0.5) == [0, 1, 0, 1, 0, 1]


def test_spread_lets_nothing_start_while_paused() -> None:
    inf = float("inf")
    assert spread([4, 0, 0, 0], [0, 0, inf, inf]) == [0, 0, 4, 0]
    assert spread([5, 1, 0, 0], [0, 1.5, 2, 2]) == [0, 1, 2, 2]
    assert spread([3, 0, 0], [0, 0.5, 1]) == [0, 0, 1]  # (a pause ends no credit early)


def burst_at(t: Tidings, n: int, at: str, target: Target, prefix: str) -> None:
    for i in range(n):
        t.schedules.create(ScheduleSpec(f"{prefix}{i}", f"at({at})", target))


def email_to(address: str) -> Target:
    return Target(TargetKind.EMAIL, "", input=json.dumps({
        "FromEmailAddress": "news@example.com", "Destination": {"ToAddresses": [address]},
        "Content": {"Simple": {"Subject": {"Data": "hi"}, "Body": {"Text": {"Data": "b"}}}}}))


def test_a_recipient_domains_key_is_forecast_from_each_firings_input(t: Tidings) -> None:
    for i in range(30):
        t.schedules.create(ScheduleSpec(f"slow{i}", "at(2027-03-01T08:30:00)",
                                        email_to(f"u{i}@Slow.Example")))
    for i in range(10):
        t.schedules.create(ScheduleSpec(f"fast{i}", "at(2027-03-01T08:30:00)",
                                        email_to(f"Ann <a{i}@fast.example>")))
    t.limits.set("email-domain:slow.example", rate="10/min")
    [slow] = t.campaigns.forecast(hours=1).limited
    assert (slow.get("key"), slow["rate"], slow["firings"]) == (
        "email-domain:slow.example", "10/min", 30)
    assert slow["started"][30:33] == [10, 10, 10]
    assert slow["drains_at_ms"] == utc("2027-03-01T08:33")
    t.limits.set("email-domain", rate="5/min")  # each domain (slow.example's own stands)
    fast, slow = t.campaigns.forecast(hours=1).limited
    assert (fast["key"], fast["firings"], fast["drains_at_ms"]) == (
        "email-domain:fast.example", 10, utc("2027-03-01T08:32"))
    assert slow["drains_at_ms"] == utc("2027-03-01T08:33")


def test_a_concurrency_drains_at_its_slots_over_the_mean_duration(t: Tidings) -> None:
    burst_at(t, 20, "2027-03-01T08:30:00", Target(TargetKind.WEBHOOK,
                                                  "https://hooks.example/x"), "h")
    t.limits.set("webhook", concurrency=2)
    [hooks] = t.campaigns.forecast(hours=1).limited  # a second each: 120 a minute
    assert (hooks["key"], hooks["rate"], hooks["concurrency"]) == (
        "webhook:hooks.example", None, 2)
    assert hooks["mean_duration_ms"] == 1000
    assert hooks["drains_at_ms"] == utc("2027-03-01T08:31")
    # each call said to hold its slot for 30 s: 2 slots start 4 a minute
    [slow] = t.campaigns.forecast(hours=1, mean_duration_ms=30_000).limited
    assert slow["started"][30:35] == [4] * 5 and slow["mean_duration_ms"] == 30_000
    assert slow["drains_at_ms"] == utc("2027-03-01T08:35")
    t.limits.set("webhook:hooks.example", rate="2/min", concurrency=2)  # the lower counts
    [both] = t.campaigns.forecast(hours=1, mean_duration_ms=30_000).limited
    assert both["rate"] == "2/min" and both["drains_at_ms"] == utc("2027-03-01T08:40")


def test_nothing_drains_before_a_pause_ends(t: Tidings) -> None:
    t.queues.create_queue("orders")
    burst_at(t, 120, "2027-03-01T08:30:00", Target(TargetKind.QUEUE, "orders"), "o")
    t.limits.pause("queue:orders", utc("2027-03-01T08:40"))  # a pause alone: no setting
    [paused] = t.campaigns.forecast(hours=1).limited
    assert (paused["key"], paused["rate"], paused["concurrency"]) == ("queue:orders", None,
                                                                      None)
    assert paused["paused_until_ms"] == utc("2027-03-01T08:40")
    assert sum(paused["started"][:40]) == 0 and paused["started"][40] == 120
    assert paused["drains_at_ms"] == utc("2027-03-01T08:41")
    t.limits.set("queue", rate="1/s")  # then at its rate: 60 a minute from 08:40
    [rated] = t.campaigns.forecast(hours=1).limited
    assert rated["started"][39:43] == [0, 60, 60, 0]
    assert rated["drains_at_ms"] == utc("2027-03-01T08:42")
    t.limits.pause("queue", utc("2027-03-01T08:41:30"))  # the name's pause holds it too
    [later] = t.campaigns.forecast(hours=1).limited
    assert later["paused_until_ms"] == utc("2027-03-01T08:41:30")
    assert later["started"][40:44] == [0, 30, 60, 30]
    t.limits.resume("queue")
    t.limits.resume("queue:orders")
    [resumed] = t.campaigns.forecast(hours=1).limited
    assert resumed["paused_until_ms"] is None and resumed["started"][30] == 60


def test_a_campaigns_page_shows_a_paused_domain(t: Tidings) -> None:
    _spring_campaign(t)
    t.limits.pause("email-domain:example.com", utc("2027-03-01T09:10"))
    [domain] = t.campaign_views.limited("spring")
    assert (domain.key, domain.firings) == ("email-domain:example.com", 40)
    assert domain.paused_until_ms == utc("2027-03-01T09:10")
    assert domain.drains_at_ms == utc("2027-03-01T09:11")
    t.limits.set("email-domain", concurrency=3)
    with running_server(create_app(t)) as url:
        page = httpx.get(f"{url}/ui/campaigns/spring", follow_redirects=True)
    assert page.status_code == 200, page.text
    row = page.text[page.text.index("email-domain:example.com"):][:600]
    assert "none</td><td>3 (1.0 s each, assumed)</td>" in row
    assert "2027-03-01" in row and "09:10" in row  # paused until


def test_the_cli_and_the_api_show_concurrencies_and_pauses(db_url: str,
                                                            tmp_path: Path) -> None:
    """`tidings forecast` (a real subprocess, on the wall clock) and GET /v1/forecast."""
    with Tidings(settings=Settings(db=db_url)) as wall:
        soon = (wall.clock.now_ms() // 60_000 + 10) * 60_000
        at = datetime.fromtimestamp(soon / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        wall.queues.create_queue("orders")
        burst_at(wall, 20, at, Target(TargetKind.WEBHOOK, "https://hooks.example/x"), "h")
        burst_at(wall, 5, at, Target(TargetKind.QUEUE, "orders"), "o")
        wall.limits.set("webhook", concurrency=2)
        wall.limits.pause("queue:orders", soon + 20 * 60_000)
        cli = Cli(db_url, tmp_path)
        text = cli.ok("forecast", "--hours", "1", "--mean-duration", "30")
        assert "webhook:hooks.example (concurrency 2, 30 s each): 20 firings, drained by" \
            in text
        paused = datetime.fromtimestamp(soon / 1000 + 1200, UTC).strftime("%m-%d %H:%M")
        assert f"queue:orders (paused until {paused} UTC): 5 firings, drained by" in text
        doc = cli.json("forecast", "--hours", "1", "--mean-duration", "30")
        hooks = next(k for k in doc["limited"] if k["key"] == "webhook:hooks.example")
        assert hooks["mean_duration_ms"] == 30_000 and hooks["drains_at_ms"] == soon + 300_000
        with running_server(create_app(wall)) as url, httpx.Client(base_url=url) as api:
            fc = api.get("/v1/forecast", params={"hours": 1, "mean_duration_ms": 15_000})
            assert fc.status_code == 200, fc.text
            by_key = {k["key"]: k for k in fc.json()["limited"]}
            assert by_key["webhook:hooks.example"]["drains_at_ms"] == soon + 180_000
            assert by_key["queue:orders"]["paused_until_ms"] == soon + 20 * 60_000
            bad = api.get("/v1/forecast", params={"mean_duration_ms": 0})
            assert bad.status_code == 400
