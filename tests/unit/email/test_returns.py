"""Parsing returned mail: DSN recipient blocks (which actions count, hard or soft), ARF
reports, VERP tags, and the relay webhooks' edge cases."""

from __future__ import annotations

import json

import pytest

from tidings.email.returns import (
    delivery_of_verp,
    parse_postmark,
    parse_report,
    parse_ses,
    verp_address,
)
from tidings.errors import ValidationError
from tidings.model.email_events import EventKind

DSN = """Content-Type: multipart/report; report-type=delivery-status; boundary="B"
MIME-Version: 1.0

--B
Content-Type: text/plain

Delivery report.
--B
Content-Type: message/delivery-status

Reporting-MTA: dns; mx.example.org

Final-Recipient: rfc822; Gone@Example.org
Action: failed
Status: 5.1.1
Diagnostic-Code: smtp; 550 5.1.1
 user unknown

Final-Recipient: rfc822; ok@example.org
Action: delivered
Status: 2.0.0

Final-Recipient: rfc822; later@example.org
Action: delayed
Status: 4.4.1

Final-Recipient: rfc822; quota@example.org
Action: failed
Status: 4.2.2

--B
Content-Type: text/rfc822-headers

Message-ID: <abc-123@example.com>

--B--
"""


def test_a_dsn_gives_one_event_per_failed_or_delayed_recipient() -> None:
    found = parse_report(DSN.replace("\n", "\r\n").encode(), verp_id="abc-123")
    assert [(r.address, r.kind) for r in found] == [
        ("gone@example.org", EventKind.HARD_BOUNCE),
        ("later@example.org", EventKind.SOFT_BOUNCE),
        ("quota@example.org", EventKind.SOFT_BOUNCE)]  # failed, but 4.x.x: not permanent
    assert found[0].detail == "failed 5.1.1: smtp; 550 5.1.1 user unknown"
    assert {(r.delivery_id, r.message_id) for r in found} == {("abc-123", "abc-123@example.com")}


def test_what_is_not_a_report() -> None:
    assert parse_report(b"Subject: Out of office\r\n\r\nBack Monday\r\n") == []
    other = DSN.replace("report-type=delivery-status", "report-type=disposition-notification")
    assert parse_report(other.encode()) == []


def test_verp_round_trip() -> None:
    address = verp_address("bounces@mail.example.com", "7f0c2b9e-1d2a-4c55-9a8e-3f1f5c7d9e21")
    assert address == "bounces+7f0c2b9e-1d2a-4c55-9a8e-3f1f5c7d9e21@mail.example.com"
    assert delivery_of_verp(address) == "7f0c2b9e-1d2a-4c55-9a8e-3f1f5c7d9e21"
    assert delivery_of_verp("bounces@mail.example.com") is None
    assert delivery_of_verp("bounces+../../x@mail.example.com") is None


def test_ses_notifications() -> None:
    transient = {"notificationType": "Bounce", "bounce": {
        "bounceType": "Transient", "bouncedRecipients": [{"emailAddress": "a@example.org"}]}}
    [r] = parse_ses(json.dumps(transient).encode())
    assert r.kind is EventKind.SOFT_BOUNCE and r.source == "ses"
    delivery = {"eventType": "Delivery", "mail": {}}
    assert parse_ses(json.dumps(delivery).encode()) == []
    for bad in (b"not json", b"[1]"):
        with pytest.raises(ValidationError):
            parse_ses(bad)
    # An SNS envelope whose message is no SES notification carries nothing to record.
    for message in ("not json", "[1]"):
        envelope = {"Type": "Notification", "Message": message}
        assert parse_ses(json.dumps(envelope).encode()) == []


def test_postmark_types() -> None:
    def kind(doc: dict[str, object]) -> list[EventKind]:
        return [r.kind for r in parse_postmark(json.dumps(doc).encode())]

    assert kind({"RecordType": "Bounce", "Type": "AutoResponder",
                 "Email": "a@example.org"}) == []
    assert kind({"RecordType": "Bounce", "Type": "DnsError",
                 "Email": "a@example.org"}) == [EventKind.SOFT_BOUNCE]
    # No bounced address: another kind of webhook, taken and ignored (not retried).
    assert kind({"RecordType": "Bounce", "Email": "not an address"}) == []
    assert kind({"RecordType": "Delivery", "Recipient": "a@example.org"}) == []
    with pytest.raises(ValidationError):
        parse_postmark(b'["Email"]')
