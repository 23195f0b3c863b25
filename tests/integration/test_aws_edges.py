"""AWS edge semantics worth matching, driven by boto3 against a real server on loopback.

SQS: a standard queue cannot be named `*.fifo`; `ReceiveRequestAttemptId` replays a FIFO
receive for 5 minutes; a receive's visibility cannot be stretched past 12 hours.
Scheduler: targets are checked when invoked (a missing queue is retried by the retry
policy, then dead-lettered with the error attributes); CreateScheduleGroup's ClientToken
makes a retried create idempotent. The SQS half runs on a frozen clock, stepped by hours.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from serving import running_server

from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.node import Node
from tidings.server.app import create_app
from tidings.settings import Settings

ACCOUNT = "000000000000"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/scheduler-invoke"
HOUR_MS = 3_600_000


def client(url: str, service: str) -> Any:
    return boto3.client(service, endpoint_url=url, region_name="us-east-1",
                        aws_access_key_id="AKIDTEST", aws_secret_access_key="secret",
                        config=Config(retries={"max_attempts": 1}))


def code_of(exc: pytest.ExceptionInfo[ClientError]) -> tuple[int, str, str]:
    err = exc.value.response
    return (err["ResponseMetadata"]["HTTPStatusCode"], err["Error"]["Code"],
            err["Error"]["Message"])


@pytest.fixture(autouse=True)
def _no_aws_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SQS",
                "AWS_ENDPOINT_URL_SCHEDULER", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))


@pytest.fixture
def frozen(db_url: str) -> Iterator[tuple[Any, FrozenClock]]:
    """An SQS client of a server whose clock moves only when the test says."""
    clock = FrozenClock(int(datetime(2030, 1, 1, tzinfo=UTC).timestamp() * 1000))
    with Tidings(settings=Settings(db=db_url), clock=clock) as t, \
            running_server(create_app(t)) as url:
        yield client(url, "sqs"), clock


# SQS -----------------------------------------------------------------------------------------


def test_a_standard_queue_cannot_be_named_fifo(frozen: tuple[Any, FrozenClock]) -> None:
    sqs, _ = frozen
    with pytest.raises(ClientError) as exc:
        sqs.create_queue(QueueName="orders.fifo")
    status, code, message = code_of(exc)
    assert (status, code) == (400, "InvalidParameterValue")
    assert "alphanumeric" in message
    with pytest.raises(ClientError) as exc:
        sqs.create_queue(QueueName="orders.fifo", Attributes={"FifoQueue": "false"})
    assert code_of(exc)[1] == "InvalidParameterValue"
    assert sqs.list_queues().get("QueueUrls", []) == []  # nothing half-made
    url = sqs.create_queue(QueueName="orders.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["FifoQueue"])["Attributes"]
    assert attrs == {"FifoQueue": "true"}


def _fifo(sqs: Any, name: str, bodies: list[str]) -> str:
    url: str = sqs.create_queue(QueueName=name, Attributes={
        "FifoQueue": "true", "ContentBasedDeduplication": "true",
        "VisibilityTimeout": "60"})["QueueUrl"]
    for body in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="g")
    return url


def _ids(got: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["MessageId"], m["ReceiptHandle"]) for m in got.get("Messages", [])]


def test_receive_request_attempt_id_replays_a_fifo_receive(
        frozen: tuple[Any, FrozenClock]) -> None:
    sqs, clock = frozen
    url = _fifo(sqs, "attempts.fifo", ["a", "b", "c"])
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2,
                                ReceiveRequestAttemptId="try-1")
    assert [m["Body"] for m in first["Messages"]] == ["a", "b"]
    # The same attempt (a retry after a lost answer): same messages, same receipt handles.
    clock.advance(50_000)
    again = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2,
                                ReceiveRequestAttemptId="try-1")
    assert _ids(again) == _ids(first)
    # ...and their visibility was reset: 50 s later (100 s after the first receive, past
    # its 60 s timeout) they are still in flight, so the group gives nothing else.
    clock.advance(50_000)
    assert "Messages" not in sqs.receive_message(QueueUrl=url, ReceiveRequestAttemptId="other")
    # Once one of them is deleted, the attempt id no longer replays: a fresh receive.
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first["Messages"][0]["ReceiptHandle"])
    clock.advance(61_000)
    fresh = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2,
                                ReceiveRequestAttemptId="try-1")
    assert [m["Body"] for m in fresh["Messages"]] == ["b", "c"]
    assert _ids(fresh)[0] != _ids(first)[1]  # b's new receive has a new handle


def test_receive_request_attempt_id_is_forgotten_after_five_minutes(
        frozen: tuple[Any, FrozenClock]) -> None:
    sqs, clock = frozen
    url = _fifo(sqs, "window.fifo", ["a"])
    first = sqs.receive_message(QueueUrl=url, ReceiveRequestAttemptId="t",
                                VisibilityTimeout=600)
    clock.advance(5 * 60_000 + 1)
    assert "Messages" not in sqs.receive_message(QueueUrl=url, ReceiveRequestAttemptId="t")
    clock.advance(600_000)
    later = sqs.receive_message(QueueUrl=url, ReceiveRequestAttemptId="t")
    assert later["Messages"][0]["MessageId"] == first["Messages"][0]["MessageId"]
    assert later["Messages"][0]["ReceiptHandle"] != first["Messages"][0]["ReceiptHandle"]


def test_a_bad_receive_request_attempt_id_is_invalid_parameter_value(
        frozen: tuple[Any, FrozenClock]) -> None:
    sqs, _ = frozen
    url = _fifo(sqs, "bad-attempt.fifo", ["a"])
    for bad in ("x" * 129, "has space", "é"):
        with pytest.raises(ClientError) as exc:
            sqs.receive_message(QueueUrl=url, ReceiveRequestAttemptId=bad)
        assert code_of(exc)[:2] == (400, "InvalidParameterValue")
    assert sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "a"  # still there


def test_the_attempt_id_is_ignored_on_a_standard_queue(frozen: tuple[Any, FrozenClock]) -> None:
    sqs, _ = frozen
    url = sqs.create_queue(QueueName="plain")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="one")
    sqs.send_message(QueueUrl=url, MessageBody="two")
    a = sqs.receive_message(QueueUrl=url, ReceiveRequestAttemptId="same")
    b = sqs.receive_message(QueueUrl=url, ReceiveRequestAttemptId="same")
    assert {a["Messages"][0]["Body"], b["Messages"][0]["Body"]} == {"one", "two"}


def test_visibility_cannot_pass_twelve_hours_from_the_receive(
        frozen: tuple[Any, FrozenClock]) -> None:
    sqs, clock = frozen
    url = sqs.create_queue(QueueName="long")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m")
    handle = sqs.receive_message(QueueUrl=url, VisibilityTimeout=43200)["Messages"][0][
        "ReceiptHandle"]
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=43200)
    clock.advance(HOUR_MS)
    with pytest.raises(ClientError) as exc:  # 1 h + 12 h since the receive
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle,
                                      VisibilityTimeout=43200)
    status, code, message = code_of(exc)
    assert (status, code) == (400, "InvalidParameterValue")
    assert "Total VisibilityTimeout for the message is beyond the limit [43200 seconds]" in message
    # Exactly up to the limit is allowed; one second more is not, in a batch too.
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=39600)
    out = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
        {"Id": "over", "ReceiptHandle": handle, "VisibilityTimeout": 39601},
        {"Id": "ok", "ReceiptHandle": handle, "VisibilityTimeout": 100}])
    assert [e["Id"] for e in out["Successful"]] == ["ok"]
    assert [(f["Id"], f["Code"], f["SenderFault"]) for f in out["Failed"]] == [
        ("over", "InvalidParameterValue", True)]
    # A new receive starts a new 12 hours.
    clock.advance(101_000)
    again = sqs.receive_message(QueueUrl=url, VisibilityTimeout=10)["Messages"][0]
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=again["ReceiptHandle"],
                                  VisibilityTimeout=43200)


# Scheduler -----------------------------------------------------------------------------------


@pytest.fixture
def node(db_url: str) -> Iterator[str]:
    """A node with its engine loops (schedules fire, deliveries retry) behind real HTTP."""
    config = Settings(db=db_url, concurrency=2, shutdown_grace_s=1)
    with Tidings(settings=config) as t:
        n = Node(t, config)
        try:
            with running_server(n.http_app()) as url:
                yield url
        finally:
            n.bridge.close()


def _due_now() -> str:
    return f"at({datetime.now(UTC):%Y-%m-%dT%H:%M:%S})"


def _receive(sqs: Any, url: str, timeout_s: float = 25) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1, MessageAttributeNames=["All"])
        if got.get("Messages"):
            message: dict[str, Any] = got["Messages"][0]
            return message
    raise AssertionError(f"nothing arrived in {url} within {timeout_s} s")


def test_a_missing_target_queue_is_retried_then_dead_lettered(node: str) -> None:
    scheduler, sqs = client(node, "scheduler"), client(node, "sqs")
    dlq = sqs.create_queue(QueueName="sched-dlq")["QueueUrl"]
    # CreateSchedule does not check that the target exists (AWS checks at invocation).
    arn = scheduler.create_schedule(
        Name="to-nowhere", ScheduleExpression=_due_now(), FlexibleTimeWindow={"Mode": "OFF"},
        Target={"Arn": f"arn:aws:sqs:us-east-1:{ACCOUNT}:not-yet", "RoleArn": ROLE,
                "Input": '{"n": 1}',
                "RetryPolicy": {"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 600},
                "DeadLetterConfig": {"Arn": f"arn:aws:sqs:us-east-1:{ACCOUNT}:sched-dlq"}},
    )["ScheduleArn"]
    dead = _receive(sqs, dlq)
    attrs = {k: v["StringValue"] for k, v in dead["MessageAttributes"].items()}
    assert dead["Body"] == '{"n": 1}'
    assert attrs["ERROR_CODE"] == "QueueDoesNotExist"
    assert "not-yet" in attrs["ERROR_MESSAGE"]
    assert attrs["EXHAUSTED_RETRY_CONDITION"] == "MaximumRetryAttempts"
    assert attrs["RETRY_ATTEMPTS"] == "2"
    assert attrs["SCHEDULE_ARN"] == arn
    assert attrs["TARGET_ARN"] == f"arn:aws:sqs:us-east-1:{ACCOUNT}:not-yet"


def test_a_target_queue_created_before_the_retries_run_out_gets_the_message(node: str) -> None:
    scheduler, sqs = client(node, "scheduler"), client(node, "sqs")
    dlq = sqs.create_queue(QueueName="late-dlq")["QueueUrl"]
    scheduler.create_schedule(
        Name="late", ScheduleExpression=_due_now(), FlexibleTimeWindow={"Mode": "OFF"},
        Target={"Arn": f"arn:aws:sqs:us-east-1:{ACCOUNT}:late-queue", "RoleArn": ROLE,
                "Input": "hello", "RetryPolicy": {"MaximumRetryAttempts": 10},
                "DeadLetterConfig": {"Arn": f"arn:aws:sqs:us-east-1:{ACCOUNT}:late-dlq"}})
    time.sleep(1.5)  # the first invocation has failed by now
    url = sqs.create_queue(QueueName="late-queue")["QueueUrl"]
    assert _receive(sqs, url)["Body"] == "hello"
    assert "Messages" not in sqs.receive_message(QueueUrl=dlq)


def test_create_schedule_group_client_token_is_idempotent(node: str) -> None:
    scheduler = client(node, "scheduler")
    first = scheduler.create_schedule_group(Name="retried", ClientToken="token-1")
    again = scheduler.create_schedule_group(Name="retried", ClientToken="token-1")
    assert again["ScheduleGroupArn"] == first["ScheduleGroupArn"]
    with pytest.raises(scheduler.exceptions.ConflictException):
        scheduler.create_schedule_group(Name="retried", ClientToken="token-2")
    with pytest.raises(scheduler.exceptions.ConflictException):
        scheduler.create_schedule_group(Name="retried")  # boto3 makes a token of its own
    groups = scheduler.list_schedule_groups(NamePrefix="retried")["ScheduleGroups"]
    assert [g["Name"] for g in groups] == ["retried"]
