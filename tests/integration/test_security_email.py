"""Email cannot be relayed as any sender: verified identities (TIDINGS_EMAIL_IDENTITIES
and SES v2 email identities, with boto3) and no header injection, through real HTTP and
a real SMTP relay."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from email_relay import Relay, running_relay
from serving import run_until, running_server

from tidings.client import Tidings
from tidings.model.schedules import ScheduleSpec, Target, TargetKind
from tidings.model.states import DeliveryState
from tidings.node import Node
from tidings.server.app import create_app
from tidings.settings import Settings

ROLE = "arn:aws:iam::000000000000:role/tidings"


@pytest.fixture(autouse=True)
def _no_aws_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))


class Served:
    def __init__(self, t: Tidings, url: str) -> None:
        self.t, self.url = t, url

    def client(self, service: str) -> Any:
        return boto3.client(service, endpoint_url=self.url, region_name="us-east-1",
                            aws_access_key_id="x", aws_secret_access_key="x",
                            config=Config(retries={"max_attempts": 1}))


def serve(db_url: str, **settings: Any) -> Iterator[Served]:
    t = Tidings(settings=Settings(db=db_url, **settings))
    try:
        with running_server(create_app(t)) as url:
            yield Served(t, url)
    finally:
        t.close()


@pytest.fixture
def node(db_url: str) -> Iterator[Served]:
    yield from serve(db_url, email_identities="example.com, ops@corp.test")


def simple(sender: str, subject: str = "Hi") -> dict[str, Any]:
    return {"FromEmailAddress": sender, "Destination": {"ToAddresses": ["ana@example.org"]},
            "Content": {"Simple": {"Subject": {"Data": subject},
                                   "Body": {"Text": {"Data": "Hello"}}}}}


def test_only_verified_senders_may_send(node: Served) -> None:
    ses = node.client("sesv2")
    assert ses.send_email(**simple("News <news@example.com>"))["MessageId"]
    assert ses.send_email(**simple("ops@corp.test"))["MessageId"]
    for sender in ("someone@corp.test", "ceo@evil.example", "news@sub.example.com"):
        with pytest.raises(ClientError) as refused:
            ses.send_email(**simple(sender))
        err = refused.value.response
        assert err["ResponseMetadata"]["HTTPStatusCode"] == 400
        assert err["Error"]["Code"] == "MessageRejected"
        assert "not verified" in err["Error"]["Message"] and sender in err["Error"]["Message"]
    native = httpx.post(f"{node.url}/v1/email/send", json=simple("ceo@evil.example"))
    assert native.status_code == 400 and native.json()["error"]["field"] == "FromEmailAddress"


def test_a_raw_message_is_checked_on_its_own_from_too(node: Served) -> None:
    raw = (b"From: ceo@evil.example\r\nTo: ana@example.org\r\nSubject: x\r\n\r\nHello\r\n")
    with pytest.raises(ClientError) as refused:
        node.client("sesv2").send_email(
            FromEmailAddress="news@example.com",
            Destination={"ToAddresses": ["ana@example.org"]}, Content={"Raw": {"Data": raw}})
    assert refused.value.response["Error"]["Code"] == "MessageRejected"


def test_ses_email_identities_verify_and_unverify(node: Served) -> None:
    ses = node.client("sesv2")
    with pytest.raises(ClientError):
        ses.send_email(**simple("team@shop.test"))
    made = ses.create_email_identity(EmailIdentity="shop.test")
    assert made["IdentityType"] == "DOMAIN" and made["VerifiedForSendingStatus"] is True
    with pytest.raises(ClientError) as exists:
        ses.create_email_identity(EmailIdentity="shop.test")
    assert exists.value.response["Error"]["Code"] == "AlreadyExistsException"
    ses.send_email(**simple("team@shop.test"))
    listed = ses.list_email_identities()["EmailIdentities"]
    assert {(i["IdentityName"], i["IdentityType"]) for i in listed} == {
        ("example.com", "DOMAIN"), ("ops@corp.test", "EMAIL_ADDRESS"), ("shop.test", "DOMAIN")}
    assert ses.get_email_identity(EmailIdentity="shop.test")["VerifiedForSendingStatus"]
    ses.delete_email_identity(EmailIdentity="shop.test")
    with pytest.raises(ClientError) as gone:
        ses.get_email_identity(EmailIdentity="shop.test")
    assert gone.value.response["Error"]["Code"] == "NotFoundException"
    with pytest.raises(ClientError):
        ses.send_email(**simple("team@shop.test"))


def test_email_targets_need_a_verified_sender_at_creation(node: Served) -> None:
    node.client("sqs").create_queue(QueueName="unused")
    scheduler = node.client("scheduler")
    with pytest.raises(ClientError) as refused:
        scheduler.create_schedule(
            Name="spam", ScheduleExpression="rate(1 hour)", FlexibleTimeWindow={"Mode": "OFF"},
            Target={"Arn": "arn:aws:scheduler:::aws-sdk:sesv2:sendEmail", "RoleArn": ROLE,
                    "Input": json.dumps(simple("ceo@evil.example"))})
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "not verified" in refused.value.response["Error"]["Message"]


def test_loopback_without_identities_takes_any_sender_beyond_it_none(db_url: str) -> None:
    for node in serve(db_url):
        assert httpx.post(f"{node.url}/v1/email/send",
                          json=simple("anyone@anywhere.test")).status_code == 202
    token = "admin-token-0123456789"
    for node in serve(db_url, host="0.0.0.0", api_tokens=f"admin:{token}"):
        r = httpx.post(f"{node.url}/v1/email/send", json=simple("anyone@anywhere.test"),
                       headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 400 and "TIDINGS_EMAIL_IDENTITIES" in r.json()["error"]["message"]


def test_a_subject_with_a_line_break_is_refused(node: Served) -> None:
    with pytest.raises(ClientError) as refused:
        node.client("sesv2").send_email(**simple("news@example.com",
                                                 "Hi\r\nBcc: victim@example.net"))
    assert "line breaks" in refused.value.response["Error"]["Message"]


def test_data_cannot_inject_headers_into_what_is_sent(db_url: str) -> None:
    """A recipient's data rendered into the subject, with CRLF and a Bcc line: the relay
    gets one Subject line, no Bcc header and no extra recipient."""
    with Tidings(settings=Settings(db=db_url, email_identities="example.com")) as t:
        t.email.create_template("hello", "Hello {{name}}", text="Hi {{name}}")
        relay = Relay()
        with running_relay(relay) as smtp_url:
            t.email.send({"FromEmailAddress": "news@example.com",
                          "Destination": {"ToAddresses": ["ana@example.org"]},
                          "Content": {"Template": {"TemplateName": "hello", "TemplateData":
                                      json.dumps({"name": "Ana\r\nBcc: victim@example.net"
                                                          "\r\nX-Evil: 1"})}}})
            node = Node(t, Settings(db=db_url, email_identities="example.com",
                                    smtp_url=smtp_url, shutdown_grace_s=2))
            run_until(node, lambda: bool(relay.received) and
                      t.email.log()[0][0].state is not DeliveryState.QUEUED)
    [got] = relay.received
    assert got.rcpt_tos == ["ana@example.org"]
    msg = got.message
    assert msg["Bcc"] is None and msg["X-Evil"] is None
    assert " ".join(msg["Subject"].split()) == "Hello Ana Bcc: victim@example.net X-Evil: 1"
    head = got.data.split(b"\r\n\r\n", 1)[0]
    assert not any(line.startswith((b"Bcc", b"X-Evil")) for line in head.split(b"\r\n"))


def test_schedule_target_kinds_unchanged() -> None:
    """The email target is still built as before (guard against a silent shape change)."""
    target = Target(TargetKind.EMAIL, "", input=json.dumps(simple("news@example.com")))
    assert ScheduleSpec("x", "rate(1 hour)", target).validated().target.kind is TargetKind.EMAIL
