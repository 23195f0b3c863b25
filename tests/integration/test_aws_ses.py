"""The Amazon SES v2 API (REST-JSON), driven by boto3 `sesv2` and the AWS CLI against a real
`tidings serve` (uvicorn + the node's loops) whose mail goes to a real SMTP relay."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email import message_from_string, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from email_relay import Received, Relay, running_relay
from serving import running_server

from conftest import BACKENDS, module_backend
from tidings.client import Tidings
from tidings.errors import ValidationError
from tidings.model.email import DeliveryState
from tidings.model.schedules import ScheduleSpec, Target
from tidings.node import Node
from tidings.settings import Settings

AWS = Path(sys.executable).parent / "aws"
SENDER = "News <news@example.com>"


class Served:
    def __init__(self, t: Tidings, url: str, relay: Relay) -> None:
        self.t = t
        self.url = url
        self.relay = relay

    def client(self, key: str = "AKIDTEST", secret: str = "secret") -> Any:
        return boto3.client("sesv2", endpoint_url=self.url, region_name="us-east-1",
                            aws_access_key_id=key, aws_secret_access_key=secret,
                            config=Config(retries={"max_attempts": 1}))

    def mail_to(self, address: str, count: int = 1, timeout: float = 20) -> list[Received]:
        """The messages the relay accepted for `address` (waits for `count` of them)."""
        deadline = time.monotonic() + timeout
        while True:
            with self.relay.lock:
                got = [r for r in self.relay.received if address in r.rcpt_tos]
            if len(got) >= count or time.monotonic() > deadline:
                return got
            time.sleep(0.05)

    def delivery_state(self, delivery_id: str, want: DeliveryState,
                       timeout: float = 20) -> DeliveryState:
        deadline = time.monotonic() + timeout
        while True:
            state = self.t.email.get_delivery(delivery_id).state
            if state is want or time.monotonic() > deadline:
                return state
            time.sleep(0.05)


def serve(db: str, relay: Relay, **settings: Any) -> Iterator[Served]:
    with running_relay(relay) as smtp_url:
        config = Settings(db=db, concurrency=2, shutdown_grace_s=1, smtp_url=smtp_url,
                          public_url="https://mail.example.test", **settings)
        t = Tidings(settings=config)
        # the contact list the sends below name (SES refuses a send naming no such list)
        t.email.contacts.create_list("news", [
            {"TopicName": topic, "DisplayName": topic.title(),
             "DefaultSubscriptionStatus": "OPT_IN"} for topic in ("weekly", "digest")])
        node = Node(t, config)
        try:
            with running_server(node.http_app()) as url:
                yield Served(t, url, relay)
        finally:
            node.bridge.close()
            t.close()


@pytest.fixture(scope="module", params=BACKENDS)
def served(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server and relay per backend for the whole module (tests use distinct names)."""
    yield from module_backend(request.param, tmp_path_factory.mktemp("ses"),
                              lambda db: serve(db, Relay()), "AWS_ENDPOINT_URL_SESV2")


@pytest.fixture(scope="module")
def ses(served: Served) -> Any:
    return served.client()


def error_of(exc: pytest.ExceptionInfo[ClientError]) -> tuple[int, str, str]:
    err = exc.value.response
    return (err["ResponseMetadata"]["HTTPStatusCode"], err["Error"]["Code"],
            err["Error"]["Message"])


def fails(call: Callable[..., Any], **kwargs: Any) -> tuple[int, str, str]:
    with pytest.raises(ClientError) as exc:
        call(**kwargs)
    return error_of(exc)


def content(subject: str, html: str | None = None, text: str | None = None) -> dict[str, str]:
    out = {"Subject": subject}
    if html is not None:
        out["Html"] = html
    if text is not None:
        out["Text"] = text
    return out


# templates -----------------------------------------------------------------------------------

