"""Bounces and complaints coming back: DSNs (RFC 3464) and ARF reports (RFC 5965), written
here in the RFCs' formats, sent over real SMTP to the node's inbound listener; SES (in its
SNS envelope) and Postmark webhooks over real HTTP. A real node and SMTP relay, both
backends: mail goes out VERP-tagged, reports are matched to their delivery, hard bounces
and complaints suppress, soft bounces are counted, and every event is listed."""

from __future__ import annotations

import json
import os
import smtplib
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from email_relay import Relay, free_port, running_relay
from serving import running_server
from sns_signer import Sns, running_sns

from tidings.client import Tidings
from tidings.model.email import DeliveryState, EmailMessage, SuppressionReason
from tidings.model.email_events import EventKind
from tidings.node import Node
from tidings.settings import Settings


@dataclass
class Served:
    t: Tidings
    url: str
    relay: Relay
    inbound: int
    sns: Sns


@pytest.fixture
def served(db_url: str, tmp_path: Path) -> Iterator[Served]:
    relay = Relay()
    port = free_port()
    with running_relay(relay) as smtp_url, running_sns(tmp_path) as sns:
        config = Settings(db=db_url, concurrency=2, shutdown_grace_s=1, smtp_url=smtp_url,
                          bounce_address="bounces@mail.example.com",
                          bounce_listen=f"127.0.0.1:{port}", sns_cert_host=sns.cert_host,
                          sns_ca_file=sns.ca_file)
        t = Tidings(settings=config)
        node = Node(t, config)
        try:
            with running_server(node.http_app()) as url:
                yield Served(t, url, relay, port, sns)
        finally:
            node.bridge.close()
            t.close()


