"""Campaigns that name a contact list and topic: each message carries them, contacts who
opted out are skipped at send time (the reason in the delivery log), and an unsubscribe
leaves the topic; fan-out refuses a list or topic that does not exist, creating nothing.
Real node, real SMTP relay, both backends."""

from __future__ import annotations

import asyncio
import io
import time
from datetime import UTC, datetime, timedelta

import pytest
from email_relay import Relay, running_relay

from tidings.campaigns.fanout import FanoutOptions
from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.errors import ValidationError
from tidings.model.campaigns import Step
from tidings.model.email import DeliveryState
from tidings.node import Node
from tidings.settings import Settings

START = datetime(2030, 6, 3, 11, 59, tzinfo=UTC)


def ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


ROWS = "id,email,timezone,name\n" + "".join(
    f"{who},{who}@example.org,UTC,{who.title()}\n" for who in ("ana", "bo", "cy", "dee"))


def test_a_campaign_to_a_topic_skips_those_who_left_it(db_url: str) -> None:
    clock = FrozenClock(ms(START))
    due = START + timedelta(minutes=1)
    with Tidings(settings=Settings(db=db_url, public_url="https://mail.example.test"),
                 clock=clock) as t:
        t.email.create_template("hello", "Hello {{name}}", text="Hi {{name}}")
        t.email.contacts.create_list("members", [
            {"TopicName": "news", "DisplayName": "News", "DefaultSubscriptionStatus": "OPT_IN"}])
        t.email.contacts.create_contact("members", "bo@example.org", [
            {"TopicName": "news", "SubscriptionStatus": "OPT_OUT"}])
        t.email.contacts.create_contact("members", "cy@example.org", unsubscribe_all=True)
        opts = FanoutOptions(campaign="june", template="hello", sender="news@example.com",
                             steps=(Step("hello", 0, due.strftime("%H:%M:%S")),),
                             on=due.date(), local_time="00:00",
                             contact_list="members", topic="news")
        for bad, field in ((dict(contact_list="nope"), "contact_list"),
                           (dict(topic="nope"), "topic"),
                           (dict(contact_list=None, topic="news"), "topic")):
            with pytest.raises(ValidationError) as err:
                t.campaigns.fanout(io.BytesIO(ROWS.encode()), FanoutOptions(
                    **{**opts.__dict__, **bad}))
            assert err.value.field == field
        assert t.campaigns.list() == []  # nothing created
        summary = t.campaigns.fanout(io.BytesIO(ROWS.encode()), opts)
        assert (summary.schedules_created, summary.errors) == (4, 0)

        relay = Relay()
        with running_relay(relay) as url:
            node = Node(t, Settings(db=t.settings.db, smtp_url=url, concurrency=4,
                                    shutdown_grace_s=2, poll_fallback_s=0.05,
                                    public_url="https://mail.example.test"))

            def finished() -> bool:
                log = t.email.log()[0]
                return len(log) == 4 and all(d.state is not DeliveryState.QUEUED for d in log)

            async def main() -> None:
                task = asyncio.create_task(node.run())
                clock.set(ms(due))
                deadline = time.monotonic() + 60
                while not finished():
                    assert not task.done(), "the node stopped"
                    assert time.monotonic() < deadline, t.email.log()[0]
                    await asyncio.sleep(0.05)
                node.stop()
                await task

            try:
                asyncio.run(main())
            finally:
                node.bridge.close()
        outcome = {d.recipients[0]: (d.state, d.detail or "") for d in t.email.log()[0]}
        assert {a: s for a, (s, _) in outcome.items()} == {
            "ana@example.org": DeliveryState.SENT, "dee@example.org": DeliveryState.SENT,
            "bo@example.org": DeliveryState.SUPPRESSED,
            "cy@example.org": DeliveryState.SUPPRESSED}
        assert "opted out of the topic members/news" in outcome["bo@example.org"][1]
        assert "unsubscribed from the list members" in outcome["cy@example.org"][1]
        assert sorted(r.rcpt_tos[0] for r in relay.received) == ["ana@example.org",
                                                                 "dee@example.org"]
        mail = relay.received[0].message
        token = mail["List-Unsubscribe"].split(",")[0].strip("<> ").rsplit("/", 1)[1]
        request = t.email.unsubscribe(token)
        assert request.list_id == "members/news"
        who = relay.received[0].rcpt_tos[0]
        assert dict(t.email.contacts.get_contact("members", who).preferences) == \
            {"news": "OPT_OUT"}
        assert t.email.suppression(who) is None