def test_template_crud_and_errors(ses: Any) -> None:
    ses.create_email_template(TemplateName="crud", TemplateContent=content(
        "Hi {{name}}", "<p>Hi {{name}}</p>", "Hi {{name}}"),
        Tags=[{"Key": "team", "Value": "growth"}])
    got = ses.get_email_template(TemplateName="crud")
    assert got["TemplateName"] == "crud"
    assert got["TemplateContent"] == content("Hi {{name}}", "<p>Hi {{name}}</p>", "Hi {{name}}")
    ses.update_email_template(TemplateName="crud", TemplateContent=content("New {{name}}",
                                                                           text="Text only"))
    assert ses.get_email_template(TemplateName="crud")["TemplateContent"] == \
        content("New {{name}}", text="Text only")

    again = fails(ses.create_email_template, TemplateName="crud",
                  TemplateContent=content("x", text="y"))
    assert again[:2] == (400, "AlreadyExistsException") and "crud" in again[2]
    assert fails(ses.get_email_template, TemplateName="nope")[:2] == (404, "NotFoundException")
    assert fails(ses.update_email_template, TemplateName="nope",
                 TemplateContent=content("x", text="y"))[:2] == (404, "NotFoundException")
    bad_name = fails(ses.create_email_template, TemplateName="bad name!",
                     TemplateContent=content("x", text="y"))
    assert bad_name[:2] == (400, "BadRequestException") and "TemplateName" in bad_name[2]
    no_body = fails(ses.create_email_template, TemplateName="empty",
                    TemplateContent=content("x"))
    assert no_body[:2] == (400, "BadRequestException") and "Html part" in no_body[2]
    syntax = fails(ses.create_email_template, TemplateName="broken",
                   TemplateContent=content("x", text="{{#if a}}never closed"))
    assert syntax[:2] == (400, "BadRequestException")

    ses.delete_email_template(TemplateName="crud")
    assert fails(ses.get_email_template, TemplateName="crud")[:2] == (404, "NotFoundException")
    assert fails(ses.delete_email_template, TemplateName="crud")[:2] == \
        (404, "NotFoundException")


def test_list_templates_pages(ses: Any) -> None:
    made = {f"page-{i}" for i in range(5)}
    for name in sorted(made):
        ses.create_email_template(TemplateName=name, TemplateContent=content(name, text="t"))
    seen: list[str] = []
    kwargs: dict[str, Any] = {"PageSize": 2}
    pages = 0
    while True:
        page = ses.list_email_templates(**kwargs)
        assert len(page["TemplatesMetadata"]) <= 2
        for meta in page["TemplatesMetadata"]:
            assert isinstance(meta["CreatedTimestamp"], datetime)
            assert abs(meta["CreatedTimestamp"] - datetime.now(UTC)) < timedelta(hours=1)
        seen += [m["TemplateName"] for m in page["TemplatesMetadata"]]
        pages += 1
        if "NextToken" not in page:
            break
        kwargs["NextToken"] = page["NextToken"]
    assert made <= set(seen) and len(seen) == len(set(seen)) and seen == sorted(seen)
    assert pages >= 3
    one_page = ses.list_email_templates()["TemplatesMetadata"]
    assert made <= {m["TemplateName"] for m in one_page}
    assert fails(ses.list_email_templates, PageSize=101)[:2] == (400, "BadRequestException")
    assert fails(ses.list_email_templates, NextToken="!!not-a-token")[:2] == \
        (400, "BadRequestException")


def test_render_escapes_html_only_in_the_html_part(ses: Any) -> None:
    ses.create_email_template(TemplateName="render", TemplateContent=content(
        "Deal for {{name}}", "<p>Hi {{name}}</p>", "Hi {{name}}, from {{shop}}"))
    out = ses.test_render_email_template(
        TemplateName="render", TemplateData=json.dumps({"name": "Ana & <Bo>", "shop": "C&A"}))
    msg = message_from_string(out["RenderedTemplate"], policy=policy.default)
    assert isinstance(msg, EmailMessage)
    assert msg["Subject"] == "Deal for Ana & <Bo>" and msg["From"] is None
    assert msg["Date"] and msg["Message-ID"]
    parts = {p.get_content_type(): p.get_content() for p in msg.iter_parts()}
    assert parts == {"text/plain": "Hi Ana & <Bo>, from C&A",
                     "text/html": "<p>Hi Ana &amp; &lt;Bo&gt;</p>"}

    missing = fails(ses.test_render_email_template, TemplateName="render",
                    TemplateData='{"name": "Ana"}')
    assert missing[:2] == (400, "BadRequestException") and "shop" in missing[2]
    assert fails(ses.test_render_email_template, TemplateName="render",
                 TemplateData="not json")[:2] == (400, "BadRequestException")
    assert fails(ses.test_render_email_template, TemplateName="absent",
                 TemplateData="{}")[:2] == (404, "NotFoundException")


