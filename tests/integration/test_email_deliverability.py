"""Deliverability controls through a running node into a real aiosmtpd relay, on both
backends: the per-recipient daily cap (list mail only) and a recipient domain's pace."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from email_relay import Relay, running_relay
from serving import run_until

from tidings.client import Tidings
from tidings.model.email import DeliveryState
from tidings.model.schedules import ScheduleSpec, Target, TargetKind
from tidings.node import Node
from tidings.settings import Settings


@pytest.fixture
def t(db_url: str) -> Iterator[Tidings]:
    with Tidings(settings=Settings(db=db_url, public_url="https://mail.example.test")) as c:
        c.email.create_template("news", "News for {{name}}", text="Hi {{name}}")
        yield c


def mail(t: Tidings, name: str, to: str, *, list_mail: bool, **data: Any) -> None:
    doc = {"FromEmailAddress": "news@example.com", "Destination": {"ToAddresses": [to]},
           "Content": {"Template": {"TemplateName": "news",
                                    "TemplateData": json.dumps({"name": name, **data})}}}
    when = time.strftime("at(%Y-%m-%dT%H:%M:%S)", time.gmtime())
    t.schedules.create(ScheduleSpec(name, when, Target(
        TargetKind.EMAIL, "", input=json.dumps(doc), options={"unsubscribe": list_mail})))


def done(t: Tidings, n: int) -> bool:
    rows = t.email.log()[0]
    return len(rows) == n and all(d.state in (DeliveryState.SENT, DeliveryState.SUPPRESSED)
                                  for d in rows)


def run(t: Tidings, n: int, url: str, **settings: Any) -> None:
    node = Node(t, Settings(db=t.settings.db, smtp_url=url, concurrency=8,
                            shutdown_grace_s=2, **settings))
    run_until(node, lambda: done(t, n), timeout=60)


def test_daily_cap_stops_list_mail_beyond_it_and_never_transactional(t: Tidings) -> None:
    relay = Relay()
    with running_relay(relay) as url:
        # one already sent today, in the recipient's own day (Pacific/Kiritimati: UTC+14)
        mail(t, "first", "ann@example.org", list_mail=True, timezone="Pacific/Kiritimati")
        run(t, 1, url, email_daily_cap=2)
        for name in ("second", "third"):
            mail(t, name, "ann@example.org", list_mail=True, timezone="Pacific/Kiritimati")
        mail(t, "reset", "ann@example.org", list_mail=False)  # transactional
        mail(t, "other", "bo@example.org", list_mail=True)
        run(t, 5, url, email_daily_cap=2)
    rows = {d.schedule.split("/")[-1]: d for d in t.email.log()[0]}  # type: ignore[union-attr]
    states = sorted(rows[n].state for n in ("second", "third"))
    assert states == [DeliveryState.SENT, DeliveryState.SUPPRESSED]  # the cap is 2 a day
    capped = next(d for d in rows.values() if d.state is DeliveryState.SUPPRESSED)
    assert capped.detail == ("daily cap: 2 list emails to this recipient today already "
                             "(TIDINGS_EMAIL_DAILY_CAP)")
    assert rows["reset"].state is DeliveryState.SENT and rows["other"].state is \
        DeliveryState.SENT
    assert sorted(r.rcpt_tos[0] for r in relay.received) == \
        ["ann@example.org"] * 3 + ["bo@example.org"]


def test_a_paced_domain_waits_its_turn(t: Tidings) -> None:
    relay = Relay()
    with running_relay(relay) as url:
        for i in range(4):
            mail(t, f"slow{i}", f"u{i}@slow.example", list_mail=False)
            mail(t, f"fast{i}", f"u{i}@fast.example", list_mail=False)
        run(t, 8, url, smtp_domain_rates="slow.example=4")
    slow = sorted(r.at for r in relay.received if r.rcpt_tos[0].endswith("@slow.example"))
    assert len(slow) == 4 and len(relay.received) == 8
    # 3 intervals of 0.25 s between the tokens; the first message may have waited longer
    # for its session than the others: 2 intervals at least, where unpaced is ~ms
    assert slow[-1] - slow[0] >= 0.5
