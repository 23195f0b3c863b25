"""SigV4 keys limited to services and name prefixes, with boto3 over real HTTP; SigV4
required beyond loopback; AWS calls in the audit log."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from serving import running_server

from tidings.client import Tidings
from tidings.errors import ValidationError
from tidings.server.app import create_app
from tidings.server.aws.auth import load_grants
from tidings.settings import Settings

ROLE = "arn:aws:iam::000000000000:role/tidings"
KEYS = """# akid secret [services=…] [prefixes=…]
FULL      full-secret
ORDERS    orders-secret  services=sqs,scheduler  prefixes=orders-
MAILER    mailer-secret  services=ses
"""
SECRETS = {"FULL": "full-secret", "ORDERS": "orders-secret", "MAILER": "mailer-secret"}


@pytest.fixture(autouse=True)
def _no_aws_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))


class Node:
    def __init__(self, t: Tidings, url: str) -> None:
        self.t, self.url = t, url

    def client(self, service: str, key: str) -> Any:
        return boto3.client(service, endpoint_url=self.url, region_name="us-east-1",
                            aws_access_key_id=key, aws_secret_access_key=SECRETS.get(key, "x"),
                            config=Config(retries={"max_attempts": 1}))


def serve(db_url: str, **settings: Any) -> Iterator[Node]:
    t = Tidings(settings=Settings(db=db_url, **settings))
    try:
        with running_server(create_app(t)) as url:
            yield Node(t, url)
    finally:
        t.close()


@pytest.fixture
def node(db_url: str, tmp_path: Path) -> Iterator[Node]:
    (tmp_path / "keys").write_text(KEYS)
    yield from serve(db_url, aws_keys_file=str(tmp_path / "keys"))


def code_of(exc: pytest.ExceptionInfo[ClientError]) -> tuple[int, str]:
    err = exc.value.response
    return err["ResponseMetadata"]["HTTPStatusCode"], err["Error"]["Code"]


def arn(name: str) -> str:
    return f"arn:aws:sqs:us-east-1:000000000000:{name}"


def test_a_key_limited_to_prefixes_sees_and_touches_only_its_queues(node: Node) -> None:
    full, orders = node.client("sqs", "FULL"), node.client("sqs", "ORDERS")
    mine = orders.create_queue(QueueName="orders-new")["QueueUrl"]
    theirs = full.create_queue(QueueName="billing-runs")["QueueUrl"]
    with pytest.raises(ClientError) as denied:
        orders.create_queue(QueueName="billing-other")
    assert code_of(denied) == (403, "AccessDenied")
    assert "orders-" in str(denied.value)
    with pytest.raises(ClientError) as denied:
        orders.send_message(QueueUrl=theirs, MessageBody="x")
    assert code_of(denied) == (403, "AccessDenied")
    with pytest.raises(ClientError) as denied:  # a DLQ outside the prefix is a way out
        orders.set_queue_attributes(QueueUrl=mine, Attributes={
            "RedrivePolicy": f'{{"deadLetterTargetArn": "{arn("billing-runs")}", '
                             '"maxReceiveCount": "3"}'})
    assert code_of(denied) == (403, "AccessDenied")
    orders.send_message(QueueUrl=mine, MessageBody="x")
    assert orders.list_queues()["QueueUrls"] == [mine]
    assert sorted(full.list_queues()["QueueUrls"]) == sorted([mine, theirs])


def test_a_key_limited_to_a_service_is_refused_the_others(node: Node) -> None:
    with pytest.raises(ClientError) as denied:
        node.client("sesv2", "ORDERS").list_email_templates()
    assert code_of(denied) == (403, "AccessDeniedException")
    assert node.client("sesv2", "MAILER").list_email_templates()["TemplatesMetadata"] == []
    with pytest.raises(ClientError) as denied:
        node.client("sqs", "MAILER").list_queues()
    assert code_of(denied) == (403, "AccessDenied")
    with pytest.raises(ClientError) as denied:
        node.client("scheduler", "MAILER").list_schedules()
    assert code_of(denied) == (403, "AccessDeniedException")


def test_scheduler_groups_and_targets_follow_the_prefixes(node: Node) -> None:
    node.client("sqs", "FULL").create_queue(QueueName="billing-runs")
    node.client("sqs", "ORDERS").create_queue(QueueName="orders-jobs")
    orders, full = node.client("scheduler", "ORDERS"), node.client("scheduler", "FULL")

    def create(client: Any, name: str, group: str | None, target: str) -> Any:
        return client.create_schedule(
            Name=name, ScheduleExpression="rate(1 hour)", FlexibleTimeWindow={"Mode": "OFF"},
            Target={"Arn": arn(target), "RoleArn": ROLE}, **({"GroupName": group}
                                                                if group else {}))

    with pytest.raises(ClientError) as denied:  # the default group is not orders-…
        create(orders, "s1", None, "orders-jobs")
    assert code_of(denied) == (403, "AccessDeniedException")
    orders.create_schedule_group(Name="orders-nightly")
    create(orders, "s1", "orders-nightly", "orders-jobs")
    with pytest.raises(ClientError) as denied:  # its group, but another team's queue
        create(orders, "s2", "orders-nightly", "billing-runs")
    assert code_of(denied) == (403, "AccessDeniedException")
    create(full, "s3", None, "billing-runs")
    assert [s["Name"] for s in orders.list_schedules()["Schedules"]] == ["s1"]
    assert {g["Name"] for g in orders.list_schedule_groups()["ScheduleGroups"]} == {
        "orders-nightly"}
    with pytest.raises(ClientError) as denied:
        orders.delete_schedule(Name="s3")
    assert code_of(denied) == (403, "AccessDeniedException")


def test_aws_administration_is_audited_with_the_key_id(node: Node) -> None:
    sqs = node.client("sqs", "FULL")
    url = sqs.create_queue(QueueName="audited")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x")  # not audited
    sqs.purge_queue(QueueUrl=url)
    sqs.delete_queue(QueueUrl=url)
    node.client("scheduler", "ORDERS").create_schedule_group(Name="orders-g")
    node.client("sesv2", "MAILER").create_email_template(
        TemplateName="welcome", TemplateContent={"Subject": "Hi", "Text": "Hello"})
    entries = [(e.actor, e.face, e.action, e.resource) for e in node.t.audit.list()]
    assert entries == [
        ("MAILER", "ses", "ses:CreateTemplate", "/v2/email/templates"),
        ("ORDERS", "scheduler", "scheduler:CreateGroup", "orders-g"),
        ("FULL", "sqs", "sqs:DeleteQueue", "audited"),
        ("FULL", "sqs", "sqs:PurgeQueue", "audited"),
        ("FULL", "sqs", "sqs:CreateQueue", "audited"),
    ]


def test_beyond_loopback_signatures_are_required_even_without_keys(db_url: str) -> None:
    for node in serve(db_url, host="0.0.0.0", api_tokens="admin:" + "a" * 20):
        with pytest.raises(ClientError) as denied:
            node.client("sqs", "ANY").list_queues()
        assert code_of(denied) == (403, "InvalidClientTokenId")
        assert "TIDINGS_AWS_KEYS" in str(denied.value)
        with pytest.raises(ClientError) as denied:
            node.client("scheduler", "ANY").list_schedules()
        assert code_of(denied)[0] == 403


def test_bad_grants_stop_the_node_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text("K1 s1 services=sqs,lambda\n")
    with pytest.raises(ValidationError, match="line 1: services must be among"):
        load_grants(Settings(aws_keys_file=str(path)))
    path.write_text('{"K1": {"secret": "s", "prefixes": ["a-"], "services": ["ses"]}}')
    [(secret, grant)] = load_grants(Settings(aws_keys_file=str(path))).values()
    assert secret == "s" and grant.prefixes == ("a-",) and grant.services == {"ses"}