# sending -------------------------------------------------------------------------------------

def test_send_simple(served: Served, ses: Any) -> None:
    sent = ses.send_email(
        FromEmailAddress=SENDER,
        Destination={"ToAddresses": ["Ana <simple-to@example.org>"],
                     "CcAddresses": ["simple-cc@example.org"],
                     "BccAddresses": ["simple-bcc@example.org"]},
        ReplyToAddresses=["help@example.com"],
        Content={"Simple": {"Subject": {"Data": "Grüße"},
                            "Body": {"Text": {"Data": "plain body"},
                                     "Html": {"Data": "<b>html body</b>"}},
                            "Headers": [{"Name": "X-Campaign", "Value": "spring"}]}},
        EmailTags=[{"Name": "kind", "Value": "simple"}],
        ConfigurationSetName="marketing",
        ListManagementOptions={"ContactListName": "news", "TopicName": "weekly"})
    [got] = served.mail_to("simple-to@example.org")
    assert got.mail_from == "news@example.com"
    assert sorted(got.rcpt_tos) == ["simple-bcc@example.org", "simple-cc@example.org",
                                    "simple-to@example.org"]
    msg = got.message
    assert msg["Subject"] == "Grüße" and msg["To"] == "Ana <simple-to@example.org>"
    assert msg["Cc"] == "simple-cc@example.org" and msg["Bcc"] is None
    assert msg["Reply-To"] == "help@example.com" and msg["X-Campaign"] == "spring"
    assert msg["X-SES-CONFIGURATION-SET"] == "marketing"
    assert msg["X-Tidings-Tag"] == "kind=simple" and msg["List-Unsubscribe"]
    parts = {p.get_content_type(): p.get_content() for p in msg.iter_parts()}
    assert parts == {"text/plain": "plain body", "text/html": "<b>html body</b>"}
    assert served.delivery_state(sent["MessageId"], DeliveryState.SENT) is DeliveryState.SENT
    assert msg["Message-ID"] == f"<{sent['MessageId']}@example.com>"


def test_send_template_by_name_and_arn(served: Served, ses: Any) -> None:
    ses.create_email_template(TemplateName="welcome", TemplateContent=content(
        "Welcome {{name}}", "<p>{{name}} &amp; co</p>", "Welcome, {{name}}!"))
    ses.send_email(FromEmailAddress=SENDER,
                   Destination={"ToAddresses": ["by-name@example.org"]},
                   Content={"Template": {"TemplateName": "welcome",
                                         "TemplateData": '{"name": "Ana"}'}})
    arn = "arn:aws:ses:us-east-1:000000000000:template/welcome"
    ses.send_email(FromEmailAddress=SENDER,
                   Destination={"ToAddresses": ["by-arn@example.org"]},
                   Content={"Template": {"TemplateArn": arn,
                                         "TemplateData": '{"name": "<Bo>"}'}})
    [by_name] = served.mail_to("by-name@example.org")
    assert by_name.message["Subject"] == "Welcome Ana"
    [by_arn] = served.mail_to("by-arn@example.org")
    msg = by_arn.message
    assert msg["Subject"] == "Welcome <Bo>" and by_arn.rcpt_tos == ["by-arn@example.org"]
    parts = {p.get_content_type(): p.get_content() for p in msg.iter_parts()}
    assert parts == {"text/plain": "Welcome, <Bo>!", "text/html": "<p>&lt;Bo&gt; &amp; co</p>"}

    gone = fails(ses.send_email, FromEmailAddress=SENDER,
                 Destination={"ToAddresses": ["x@example.org"]},
                 Content={"Template": {"TemplateName": "no-such", "TemplateData": "{}"}})
    assert gone[:2] == (404, "NotFoundException")
    for bad in ({"FromEmailAddress": "not-an-address"},
                {"Destination": {"ToAddresses": []}},
                {"Content": {"Template": {"TemplateName": "welcome", "TemplateData": "[1]"}}},
                {"Content": {"Simple": {"Subject": {"Data": "s"}, "Body": {}}}}):
        kwargs: dict[str, Any] = {
            "FromEmailAddress": SENDER, "Destination": {"ToAddresses": ["x@example.org"]},
            "Content": {"Template": {"TemplateName": "welcome", "TemplateData": "{}"}}, **bad}
        assert fails(ses.send_email, **kwargs)[:2] == (400, "BadRequestException"), bad


