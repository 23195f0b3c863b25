"""The SendEmail parser, unsubscribe tokens, the relay URL and the token bucket."""

from __future__ import annotations

import json

import pytest

from tidings.email.sesv2 import parse_send_email, send_email_document
from tidings.email.smtp import RelayConfig, TokenBucket
from tidings.email.unsubscribe import UnsubscribeTokens
from tidings.errors import ValidationError
from tidings.model.email import FINAL_STATES, DeliveryState
from tidings.model.states import DELIVERIES

DOC = {
    "FromEmailAddress": "News <news@example.com>",
    "Destination": {"ToAddresses": ["a@example.org"], "CcAddresses": ["b@example.org"],
                    "BccAddresses": ["A@example.org", "c@example.org"]},
    "ReplyToAddresses": ["r@example.com"],
    "Content": {"Template": {"TemplateName": "welcome", "TemplateData": '{"name": "Ana"}'}},
    "EmailTags": [{"Name": "campaign", "Value": "spring"}],
    "ListManagementOptions": {"ContactListName": "news", "TopicName": "weekly"},
}


def test_send_email_document_round_trips() -> None:
    msg = parse_send_email(json.dumps(DOC))
    assert msg.template == "welcome" and msg.template_data == {"name": "Ana"}
    assert msg.recipients == ("a@example.org", "b@example.org", "A@example.org",
                              "c@example.org")
    assert msg.tags == (("campaign", "spring"),) and msg.list_id == "news/weekly"
    assert parse_send_email(send_email_document(msg)) == msg
    simple = {**DOC, "Content": {"Simple": {"Subject": {"Data": "Hi"},
                                            "Body": {"Html": {"Data": "<p>x</p>"}}}}}
    parsed = parse_send_email(simple)
    assert (parsed.subject, parsed.html, parsed.text) == ("Hi", "<p>x</p>", None)


@pytest.mark.parametrize(("change", "field"), [
    ({"FromEmailAddress": None}, "FromEmailAddress"),
    ({"FromEmailAddress": "Evil\r\nBcc: x@y.z <a@b.c>"}, "FromEmailAddress"),
    ({"Destination": {}}, "Destination"),
    ({"Destination": {"ToAddresses": "a@example.org"}}, "Destination.ToAddresses"),
    ({"Destination": {"ToAddresses": [f"u{i}@example.org" for i in range(51)]}},
     "Destination"),
    ({"Destination": {"ToAddresses": ["ünï@example.org"]}}, "Destination.ToAddresses"),
    ({"Content": {}}, "Content"),
    ({"Content": {"Raw": {"Data": "x"}}}, "Content.Raw"),
    ({"Content": {"Template": {"TemplateName": "t", "TemplateData": "[1]"}}}, "TemplateData"),
    ({"Content": {"Simple": {"Subject": {"Data": "s"}, "Body": {}}}}, "Content.Simple.Body"),
    ({"EmailTags": [{"Name": "bad name", "Value": "v"}]}, "EmailTags"),
    ({"ListManagementOptions": {}}, "ListManagementOptions.ContactListName"),
])
def test_invalid_documents_name_the_field(change: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_send_email({**DOC, **change})
    assert info.value.field == field


def test_unsubscribe_tokens_verify_and_resist_forgery() -> None:
    tokens = UnsubscribeTokens(b"k" * 32)
    token = tokens.make("Ana@Example.org", "news/weekly")
    request = tokens.verify(token)
    assert (request.address, request.list_id) == ("ana@example.org", "news/weekly")
    assert tokens.verify(tokens.make("b@example.org")).list_id is None
    other = UnsubscribeTokens(b"z" * 32)
    for bad in (other.make("ana@example.org", "news/weekly"), token + "x", token[1:],
                token.replace(".", ""), "", "a.b", "!!!.???"):
        with pytest.raises(ValidationError):
            tokens.verify(bad)
    payload, mac = token.split(".")
    swapped = tokens.make("eve@example.org").split(".")[0] + "." + mac
    with pytest.raises(ValidationError):
        tokens.verify(swapped)


def test_relay_urls() -> None:
    plain = RelayConfig.parse("smtp://127.0.0.1:1025")
    assert (plain.host, plain.port, plain.implicit_tls, plain.username) == \
        ("127.0.0.1", 1025, False, None)
    sub = RelayConfig.parse("smtp://us%40er:p%3Ass@mail.example.com?starttls=require")
    assert (sub.port, sub.username, sub.password, sub.start_tls) == \
        (587, "us@er", "p:ss", True)
    assert "p:ss" not in sub.safe_url and "p%3Ass" not in sub.safe_url
    tls = RelayConfig.parse("smtps://mail.example.com?verify=false&timeout=5")
    assert (tls.port, tls.implicit_tls, tls.verify, tls.timeout_s) == (465, True, False, 5.0)
    for bad in ("http://x", "smtp://", "smtp://h:99999", "smtp://h?starttls=maybe"):
        with pytest.raises(ValidationError):
            RelayConfig.parse(bad)


def test_token_bucket_paces_in_arrival_order() -> None:
    now = [100.0]
    bucket = TokenBucket(50, clock=lambda: now[0])
    waits = [bucket.reserve() for _ in range(5)]
    assert waits == pytest.approx([0.0, 0.02, 0.04, 0.06, 0.08])
    now[0] += 10  # idle time saves up at most `burst` (1) token
    assert bucket.reserve() == 0.0 and bucket.reserve() == pytest.approx(0.02)
    burst = TokenBucket(10, burst=3, clock=lambda: now[0])
    now[0] += 5
    assert [burst.reserve() for _ in range(4)] == pytest.approx([0, 0, 0, 0.1])


def test_final_delivery_states_never_change() -> None:
    assert DeliveryState.QUEUED not in FINAL_STATES
    assert FINAL_STATES == frozenset(DeliveryState) - {DeliveryState.QUEUED}
    # only a resend reopens a final state, and only back to QUEUED
    assert all(DELIVERIES.moves[s] <= {DeliveryState.QUEUED} for s in FINAL_STATES)
