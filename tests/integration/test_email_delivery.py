"""Email schedules firing through a running node into a real SMTP relay (aiosmtpd)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from email_relay import Relay, running_relay
from serving import run_until

from tidings.client import Tidings
from tidings.errors import ValidationError
from tidings.model.email import DeliveryState, EmailMessage, SuppressionReason
from tidings.model.schedules import RetryPolicy, ScheduleSpec, Target, TargetKind
from tidings.node import Node
from tidings.queues.internal import EMAIL_QUEUE
from tidings.settings import Settings


def just_now() -> str:
    return time.strftime("at(%Y-%m-%dT%H:%M:%S)", time.gmtime())


def tidings_for(db_url: str, **settings: Any) -> Tidings:
    return Tidings(settings=Settings(db=db_url,
                                     public_url="https://mail.example.test", **settings))


@pytest.fixture
def t(db_url: str) -> Iterator[Tidings]:
    """On the wall clock (conftest's `t` is frozen): a node fires and delivers in real time."""
    with tidings_for(db_url) as client:
        yield client


def run_node(t: Tidings, until: Callable[[], bool], *, timeout: float = 30.0,
             **settings: Any) -> None:
    settings = {"concurrency": 4, "shutdown_grace_s": 2, **settings}
    node = Node(t, Settings(db=t.settings.db, **settings))
    run_until(node, until, timeout=timeout)


def send_doc(to: list[str], template: str | None = "welcome", data: dict[str, Any] | None = None,
             **extra: Any) -> str:
    doc: dict[str, Any] = {"FromEmailAddress": "Tidings <news@example.com>",
                           "Destination": {"ToAddresses": to}}
    if template is not None:
        doc["Content"] = {"Template": {"TemplateName": template,
                                       "TemplateData": json.dumps(data or {})}}
    doc.update(extra)
    return json.dumps(doc)


def email_target(input_doc: str, **kwargs: Any) -> Target:
    return Target(TargetKind.EMAIL, "", input=input_doc, **kwargs)


def states(t: Tidings) -> list[DeliveryState]:
    return [d.state for d in t.email.log()[0]]


def news_list(t: Tidings) -> None:
    """The contact list the sends below name (a send naming no such list is refused)."""
    t.email.contacts.create_list("news", [{"TopicName": "weekly", "DisplayName": "Weekly",
                                           "DefaultSubscriptionStatus": "OPT_IN"}])


def test_fired_schedule_delivers_rendered_mail(t: Tidings) -> None:
    news_list(t)
    t.email.create_template("welcome", "Grüße, {{name}}!", html="<p>Hi {{name}}</p>",
                            text="Hi {{name}}")
    relay = Relay()
    with running_relay(relay) as url:
        doc = send_doc(["Ana <ana@example.org>"], data={"name": "Ana"},
                       ReplyToAddresses=["help@example.com"],
                       EmailTags=[{"Name": "campaign", "Value": "spring"}],
                       ListManagementOptions={"ContactListName": "news",
                                              "TopicName": "weekly"})
        extra = json.loads(doc)
        extra["Destination"].update(CcAddresses=["cc@example.org"],
                                    BccAddresses=["hidden@example.org"])
        t.schedules.create(ScheduleSpec("welcome-ana", just_now(),
                                        email_target(json.dumps(extra))))
        run_node(t, lambda: bool(relay.received) and states(t) == [DeliveryState.SENT],
                 smtp_url=url)
    assert len(relay.received) == 1
    got = relay.received[0]
    assert got.mail_from == "news@example.com"
    assert sorted(got.rcpt_tos) == ["ana@example.org", "cc@example.org", "hidden@example.org"]
    raw = got.data.decode("ascii")  # every byte is 7-bit: non-ASCII is encoded
    assert "Subject: =?utf-8?" in raw and "hidden@example.org" not in raw
    msg = got.message
    assert msg["Subject"] == "Grüße, Ana!"
    assert msg["To"] == "Ana <ana@example.org>" and msg["Cc"] == "cc@example.org"
    assert msg["Reply-To"] == "help@example.com" and msg["Bcc"] is None
    assert msg["Date"] and msg["X-Tidings-Tag"] == "campaign=spring"
    delivery = t.email.log()[0][0]
    assert msg["Message-ID"] == f"<{delivery.message_id}>"
    assert delivery.message_id.endswith("@example.com")
    assert delivery.schedule == "default/welcome-ana" and delivery.detail.startswith("250")
    assert msg.get_content_type() == "multipart/alternative"
    parts = [(p.get_content_type(), p.get_content_charset(), p.get_content())
             for p in msg.iter_parts()]
    assert parts == [("text/plain", "utf-8", "Hi Ana"), ("text/html", "utf-8", "<p>Hi Ana</p>")]
    unsub = msg["List-Unsubscribe"]
    url_part, mail_part = (p.strip(" <>") for p in unsub.split(","))
    assert url_part.startswith("https://mail.example.test/unsubscribe/")
    token = url_part.rsplit("/", 1)[1]
    assert mail_part == f"mailto:unsubscribe@example.com?subject={token}"
    assert msg["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert t.email.check_unsubscribe(token).address == "ana@example.org"
    assert t.email.check_unsubscribe(token).list_id == "news/weekly"


def test_only_list_mail_carries_a_one_click_unsubscribe(t: Tidings) -> None:
    """As SES: List-Unsubscribe only when the send names a contact list, or when the
    target asks for it (what campaigns do); an invoice or a password reset has none."""
    news_list(t)
    t.email.create_template("welcome", "Hello {{name}}", text="Hi {{name}}")
    relay = Relay()
    with running_relay(relay) as url:
        t.schedules.create(ScheduleSpec("receipt", just_now(), email_target(
            send_doc(["receipt@example.org"], data={"name": "R"}))))
        t.schedules.create(ScheduleSpec("listed", just_now(), email_target(
            send_doc(["listed@example.org"], data={"name": "L"},
                     ListManagementOptions={"ContactListName": "news"}))))
        t.schedules.create(ScheduleSpec("bulk", just_now(), email_target(
            send_doc(["bulk@example.org"], data={"name": "B"}),
            options={"unsubscribe": True})))
        t.schedules.create(ScheduleSpec("opted-out", just_now(), email_target(
            send_doc(["out@example.org"], data={"name": "O"},
                     ListManagementOptions={"ContactListName": "news"}),
            options={"unsubscribe": False})))
        t.email.send(json.loads(send_doc(["reset@example.org"], data={"name": "P"})))
        t.email.send(EmailMessage(from_address="news@example.com", to=("py@example.org",),
                                  subject="Hi", text="Hello", unsubscribe=True))
        run_node(t, lambda: states(t).count(DeliveryState.SENT) == 6, smtp_url=url)
    headers = {r.rcpt_tos[0]: (r.message["List-Unsubscribe"],
                               r.message["List-Unsubscribe-Post"]) for r in relay.received}
    without = {"receipt@example.org", "reset@example.org", "out@example.org"}
    assert {a for a, (unsub, _) in headers.items() if unsub is None} == without
    for address in headers.keys() - without:
        unsub, post = headers[address]
        assert "/unsubscribe/" in unsub and post == "List-Unsubscribe=One-Click", address


def test_temporary_failures_are_retried_then_sent(t: Tidings) -> None:
    t.email.create_template("welcome", "Hello {{name}}", text="Hi {{name}}")
    relay = Relay(data_replies=["451 4.3.0 try later", "451 4.3.0 try later"])
    with running_relay(relay) as url:
        t.schedules.create(ScheduleSpec("retry", just_now(), email_target(
            send_doc(["bo@example.org"], data={"name": "Bo"}))))
        run_node(t, lambda: states(t) == [DeliveryState.SENT], smtp_url=url)
    assert relay.data_attempts == 3 and len(relay.received) == 1
    delivery = t.email.log()[0][0]
    assert delivery.state is DeliveryState.SENT and delivery.attempts == 3
    assert t.email.suppression("bo@example.org") is None


def test_permanent_refusal_bounces_and_suppresses(t: Tidings) -> None:
    t.queues.create_queue("email-dlq")
    t.email.create_template("welcome", "Hello {{name}}", text="Hi {{name}}")
    relay = Relay(data_replies=["550 5.1.1 mailbox unavailable"] * 5)
    with running_relay(relay) as url:
        t.schedules.create(ScheduleSpec("bounce", just_now(), email_target(
            send_doc(["gone@example.org"], data={"name": "X"}),
            dead_letter_queue="email-dlq")))
        run_node(t, lambda: t.queues.describe("email-dlq").counts.visible >= 1, smtp_url=url)
    assert relay.data_attempts == 1  # no retry
    delivery = t.email.log()[0][0]
    assert delivery.state is DeliveryState.BOUNCED
    assert "550" in (delivery.detail or "") and "mailbox unavailable" in (delivery.detail or "")
    entry = t.email.suppression("Gone@Example.org")
    assert entry is not None and entry.reason is SuppressionReason.BOUNCE
    dead = t.queues.receive("email-dlq", 1, wait_s=0)[0]
    assert dead.attributes["ERROR_CODE"].string_value == "SMTP550"
    assert dead.attributes["EXHAUSTED_RETRY_CONDITION"].string_value == "NonRetryableError"


def test_refused_recipient_at_rcpt_bounces_only_that_address(t: Tidings) -> None:
    relay = Relay(refuse_rcpt={"nobody@example.org": "550 5.1.1 no such user"})
    simple = {"Simple": {"Subject": {"Data": "Hi"}, "Body": {"Text": {"Data": "Hello"}}}}
    with running_relay(relay) as url:
        t.schedules.create(ScheduleSpec("partial", just_now(), email_target(
            send_doc(["ok@example.org", "nobody@example.org"], template=None,
                     Content=simple))))
        run_node(t, lambda: states(t) == [DeliveryState.SENT], smtp_url=url)
    assert relay.received[0].rcpt_tos == ["ok@example.org"]
    assert "nobody@example.org" in (t.email.log()[0][0].detail or "")
    assert t.email.suppression("nobody@example.org") is not None
    assert t.email.suppression("ok@example.org") is None


def test_suppressed_address_receives_nothing(t: Tidings) -> None:
    t.email.create_template("welcome", "Hello {{name}}", text="Hi {{name}}")
    assert t.email.suppress("Quiet@Example.org", "MANUAL")
    relay = Relay()
    with running_relay(relay) as url:
        t.schedules.create(ScheduleSpec("quiet", just_now(), email_target(
            send_doc(["quiet@example.org"], data={"name": "Q"}))))
        run_node(t, lambda: states(t) == [DeliveryState.SUPPRESSED], smtp_url=url)
    assert relay.received == [] and relay.data_attempts == 0
    assert t.email.log(recipient="QUIET@example.org")[0][0].state is DeliveryState.SUPPRESSED


def test_missing_template_data_is_a_rendering_failure(t: Tidings) -> None:
    t.email.create_template("welcome", "Hello {{name}}", text="Your code: {{code}}")
    relay = Relay()
    with running_relay(relay) as url:
        t.schedules.create(ScheduleSpec("nodata", just_now(), email_target(
            send_doc(["x@example.org"], data={"name": "X"}),
            retry_policy=RetryPolicy(maximum_retry_attempts=3))))
        run_node(t, lambda: states(t) == [DeliveryState.RENDERING_FAILURE], smtp_url=url)
    assert relay.received == [] and relay.data_attempts == 0
    delivery = t.email.log()[0][0]
    assert delivery.attempts == 1 and "code" in (delivery.detail or "")


def test_template_data_is_never_rerendered_and_escaped_only_in_html(t: Tidings) -> None:
    t.email.create_template("welcome", "News for {{company}}", html="<p>{{company}}: {{note}}</p>",
                            text="{{company}}: {{note}}")
    relay = Relay()
    data = {"company": "C&A", "note": "{{company}} <script>alert(1)</script>"}
    with running_relay(relay) as url:
        t.schedules.create(ScheduleSpec("inject", just_now(), email_target(
            send_doc(["x@example.org"], data=data))))
        run_node(t, lambda: bool(relay.received), smtp_url=url)
    msg = relay.received[0].message
    assert msg["Subject"] == "News for C&A"
    text, html = (p.get_content() for p in msg.iter_parts())
    assert text == "C&A: {{company}} <script>alert(1)</script>"
    assert html == "<p>C&amp;A: {{company}} &lt;script&gt;alert(1)&lt;/script&gt;</p>"


def test_a_node_without_a_relay_leaves_email_waiting_for_one_with(t: Tidings) -> None:
    t.email.create_template("welcome", "Hello {{name}}", text="Hi")
    t.schedules.create(ScheduleSpec("norelay", just_now(), email_target(
        send_doc(["x@example.org"], data={"name": "X"}))))
    sent = t.email.send(json.loads(send_doc(["y@example.org"], data={"name": "Y"})))

    def waiting() -> int:
        c = t.queues.describe(EMAIL_QUEUE).counts
        return c.visible + c.in_flight + c.delayed

    run_node(t, lambda: waiting() == 2, timeout=10)  # fired, but nobody may send it
    assert waiting() == 2  # the node has stopped: nothing could have taken them since
    assert [d.state for d in t.email.log()[0]] == [DeliveryState.QUEUED]  # the API's send
    relay = Relay()
    with running_relay(relay) as url:
        run_node(t, lambda: len(relay.received) == 2, smtp_url=url)
    assert sorted(states(t)) == [DeliveryState.SENT, DeliveryState.SENT]
    assert t.email.get_delivery(sent.id).attempts == 1


def test_exhausted_retries_leave_the_delivery_failed(t: Tidings) -> None:
    t.email.create_template("welcome", "Hello {{name}}", text="Hi")
    relay = Relay(data_replies=["452 4.2.2 mailbox full"] * 10)
    with running_relay(relay) as url:
        t.schedules.create(ScheduleSpec("full", just_now(), email_target(
            send_doc(["full@example.org"], data={"name": "F"}),
            retry_policy=RetryPolicy(maximum_retry_attempts=1))))
        run_node(t, lambda: states(t) == [DeliveryState.FAILED], smtp_url=url)
    assert relay.data_attempts == 2 and relay.received == []
    delivery = t.email.log()[0][0]
    assert delivery.attempts == 2 and "452" in (delivery.detail or "")
    assert t.email.suppression("full@example.org") is None  # a 4xx is no bounce


def test_bulk_created_email_schedules_are_each_validated(t: Tidings) -> None:
    t.email.create_template("welcome", "Hello {{name}}", text="Hi")
    specs = [ScheduleSpec(f"b{i}", just_now(), email_target(
        send_doc(["x@example.org"], template=name, data={"name": "X"})))
        for i, name in enumerate(["welcome", "absent", "welcome"])]
    results = list(t.schedules.create_many(specs))
    assert [r.error is None for r in results] == [True, False, True]
    assert "absent" in str(results[1].error)


def test_resend_puts_failed_deliveries_back_in_line_once_each(t: Tidings) -> None:
    t.email.create_template("welcome", "Hello {{name}}", text="Hi")
    down = Relay(data_replies=["451 4.3.0 try later"] * 10)
    with running_relay(down) as url:
        for who in ("a", "b"):
            t.schedules.create(ScheduleSpec(f"outage-{who}", just_now(), email_target(
                send_doc([f"{who}@example.org"], data={"name": who}),
                retry_policy=RetryPolicy(maximum_retry_attempts=0))))
        run_node(t, lambda: states(t) == [DeliveryState.FAILED] * 2, smtp_url=url)
    assert t.email.waiting() == 0
    # filters: one recipient first, then the rest; nothing is resent twice
    assert t.email.resend(recipient="a@example.org").resent == 1
    assert t.email.resend(recipient="a@example.org").resent == 0  # QUEUED now
    assert t.email.resend(state="FAILED").resent == 1
    assert t.email.waiting() == 2
    up = Relay()
    with running_relay(up) as url:
        run_node(t, lambda: len(up.received) == 2, smtp_url=url)
    assert states(t) == [DeliveryState.SENT] * 2
    assert t.email.resend().resent == 0
    with pytest.raises(ValidationError):
        t.email.resend(state="SENT")