def now_expression() -> str:
    return time.strftime("at(%Y-%m-%dT%H:%M:%S)", time.gmtime())


def scheduler_client(served: Served) -> Any:
    return boto3.client("scheduler", endpoint_url=served.url, region_name="us-east-1",
                        aws_access_key_id="AKIDTEST", aws_secret_access_key="secret",
                        config=Config(retries={"total_max_attempts": 1}))


UNIVERSAL_SEND_EMAIL = "arn:aws:scheduler:::aws-sdk:sesv2:sendEmail"
ROLE = "arn:aws:iam::000000000000:role/scheduler-invoke"


def test_only_a_send_naming_a_contact_list_carries_list_unsubscribe(served: Served,
                                                                    ses: Any) -> None:
    """SES adds List-Unsubscribe only when SendEmail names a contact list: an invoice or
    a password reset must not offer a one-click unsubscribe from all later mail. The same
    holds for a schedule's sesv2:sendEmail target, whose Input is the SendEmail request."""
    simple = {"Simple": {"Subject": {"Data": "Your invoice"},
                         "Body": {"Text": {"Data": "Due today"}}}}
    ses.send_email(FromEmailAddress=SENDER, Destination={"ToAddresses": ["invoice@example.org"]},
                   Content=simple)
    ses.send_email(FromEmailAddress=SENDER, Destination={"ToAddresses": ["news@example.org"]},
                   Content=simple, ListManagementOptions={"ContactListName": "news"})
    scheduler = scheduler_client(served)
    for name, to, extra in (
            ("reset-mail", "reset@example.org", {}),
            ("digest-mail", "digest@example.org",
             {"ListManagementOptions": {"ContactListName": "news", "TopicName": "digest"}})):
        scheduler.create_schedule(
            Name=name, ScheduleExpression=now_expression(), FlexibleTimeWindow={"Mode": "OFF"},
            Target={"Arn": UNIVERSAL_SEND_EMAIL, "RoleArn": ROLE, "Input": json.dumps({
                "FromEmailAddress": SENDER, "Destination": {"ToAddresses": [to]},
                "Content": simple, **extra})})
    headers = {}
    for address in ("invoice@example.org", "news@example.org", "reset@example.org",
                    "digest@example.org"):
        [got] = served.mail_to(address)
        headers[address] = (got.message["List-Unsubscribe"],
                            got.message["List-Unsubscribe-Post"])
    assert headers["invoice@example.org"] == (None, None)
    assert headers["reset@example.org"] == (None, None)
    for address in ("news@example.org", "digest@example.org"):
        unsub, post = headers[address]
        assert unsub.startswith("<https://mail.example.test/unsubscribe/"), unsub
        assert post == "List-Unsubscribe=One-Click"
    token = headers["digest@example.org"][0].split(">")[0].rsplit("/", 1)[1]
    assert served.t.email.check_unsubscribe(token).list_id == "news/digest"


def schedule_email(scheduler: Any, name: str, expression: str, doc: dict[str, Any],
                   update: bool = False, **target: Any) -> None:
    call = scheduler.update_schedule if update else scheduler.create_schedule
    call(Name=name, ScheduleExpression=expression, FlexibleTimeWindow={"Mode": "OFF"},
         Target={"Arn": UNIVERSAL_SEND_EMAIL, "RoleArn": ROLE, "Input": json.dumps(doc),
                 **target})