def wait(what: Callable[[], Any], timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while not (got := what()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    return got


def sent(s: Served, to: str) -> tuple[str, str, str]:
    """Send one message; (delivery id, its Message-ID, the envelope sender it went with)."""
    d = s.t.email.send(EmailMessage(from_address="News <news@example.com>", to=(to,),
                                    subject="Hello", text="Body"))
    wait(lambda: s.t.email.get_delivery(d.id).state is DeliveryState.SENT)
    [mail] = [r for r in s.relay.received if r.rcpt_tos == [to]]
    return d.id, d.message_id, mail.mail_from


def dsn(recipient: str, action: str, status: str, diagnostic: str, message_id: str) -> str:
    """A delivery status notification in RFC 3464's format, as an MTA writes it."""
    return f"""From: Mail Delivery System <MAILER-DAEMON@mx.example.org>
To: bounces@mail.example.com
Subject: Undelivered Mail Returned to Sender
Date: Thu, 03 Dec 2026 21:00:00 +0000
Message-ID: <dsn-{status}-{recipient}@mx.example.org>
MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status;
 boundary="RPT"

--RPT
Content-Type: text/plain; charset=us-ascii

This is the mail system at host mx.example.org. Your message could not be delivered.

--RPT
Content-Type: message/delivery-status

Reporting-MTA: dns; mx.example.org
Arrival-Date: Thu, 03 Dec 2026 20:59:58 +0000

Final-Recipient: rfc822; {recipient}
Original-Recipient: rfc822;{recipient}
Action: {action}
Status: {status}
Remote-MTA: dns; inbox.example.org
Diagnostic-Code: smtp; {diagnostic}

--RPT
Content-Type: text/rfc822-headers

From: News <news@example.com>
To: {recipient}
Subject: Hello
Message-ID: <{message_id}>

--RPT--
""".replace("\n", "\r\n")


def arf(recipient: str, message_id: str) -> str:
    """An abuse report in RFC 5965's format (ARF), as a mailbox provider sends it."""
    return f"""From: feedback@isp.example.net
To: bounces@mail.example.com
Subject: FW: Hello
Date: Thu, 03 Dec 2026 21:05:00 +0000
Message-ID: <arf-{recipient}@isp.example.net>
MIME-Version: 1.0
Content-Type: multipart/report; report-type=feedback-report;
 boundary="ARF"

--ARF
Content-Type: text/plain; charset=us-ascii

This is an email abuse report for an email message received from IP 192.0.2.1.

--ARF
Content-Type: message/feedback-report

Feedback-Type: abuse
User-Agent: SomeGenerator/1.0
Version: 1
Original-Mail-From: <bounces@mail.example.com>
Arrival-Date: Thu, 03 Dec 2026 20:59:58 +0000
Source-IP: 192.0.2.1
Reported-Domain: example.com

--ARF
Content-Type: message/rfc822
Content-Disposition: inline

From: News <news@example.com>
To: {recipient}
Subject: Hello
Message-ID: <{message_id}>
Date: Thu, 03 Dec 2026 20:59:50 +0000

Body
--ARF--
""".replace("\n", "\r\n")


def envelope(notification: dict[str, Any], n: int = 1) -> dict[str, Any]:
    """An SES notification as SNS delivers it (unsigned yet)."""
    return {"Type": "Notification", "MessageId": f"sns-{n}",
            "TopicArn": "arn:aws:sns:us-east-1:000000000000:ses-feedback",
            "Subject": "Amazon SES Email Event Notification",
            "Message": json.dumps(notification), "Timestamp": "2026-12-03T21:00:01.000Z"}


def mail_in(s: Served, rcpt: str, report: str) -> None:
    with smtplib.SMTP("127.0.0.1", s.inbound, timeout=20) as smtp:
        smtp.sendmail("MAILER-DAEMON@mx.example.org", [rcpt], report.encode())


def test_dsns_and_arf_reports_over_smtp(served: Served) -> None:
    s = served
    gone_id, gone_mid, return_path = sent(s, "gone@example.org")
    assert return_path == f"bounces+{gone_id}@mail.example.com"  # VERP
    full_id, full_mid, full_path = sent(s, "full@example.org")
    spam_id, spam_mid, _ = sent(s, "angry@example.org")

    mail_in(s, return_path, dsn("gone@example.org", "failed", "5.1.1",
                                "550 5.1.1 <gone@example.org>: user unknown", gone_mid))
    mail_in(s, full_path, dsn("full@example.org", "delayed", "4.2.2",
                              "452 4.2.2 mailbox full", full_mid))
    # to the bare bounce address: matched by the quoted original Message-ID instead
    mail_in(s, "bounces@mail.example.com", arf("angry@example.org", spam_mid))

    events = {e.address: e for e in wait(lambda: len(
        s.t.email.returns.events()[0]) == 3 and s.t.email.returns.events()[0])}
    gone, full, angry = (events[a] for a in ("gone@example.org", "full@example.org",
                                             "angry@example.org"))
    assert (gone.kind, gone.source, gone.delivery_id) == (EventKind.HARD_BOUNCE, "dsn", gone_id)
    assert "5.1.1" in gone.detail and "user unknown" in gone.detail
    assert (full.kind, full.delivery_id) == (EventKind.SOFT_BOUNCE, full_id)
    assert (angry.kind, angry.source, angry.delivery_id) == \
        (EventKind.COMPLAINT, "arf", spam_id)
    assert "abuse" in angry.detail

    bounce = s.t.email.suppression("gone@example.org")
    assert bounce is not None and bounce.reason is SuppressionReason.BOUNCE
    complaint = s.t.email.suppression("angry@example.org")
    assert complaint is not None and complaint.reason is SuppressionReason.COMPLAINT
    assert s.t.email.suppression("full@example.org") is None  # soft: counted only
    # each event joins its delivery's detail; the hard bounce turns SENT into BOUNCED
    log = {d.id: d for d in s.t.email.log()[0]}
    assert log[gone_id].state is DeliveryState.BOUNCED
    assert "HARD_BOUNCE (dsn) gone@example.org: failed 5.1.1" in (log[gone_id].detail or "")
    assert log[full_id].state is DeliveryState.SENT
    assert "SOFT_BOUNCE (dsn) full@example.org: delayed 4.2.2" in (log[full_id].detail or "")
    assert log[spam_id].state is DeliveryState.SENT
    assert "COMPLAINT (arf) angry@example.org: feedback abuse" in (log[spam_id].detail or "")
    assert s.t.email.returns.soft_bounces("full@example.org") == 1
    # and the next message to a hard-bounced address is not sent
    again = s.t.email.send(EmailMessage(from_address="news@example.com",
                                        to=("gone@example.org",), subject="x", text="y"))
    assert wait(lambda: s.t.email.get_delivery(again.id).state is not DeliveryState.QUEUED)
    assert s.t.email.get_delivery(again.id).state is DeliveryState.SUPPRESSED

    # the delivery log shows each event beside its delivery (native API)
    r = httpx.get(f"{s.url}/v1/email/events", params={"delivery_id": gone_id})
    assert [(e["kind"], e["address"]) for e in r.json()["events"]] == \
        [("HARD_BOUNCE", "gone@example.org")]

    # not a report (an auto-reply): accepted, nothing recorded
    mail_in(s, "bounces@mail.example.com", "Subject: Out of office\r\n\r\nBack Monday\r\n")
    assert len(s.t.email.returns.events()[0]) == 3
    # mail for another domain is refused: the listener is nobody's relay
    with pytest.raises(smtplib.SMTPRecipientsRefused):
        mail_in(s, "someone@elsewhere.example", dsn("gone@example.org", "failed", "5.1.1",
                                                    "x", gone_mid))


def test_relay_webhooks(served: Served) -> None:
    s = served
    delivery_id, message_id, _ = sent(s, "ses-gone@example.org")
    notification = {
        "notificationType": "Bounce",
        "bounce": {"bounceType": "Permanent", "bounceSubType": "General",
                   "bouncedRecipients": [{"emailAddress": "ses-gone@example.org",
                                          "status": "5.1.1", "action": "failed",
                                          "diagnosticCode": "smtp; 550 5.1.1 user unknown"}],
                   "timestamp": "2026-12-03T21:00:00.000Z"},
        "mail": {"messageId": "0100018c-ses-own-id", "source": "news@example.com",
                 "destination": ["ses-gone@example.org"],
                 "commonHeaders": {"messageId": f"<{message_id}>"}}}
    r = httpx.post(f"{s.url}/v1/email/events/ses", content=json.dumps(
        s.sns.sign(envelope(notification))),
                   headers={"x-amz-sns-message-type": "Notification"})
    assert r.status_code == 200, r.text
    [event] = r.json()["recorded"]
    assert (event["kind"], event["delivery_id"]) == ("HARD_BOUNCE", delivery_id)
    complaint = {"notificationType": "Complaint", "complaint": {
        "complainedRecipients": [{"emailAddress": "ses-angry@example.org"}],
        "complaintFeedbackType": "abuse"}, "mail": {}}
    assert httpx.post(f"{s.url}/v1/email/events/ses", json=s.sns.sign(
        envelope(complaint), version="1")).json()["recorded"][0]["kind"] == "COMPLAINT"

    for body, kind in (
            ({"RecordType": "Bounce", "Type": "HardBounce", "TypeCode": 1,
              "Email": "pm-gone@example.org", "Description": "The server was unable to "
              "deliver your message", "Details": "smtp;550 5.1.1 no such user"}, "HARD_BOUNCE"),
            ({"RecordType": "Bounce", "Type": "SoftBounce", "TypeCode": 4096,
              "Email": "pm-full@example.org", "Description": "Mailbox full"}, "SOFT_BOUNCE"),
            ({"RecordType": "SpamComplaint", "Type": "SpamComplaint", "TypeCode": 512,
              "Email": "pm-angry@example.org"}, "COMPLAINT")):
        r = httpx.post(f"{s.url}/v1/email/events/postmark", json=body)
        assert r.status_code == 200 and r.json()["recorded"][0]["kind"] == kind, r.text
    # A webhook object with no bounced address (a Delivery, an Open) is taken and ignored,
    # so Postmark does not retry it; a body that is no JSON object is refused.
    other = httpx.post(f"{s.url}/v1/email/events/postmark", json={"RecordType": "Delivery"})
    assert other.status_code == 200 and other.json() == {"recorded": []}, other.text
    bad = httpx.post(f"{s.url}/v1/email/events/postmark", json=["Email"])
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "body", bad.text

    reasons = {a: (x.reason if (x := s.t.email.suppression(a)) else None) for a in (
        "ses-gone@example.org", "ses-angry@example.org", "pm-gone@example.org",
        "pm-full@example.org", "pm-angry@example.org")}
    assert reasons == {"ses-gone@example.org": SuppressionReason.BOUNCE,
                       "ses-angry@example.org": SuppressionReason.COMPLAINT,
                       "pm-gone@example.org": SuppressionReason.BOUNCE,
                       "pm-full@example.org": None,
                       "pm-angry@example.org": SuppressionReason.COMPLAINT}

    # the CLI, on the node TIDINGS_URL names (no database of its own)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    env["TIDINGS_URL"] = s.url
    done = subprocess.run([sys.executable, "-m", "tidings", "email", "events", "--address",
                           "pm-angry@example.org", "--json"], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert [(e["kind"], e["source"]) for e in json.loads(done.stdout)] == \
        [("COMPLAINT", "postmark")]


def test_sns_signatures_are_checked_and_a_subscription_confirmed(served: Served) -> None:
    s = served
    events = f"{s.url}/v1/email/events/ses"
    bounce = {"notificationType": "Bounce", "bounce": {
        "bounceType": "Permanent", "bouncedRecipients": [{"emailAddress": "x@example.org"}]},
        "mail": {}}
    signed = s.sns.sign(envelope(bounce))
    # tampered with after signing: another address to suppress
    forged = {**signed, "Message": signed["Message"].replace("x@example.org",
                                                             "victim@example.org")}
    r = httpx.post(events, json=forged)
    assert r.status_code == 403 and "signature does not match" in r.text, r.text
    # signed, but with a certificate from a host that is not SNS's
    elsewhere = s.sns.sign(envelope(bounce), cert_url=s.sns.base.replace(
        "127.0.0.1", "localhost") + "/SimpleNotificationService-1.pem")
    r = httpx.post(events, json=elsewhere)
    assert r.status_code == 403 and "not an https URL of Amazon SNS" in r.text, r.text
    plain = s.sns.sign(envelope(bounce), cert_url=s.sns.base.replace("https", "http") +
                       "/SimpleNotificationService-1.pem")
    assert httpx.post(events, json=plain).status_code == 403
    unsigned_version = {**signed, "SignatureVersion": "3"}
    assert httpx.post(events, json=unsigned_version).status_code == 403
    # not in an SNS envelope at all: nothing to verify
    r = httpx.post(events, json=bounce)
    assert r.status_code == 403 and "signed SNS messages" in r.text, r.text
    assert s.t.email.suppression("victim@example.org") is None
    assert s.t.email.returns.events()[0] == []
    assert s.sns.fetched == ["/SimpleNotificationService-1.pem"]  # once: kept by URL

    subscription = s.sns.sign({
        "Type": "SubscriptionConfirmation", "MessageId": "sns-sub", "Token": "tok-1",
        "TopicArn": "arn:aws:sns:us-east-1:000000000000:ses-feedback",
        "Message": "You have chosen to subscribe to the topic …",
        "SubscribeURL": f"{s.sns.base}/?Action=ConfirmSubscription&Token=tok-1",
        "Timestamp": "2026-12-03T21:00:00.000Z"}, version="1")
    r = httpx.post(events, json=subscription,
                   headers={"x-amz-sns-message-type": "SubscriptionConfirmation"})
    assert r.status_code == 200, r.text
    assert r.json() == {"recorded": [],
                        "confirmed": "arn:aws:sns:us-east-1:000000000000:ses-feedback"}
    assert s.sns.fetched[-1] == "/?Action=ConfirmSubscription&Token=tok-1"
    # a confirmation link to anywhere else is not followed, even signed
    foreign = s.sns.sign({**subscription, "SubscribeURL": "https://attacker.example/x"})
    r = httpx.post(events, json=foreign)
    assert r.status_code == 403 and "SubscribeURL" in r.text
    assert len(s.sns.fetched) == 2

    r = httpx.post(events, json=signed)  # the genuine one
    assert r.status_code == 200 and r.json()["recorded"][0]["address"] == "x@example.org"


def test_without_sns_verification_a_bare_notification_is_taken(db_url: str) -> None:
    config = Settings(db=db_url, sns_verify=False)
    with Tidings(settings=config) as t:
        node = Node(t, config)
        try:
            with running_server(node.http_app()) as url:
                bare_notifications(url)
        finally:
            node.bridge.close()


def bare_notifications(url: str) -> None:
    r = httpx.post(f"{url}/v1/email/events/ses", json={
        "notificationType": "Complaint", "complaint": {
            "complainedRecipients": [{"emailAddress": "bare@example.org"}]}, "mail": {}})
    assert r.status_code == 200 and r.json()["recorded"][0]["kind"] == "COMPLAINT"
    confirm = httpx.post(f"{url}/v1/email/events/ses", json={
        "Type": "SubscriptionConfirmation", "SubscribeURL": "https://sns.example/c"})
    assert confirm.json() == {"recorded": [], "confirm": "https://sns.example/c"}