def template_doc(to: str, template: str) -> dict[str, Any]:
    return {"FromEmailAddress": SENDER, "Destination": {"ToAddresses": [to]},
            "Content": {"Template": {"TemplateName": template,
                                     "TemplateData": '{"name": "Ana"}'}}}


def test_a_schedule_may_name_a_template_created_after_it(served: Served, ses: Any) -> None:
    """As EventBridge Scheduler, CreateSchedule and UpdateSchedule do not look the template
    up: the invocation does. The template only has to exist when the schedule fires."""
    scheduler = scheduler_client(served)
    doc = template_doc("late@example.org", "made-later")
    later = time.strftime("at(%Y-%m-%dT%H:%M:%S)", time.gmtime(time.time() + 3600))
    schedule_email(scheduler, "late-template", later, doc)  # no such template yet
    with pytest.raises(ClientError) as exc:  # the input's shape is still checked now
        schedule_email(scheduler, "bad-shape", later, {**doc, "Content": {}})
    assert error_of(exc)[:2] == (400, "ValidationException")
    ses.create_email_template(TemplateName="made-later",
                              TemplateContent=content("Hello {{name}}", text="Hi {{name}}"))
    schedule_email(scheduler, "late-template", now_expression(), doc, update=True)
    [got] = served.mail_to("late@example.org")
    assert got.message["Subject"] == "Hello Ana"
    # the log row of a schedule's delivery is written once the relay answered: wait for it
    deadline = time.monotonic() + 20
    while not (logged := served.t.email.log(recipient="late@example.org")[0]):
        assert time.monotonic() < deadline, "no delivery logged"
        time.sleep(0.05)
    [delivery] = logged
    assert served.delivery_state(delivery.id, DeliveryState.SENT) is DeliveryState.SENT
    # The native and Python faces still refuse a template that does not exist.
    with pytest.raises(ValidationError, match="does not exist"):
        served.t.schedules.create(ScheduleSpec("native-late", later, Target.email(
            template_doc("late@example.org", "never-made"))))


def test_a_template_missing_at_firing_goes_to_the_dead_letter_queue(served: Served) -> None:
    """SES answers SendEmail naming a missing template with NotFoundException, a client
    error EventBridge Scheduler does not retry: the firing goes to the target's DLQ at once,
    and the delivery log says RENDERING_FAILURE."""
    sqs = boto3.client("sqs", endpoint_url=served.url, region_name="us-east-1",
                       aws_access_key_id="AKIDTEST", aws_secret_access_key="secret")
    dlq_url = sqs.create_queue(QueueName="email-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    doc = template_doc("never@example.org", "never-made")
    schedule_email(scheduler_client(served), "never-template", now_expression(), doc,
                   DeadLetterConfig={"Arn": dlq_arn},
                   RetryPolicy={"MaximumRetryAttempts": 3, "MaximumEventAgeInSeconds": 600})
    dead: list[dict[str, Any]] = []
    deadline = time.monotonic() + 30
    while not dead and time.monotonic() < deadline:
        dead = sqs.receive_message(QueueUrl=dlq_url, MessageAttributeNames=["All"],
                                   WaitTimeSeconds=2).get("Messages", [])
    [message] = dead
    attrs = {k: v["StringValue"] for k, v in message["MessageAttributes"].items()}
    assert attrs["ERROR_CODE"] == "NotFoundException"
    assert attrs["ERROR_MESSAGE"] == "Template never-made does not exist."
    assert attrs["EXHAUSTED_RETRY_CONDITION"] == "NonRetryableError"
    assert attrs["RETRY_ATTEMPTS"] == "0"
    assert attrs["TARGET_ARN"] == UNIVERSAL_SEND_EMAIL
    assert json.loads(message["Body"]) == doc
    [delivery] = served.t.email.log(recipient="never@example.org")[0]
    assert delivery.state is DeliveryState.RENDERING_FAILURE and delivery.attempts == 1
    assert delivery.detail == "Template never-made does not exist."
    assert served.mail_to("never@example.org", timeout=0) == []
    # Once the template exists, an operator's resend sends what failed.
    served.t.email.create_template("never-made", "Hello {{name}}", text="Hi {{name}}")
    assert served.t.email.resend(recipient="never@example.org",
                                 state="RENDERING_FAILURE").resent == 1
    [got] = served.mail_to("never@example.org")
    assert got.message["Subject"] == "Hello Ana"


def raw_message(message_id: str | None = None) -> bytes:
    msg = EmailMessage()
    msg["From"] = "Raw Sender <raw-from@example.com>"
    msg["To"] = "Ana <raw-to@example.org>, raw-to2@example.org"
    msg["Cc"] = "raw-cc@example.org"
    msg["Subject"] = "Your invoice"
    if message_id:
        msg["Message-ID"] = f"<{message_id}>"
    msg.set_content("Invoice attached.")
    msg.add_attachment(b"%PDF-1.4 fake", maintype="application", subtype="pdf",
                       filename="invoice.pdf")
    return msg.as_bytes(policy=policy.SMTP)


def test_send_raw(served: Served, ses: Any) -> None:
    data = raw_message("invoice-1@example.com")
    sent = ses.send_email(Content={"Raw": {"Data": data}})  # sender and recipients: headers
    [got] = served.mail_to("raw-to@example.org")
    assert got.data == data  # the very bytes
    assert got.mail_from == "raw-from@example.com"
    assert sorted(got.rcpt_tos) == ["raw-cc@example.org", "raw-to2@example.org",
                                    "raw-to@example.org"]
    [attachment] = list(got.message.iter_attachments())
    assert attachment.get_filename() == "invoice.pdf"
    assert served.delivery_state(sent["MessageId"], DeliveryState.SENT) is DeliveryState.SENT
    assert served.t.email.get_delivery(sent["MessageId"]).message_id == "invoice-1@example.com"

    # Destination and FromEmailAddress win over the headers; a Message-ID is added if none.
    bare = raw_message()
    sent = ses.send_email(FromEmailAddress="bounces@example.com",
                          Destination={"BccAddresses": ["raw-only@example.org"]},
                          Content={"Raw": {"Data": bare}})
    [got] = served.mail_to("raw-only@example.org")
    assert got.rcpt_tos == ["raw-only@example.org"] and got.mail_from == "bounces@example.com"
    head = f"Message-ID: <{sent['MessageId']}@example.com>\r\n".encode()
    assert got.data == head + bare

    nobody = EmailMessage()
    nobody["From"] = "raw-from@example.com"
    nobody["Subject"] = "to no one"
    nobody.set_content("x")
    rejected = fails(ses.send_email, Content={"Raw": {"Data": nobody.as_bytes()}})
    assert rejected[:2] == (400, "MessageRejected") and "Destination" in rejected[2]
    huge = raw_message() + b"x" * (700 * 1024)
    too_big = fails(ses.send_email, Content={"Raw": {"Data": huge}})
    assert too_big[:2] == (400, "MessageRejected") and "bytes" in too_big[2]


def test_send_bulk(served: Served, ses: Any) -> None:
    ses.create_email_template(TemplateName="bulk", TemplateContent=content(
        "{{greeting}}, {{name}}", text="{{greeting}} {{name}}, code {{code}}"))
    entries = [{"Destination": {"ToAddresses": [f"bulk-{n}@example.org"]},
                "ReplacementEmailContent": {"ReplacementTemplate": {
                    "ReplacementTemplateData": json.dumps({"name": n, "code": i})}}}
               for i, n in enumerate(["ana", "bo", "cy"])]
    entries.append({"Destination": {"ToAddresses": ["not an address"]}})
    out = ses.send_bulk_email(
        FromEmailAddress=SENDER,
        DefaultContent={"Template": {"TemplateName": "bulk",
                                     "TemplateData": '{"greeting": "Hello", "code": "-"}'}},
        BulkEmailEntries=entries)
    results = out["BulkEmailEntryResults"]
    assert [r["Status"] for r in results] == ["SUCCESS"] * 3 + ["INVALID_PARAMETER"]
    assert "ToAddresses" in results[3]["Error"] and "MessageId" not in results[3]
    assert len({r["MessageId"] for r in results[:3]}) == 3
    for i, name in enumerate(["ana", "bo", "cy"]):
        [got] = served.mail_to(f"bulk-{name}@example.org")
        assert got.rcpt_tos == [f"bulk-{name}@example.org"]
        assert got.message["Subject"] == f"Hello, {name}"
        assert got.message.get_content().rstrip() == f"Hello {name}, code {i}"

    missing = fails(ses.send_bulk_email, FromEmailAddress=SENDER,
                    DefaultContent={"Template": {"TemplateName": "gone"}},
                    BulkEmailEntries=entries[:1])
    assert missing[:2] == (404, "NotFoundException")
    assert fails(ses.send_bulk_email, DefaultContent={"Template": {"TemplateName": "bulk"}},
                 BulkEmailEntries=entries[:1])[:2] == (400, "BadRequestException")
    assert fails(ses.send_bulk_email, FromEmailAddress=SENDER,
                 DefaultContent={"Template": {"TemplateName": "bulk"}},
                 BulkEmailEntries=entries * 13)[:2] == (400, "BadRequestException")


# the suppression list ------------------------------------------------------------------------

def test_suppressed_destination_gets_nothing(served: Served, ses: Any) -> None:
    ses.put_suppressed_destination(EmailAddress="Blocked@Example.org", Reason="BOUNCE")
    got = ses.get_suppressed_destination(EmailAddress="blocked@example.org")
    dest = got["SuppressedDestination"]
    assert (dest["EmailAddress"], dest["Reason"]) == ("blocked@example.org", "BOUNCE")
    assert abs(dest["LastUpdateTime"] - datetime.now(UTC)) < timedelta(minutes=5)

    simple = {"Simple": {"Subject": {"Data": "hi"}, "Body": {"Text": {"Data": "x"}}}}
    # As in SES: accepted, then dropped.
    only = ses.send_email(FromEmailAddress=SENDER,
                          Destination={"ToAddresses": ["blocked@example.org"]}, Content=simple)
    assert served.delivery_state(only["MessageId"], DeliveryState.SUPPRESSED) is \
        DeliveryState.SUPPRESSED
    ses.send_email(FromEmailAddress=SENDER,
                   Destination={"ToAddresses": ["blocked@example.org", "fine@example.org"]},
                   Content=simple)
    [got_mail] = served.mail_to("fine@example.org")
    assert got_mail.rcpt_tos == ["fine@example.org"]
    assert served.mail_to("blocked@example.org", timeout=0) == []

    # Put sets the reason; delete lifts the suppression.
    ses.put_suppressed_destination(EmailAddress="blocked@example.org", Reason="COMPLAINT")
    assert ses.get_suppressed_destination(
        EmailAddress="blocked@example.org")["SuppressedDestination"]["Reason"] == "COMPLAINT"
    ses.delete_suppressed_destination(EmailAddress="blocked@example.org")
    assert fails(ses.get_suppressed_destination, EmailAddress="blocked@example.org")[:2] == \
        (404, "NotFoundException")
    assert fails(ses.delete_suppressed_destination, EmailAddress="blocked@example.org")[:2] \
        == (404, "NotFoundException")
    assert fails(ses.put_suppressed_destination, EmailAddress="x@example.org",
                 Reason="SPAM")[:2] == (400, "BadRequestException")
    assert fails(ses.put_suppressed_destination, EmailAddress="no-at-sign",
                 Reason="BOUNCE")[:2] == (400, "BadRequestException")


def test_list_suppressed_destinations(served: Served, ses: Any) -> None:
    domain = "@listed.example.org"
    reasons = {"b1": "BOUNCE", "b2": "BOUNCE", "c1": "COMPLAINT", "m1": "MANUAL",
               "u1": "UNSUBSCRIBE"}
    for local, reason in reasons.items():
        ses.put_suppressed_destination(EmailAddress=local + domain, Reason=reason)

    def listed(**kwargs: Any) -> dict[str, str]:
        found: dict[str, str] = {}
        while True:
            page = ses.list_suppressed_destinations(PageSize=2, **kwargs)
            assert len(page["SuppressedDestinationSummaries"]) <= 2
            for row in page["SuppressedDestinationSummaries"]:
                assert row["EmailAddress"] not in found
                assert isinstance(row["LastUpdateTime"], datetime)
                found[row["EmailAddress"]] = row["Reason"]
            if "NextToken" not in page:
                return {k.removesuffix(domain): v for k, v in found.items()
                        if k.endswith(domain)}
            kwargs["NextToken"] = page["NextToken"]

    assert listed() == reasons  # UNSUBSCRIBE and MANUAL too, when there is no filter
    assert listed(Reasons=["BOUNCE"]) == {"b1": "BOUNCE", "b2": "BOUNCE"}
    assert listed(Reasons=["BOUNCE", "COMPLAINT"]) == \
        {"b1": "BOUNCE", "b2": "BOUNCE", "c1": "COMPLAINT"}
    now = datetime.now(UTC)
    assert listed(StartDate=now - timedelta(minutes=5)) == reasons
    assert listed(EndDate=now - timedelta(minutes=5)) == {}
    bad = fails(ses.list_suppressed_destinations, NextToken="%%%")
    assert bad[:2] == (400, "InvalidNextTokenException")
    assert fails(ses.list_suppressed_destinations, Reasons=["LOST"])[:2] == \
        (400, "BadRequestException")


# signatures and the AWS CLI ------------------------------------------------------------------

def test_signatures_are_checked_when_keys_are_set(tmp_path: Path) -> None:
    for served in serve(f"sqlite:///{tmp_path}/keys.db", Relay(), aws_keys="AKIDSES:right"):
        served.client("AKIDSES", "right").list_email_templates()
        wrong = fails(served.client("AKIDSES", "wrong").list_email_templates)
        assert wrong[:2] == (403, "InvalidSignatureException")


@pytest.mark.skipif(not AWS.exists(), reason="the AWS CLI (awscli) is not installed")
def test_aws_cli_smoke(served: Served, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID="AKIDCLI", AWS_SECRET_ACCESS_KEY="dummy",
               AWS_CONFIG_FILE=str(tmp_path / "no-config"),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-credentials"),
               AWS_MAX_ATTEMPTS="1")

    def aws(*args: str, ok: bool = True) -> Any:
        done = subprocess.run([str(AWS), "--endpoint-url", served.url, "--region", "us-east-1",
                               "--output", "json", "sesv2", *args],
                              env=env, capture_output=True, text=True, timeout=60, check=False)
        assert (done.returncode == 0) == ok, done.stderr
        return json.loads(done.stdout) if ok and done.stdout.strip() else done.stderr

    aws("create-email-template", "--template-name", "cli-made", "--template-content",
        json.dumps(content("From the CLI, {{who}}", text="Hello {{who}}")))
    names = [m["TemplateName"] for m in aws("list-email-templates")["TemplatesMetadata"]]
    assert "cli-made" in names
    sent = aws("send-email", "--from-email-address", "cli@example.com",
               "--destination", "ToAddresses=cli-to@example.org",
               "--content", json.dumps({"Template": {"TemplateName": "cli-made",
                                                     "TemplateData": '{"who": "shell"}'}}))
    [got] = served.mail_to("cli-to@example.org")
    assert got.message["Subject"] == "From the CLI, shell"
    assert got.message["Message-ID"] == f"<{sent['MessageId']}@example.com>"
    data = raw_message("cli-raw@example.com")  # a fresh MIME boundary each time: once
    version = subprocess.run([str(AWS), "--version"], env=env, capture_output=True,
                             text=True, check=True)
    # awscli v1 base64-encodes a blob given as text itself; v2 takes base64 by default.
    blob = data.decode("ascii") if "aws-cli/1." in version.stdout + version.stderr \
        else base64.b64encode(data).decode()
    aws("send-email", "--content", json.dumps({"Raw": {"Data": blob}}),
        "--destination", "ToAddresses=cli-raw@example.org")
    [got] = served.mail_to("cli-raw@example.org")
    assert got.data == data
    assert "NotFoundException" in aws("get-email-template", "--template-name", "gone",
                                      ok=False)
