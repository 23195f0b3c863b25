"""The SQS JSON protocol, driven by boto3 against a real server: what SDK users get.

boto3 does not check SQS digests itself (the Java, .NET and Go SDKs do), so every call
here goes through `check_digests`, an independent implementation of the documented MD5
algorithms that fails the test on any mismatch.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from serving import running_server

from tidings.client import Tidings
from tidings.server.app import create_app
from tidings.settings import Settings

ACCOUNT = "000000000000"


def _prefixed(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def attributes_md5(attrs: dict[str, Any]) -> str:
    """SQS Developer Guide, "Calculating the MD5 message digest for message attributes"."""
    digest = hashlib.md5(usedforsecurity=False)
    for name in sorted(attrs):
        value = attrs[name]
        digest.update(_prefixed(name.encode()) + _prefixed(value["DataType"].encode()))
        if "BinaryValue" in value:
            digest.update(b"\x02" + _prefixed(value["BinaryValue"]))
        else:
            digest.update(b"\x01" + _prefixed(value["StringValue"].encode()))
    return digest.hexdigest()


def check_digests(parsed: dict[str, Any], model: Any, **_: Any) -> None:
    for m in parsed.get("Messages", []):
        assert hashlib.md5(m["Body"].encode(), usedforsecurity=False).hexdigest() == m["MD5OfBody"]
        if "MessageAttributes" in m:
            assert attributes_md5(m["MessageAttributes"]) == m["MD5OfMessageAttributes"]
        else:
            assert "MD5OfMessageAttributes" not in m


def make_client(url: str, **kwargs: Any) -> Any:
    client = boto3.client("sqs", endpoint_url=url, region_name="us-east-1",
                          aws_access_key_id=kwargs.pop("key", "AKIDTEST"),
                          aws_secret_access_key=kwargs.pop("secret", "secret"),
                          config=Config(retries={"max_attempts": 1}), **kwargs)
    client.meta.events.register("after-call.sqs.*", check_digests)
    return client


@pytest.fixture(autouse=True)
def _no_aws_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SQS", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))


@pytest.fixture
def node(db_url: str) -> Iterator[tuple[Tidings, str]]:
    t = Tidings(settings=Settings(db=db_url))
    try:
        with running_server(create_app(t)) as url:
            yield t, url
    finally:
        t.close()


@pytest.fixture
def sqs(node: tuple[Tidings, str]) -> Any:
    return make_client(node[1])


def code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return str(exc.value.response["Error"]["Code"])


def test_queue_lifecycle_and_urls(sqs: Any, node: tuple[Tidings, str]) -> None:
    url = sqs.create_queue(QueueName="orders", Attributes={"VisibilityTimeout": "45"})["QueueUrl"]
    assert url == f"{node[1]}/{ACCOUNT}/orders"
    # the same attributes again: the same queue, as SQS answers
    assert sqs.create_queue(QueueName="orders",
                            Attributes={"VisibilityTimeout": "45"})["QueueUrl"] == url
    with pytest.raises(sqs.exceptions.QueueNameExists) as exc:
        sqs.create_queue(QueueName="orders", Attributes={"VisibilityTimeout": "5"})
    assert code(exc) == "QueueAlreadyExists"  # the query-era code, as botocore reports it
    assert sqs.get_queue_url(QueueName="orders")["QueueUrl"] == url
    sqs.create_queue(QueueName="other")
    assert sqs.list_queues(QueueNamePrefix="ord")["QueueUrls"] == [url]
    # a path, or a URL through another host name, reaches the same queue
    sqs.send_message(QueueUrl=f"/{ACCOUNT}/orders", MessageBody="a")
    sqs.send_message(QueueUrl=f"http://proxy.example:1/{ACCOUNT}/orders", MessageBody="b")
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    assert attrs["Attributes"] == {"ApproximateNumberOfMessages": "2"}
    sqs.delete_queue(QueueUrl=url)
    with pytest.raises(sqs.exceptions.QueueDoesNotExist) as exc:
        sqs.get_queue_url(QueueName="orders")
    assert code(exc) == "AWS.SimpleQueueService.NonExistentQueue"
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.send_message(QueueUrl=url, MessageBody="x")


def test_list_queues_pages_with_the_paginator(sqs: Any) -> None:
    urls = [sqs.create_queue(QueueName=f"q{i}")["QueueUrl"] for i in range(5)]
    first = sqs.list_queues(MaxResults=2)
    assert len(first["QueueUrls"]) == 2 and "NextToken" in first
    assert "NextToken" not in sqs.list_queues()  # no MaxResults: no paging, as SQS
    pages = list(sqs.get_paginator("list_queues").paginate(PaginationConfig={"PageSize": 2}))
    assert [len(p.get("QueueUrls", [])) for p in pages] == [2, 2, 1]
    assert sorted(u for p in pages for u in p["QueueUrls"]) == sorted(urls)


def test_queue_attributes(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="attrs", Attributes={"DelaySeconds": "0"})["QueueUrl"]
    before = int(time.time())
    sqs.send_message(QueueUrl=url, MessageBody="visible")
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=600)
    sqs.send_message(QueueUrl=url, MessageBody="taken")
    sqs.receive_message(QueueUrl=url)
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attrs["ApproximateNumberOfMessages"] == "1"
    assert attrs["ApproximateNumberOfMessagesNotVisible"] == "1"
    assert attrs["ApproximateNumberOfMessagesDelayed"] == "1"
    assert attrs["QueueArn"] == f"arn:aws:sqs:us-east-1:{ACCOUNT}:attrs"
    assert abs(int(attrs["CreatedTimestamp"]) - before) < 60  # seconds, not milliseconds
    assert abs(int(attrs["LastModifiedTimestamp"]) - before) < 60
    assert attrs["VisibilityTimeout"] == "30"
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "90",
                                                       "ReceiveMessageWaitTimeSeconds": "2"})
    named = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "VisibilityTimeout", "ReceiveMessageWaitTimeSeconds", "FifoQueue"])["Attributes"]
    assert named == {"VisibilityTimeout": "90", "ReceiveMessageWaitTimeSeconds": "2"}
    assert "Attributes" not in sqs.get_queue_attributes(QueueUrl=url)
    with pytest.raises(sqs.exceptions.InvalidAttributeName):
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Colour"])
    with pytest.raises(sqs.exceptions.InvalidAttributeValue):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "99999"})
    with pytest.raises(sqs.exceptions.InvalidAttributeValue):
        sqs.create_queue(QueueName="bad", Attributes={"MessageRetentionPeriod": "5"})
    with pytest.raises(sqs.exceptions.InvalidAttributeName):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"Colour": "blue"})
    with pytest.raises(ClientError) as exc:
        sqs.create_queue(QueueName="bad name!")
    assert code(exc) == "InvalidParameterValue"


ATTRIBUTES = {
    "name": {"DataType": "String", "StringValue": "Zoë ✓"},
    "count": {"DataType": "Number", "StringValue": "-12.5e3"},
    "blob": {"DataType": "Binary", "BinaryValue": b"\x00\xff\x10binary"},
    "price": {"DataType": "Number.float", "StringValue": "3.14"},
    "trace.id": {"DataType": "String.uuid", "StringValue": "6f1c"},
    "trace.span": {"DataType": "Binary.gif", "BinaryValue": b"GIF89a"},
}


def test_message_attributes_round_trip_and_filtering(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="attrs")["QueueUrl"]
    sent = sqs.send_message(QueueUrl=url, MessageBody="body", MessageAttributes=ATTRIBUTES)
    assert sent["MD5OfMessageAttributes"] == attributes_md5(ATTRIBUTES)
    assert sent["MD5OfMessageBody"] == hashlib.md5(b"body", usedforsecurity=False).hexdigest()

    def receive(names: list[str]) -> dict[str, Any]:
        got = sqs.receive_message(QueueUrl=url, MessageAttributeNames=names, VisibilityTimeout=0)
        message: dict[str, Any] = got["Messages"][0]
        return message

    assert receive(["All"])["MessageAttributes"] == ATTRIBUTES
    assert receive([".*"])["MessageAttributes"] == ATTRIBUTES
    assert set(receive(["trace.*"])["MessageAttributes"]) == {"trace.id", "trace.span"}
    subset = receive(["name", "blob", "absent"])
    assert set(subset["MessageAttributes"]) == {"name", "blob"}
    # the digest covers the returned subset only (check_digests recomputed it)
    assert subset["MD5OfMessageAttributes"] != sent["MD5OfMessageAttributes"]
    plain = receive([])
    assert "MessageAttributes" not in plain and "MD5OfMessageAttributes" not in plain
    assert "MessageAttributes" not in receive(["absent"])


def test_system_attributes_all_or_named(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="sys")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x")
    m = sqs.receive_message(QueueUrl=url, MessageSystemAttributeNames=["All"],
                            VisibilityTimeout=0)["Messages"][0]
    assert {"SentTimestamp", "ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp",
            "SenderId"} <= set(m["Attributes"])
    m = sqs.receive_message(QueueUrl=url, AttributeNames=["ApproximateReceiveCount"])
    assert m["Messages"][0]["Attributes"] == {"ApproximateReceiveCount": "2"}


def test_send_errors(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="errs")["QueueUrl"]
    with pytest.raises(sqs.exceptions.InvalidMessageContents):
        sqs.send_message(QueueUrl=url, MessageBody="bell \x07")
    with pytest.raises(ClientError) as exc:
        sqs.send_message(QueueUrl=url, MessageBody="x", DelaySeconds=901)
    assert code(exc) == "InvalidParameterValue"
    with pytest.raises(ClientError) as exc:
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageAttributes={
            "n": {"DataType": "Number", "StringValue": "twelve"}})
    assert code(exc) == "InvalidParameterValue"
    with pytest.raises(sqs.exceptions.UnsupportedOperation):
        sqs.add_permission(QueueUrl=url, Label="l", AWSAccountIds=["1"], Actions=["*"])


def test_delete_and_visibility(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="vis")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x")
    handle = sqs.receive_message(QueueUrl=url)["Messages"][0]["ReceiptHandle"]
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0)
    with pytest.raises(sqs.exceptions.MessageNotInflight) as exc:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=5)
    assert code(exc) == "AWS.SimpleQueueService.MessageNotInflight"
    handle = sqs.receive_message(QueueUrl=url)["Messages"][0]["ReceiptHandle"]
    with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid):
        sqs.delete_message(QueueUrl=url, ReceiptHandle="not-a-handle")
    with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid):
        sqs.delete_message(QueueUrl=url, ReceiptHandle=handle[:-2] + "AA")
    sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attrs["ApproximateNumberOfMessages"] == attrs["ApproximateNumberOfMessagesNotVisible"]
    assert attrs["ApproximateNumberOfMessages"] == "0"


def test_batches(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="batch")["QueueUrl"]
    sent = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "a", "MessageBody": "one", "MessageAttributes": {
            "k": {"DataType": "String", "StringValue": "v"}}},
        {"Id": "b", "MessageBody": "two", "DelaySeconds": 0},
        {"Id": "c", "MessageBody": "bad", "DelaySeconds": 5000},
    ])
    assert sorted(e["Id"] for e in sent["Successful"]) == ["a", "b"]
    assert [(f["Id"], f["Code"], f["SenderFault"]) for f in sent["Failed"]] == [
        ("c", "InvalidParameterValue", True)]
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert sorted(m["Body"] for m in got) == ["one", "two"]
    handles = [m["ReceiptHandle"] for m in got]
    changed = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
        {"Id": "x", "ReceiptHandle": handles[0], "VisibilityTimeout": 60},
        {"Id": "y", "ReceiptHandle": "forged", "VisibilityTimeout": 60}])
    assert [e["Id"] for e in changed["Successful"]] == ["x"]
    assert [(f["Id"], f["Code"]) for f in changed["Failed"]] == [("y", "ReceiptHandleIsInvalid")]
    deleted = sqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": "x", "ReceiptHandle": handles[0]}, {"Id": "y", "ReceiptHandle": handles[1]},
        {"Id": "z", "ReceiptHandle": "forged"}])
    assert sorted(e["Id"] for e in deleted["Successful"]) == ["x", "y"]
    assert [f["Id"] for f in deleted["Failed"]] == ["z"]


def test_batch_request_errors(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="batch", Attributes={"MaximumMessageSize": "1024"})[
        "QueueUrl"]
    with pytest.raises(sqs.exceptions.EmptyBatchRequest):
        sqs.send_message_batch(QueueUrl=url, Entries=[])
    with pytest.raises(sqs.exceptions.TooManyEntriesInBatchRequest):
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": "x"} for i in range(11)])
    with pytest.raises(sqs.exceptions.BatchEntryIdsNotDistinct) as exc:
        sqs.delete_message_batch(QueueUrl=url, Entries=[
            {"Id": "a", "ReceiptHandle": "h"}, {"Id": "a", "ReceiptHandle": "h"}])
    assert code(exc) == "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"
    with pytest.raises(sqs.exceptions.InvalidBatchEntryId):
        sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
            {"Id": "no spaces", "ReceiptHandle": "h", "VisibilityTimeout": 1}])
    # SQS caps a batch's total payload at the service maximum (1 MiB)
    big = sqs.create_queue(QueueName="big")["QueueUrl"]
    with pytest.raises(sqs.exceptions.BatchRequestTooLong):
        sqs.send_message_batch(QueueUrl=big, Entries=[
            {"Id": "a", "MessageBody": "x" * 600_000}, {"Id": "b", "MessageBody": "y" * 600_000}])
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.send_message_batch(QueueUrl=url + "-gone", Entries=[{"Id": "a", "MessageBody": "x"}])


def test_purge_and_tags(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="tagged", tags={"team": "core"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x")
    sqs.purge_queue(QueueUrl=url)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    with pytest.raises(sqs.exceptions.PurgeQueueInProgress) as exc:
        sqs.purge_queue(QueueUrl=url)
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "core"}
    sqs.tag_queue(QueueUrl=url, Tags={"env": "test", "team": "edge"})
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "edge", "env": "test"}
    sqs.untag_queue(QueueUrl=url, TagKeys=["team", "absent"])
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"env": "test"}
    sqs.untag_queue(QueueUrl=url, TagKeys=["env"])
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=url)


def test_fifo_queue(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="jobs.fifo", Attributes={
        "FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
    first = sqs.send_message(QueueUrl=url, MessageBody="a", MessageGroupId="g")
    again = sqs.send_message(QueueUrl=url, MessageBody="a", MessageGroupId="g")  # same content
    assert again["MessageId"] == first["MessageId"]
    second = sqs.send_message(QueueUrl=url, MessageBody="b", MessageGroupId="g",
                              MessageDeduplicationId="explicit")
    assert int(second["SequenceNumber"]) > int(first["SequenceNumber"])
    with pytest.raises(ClientError) as exc:
        sqs.send_message(QueueUrl=url, MessageBody="c")
    assert code(exc) == "InvalidParameterValue"
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                              MessageSystemAttributeNames=["All"])["Messages"]
    assert [m["Body"] for m in got] == ["a", "b"]
    assert got[1]["Attributes"]["MessageDeduplicationId"] == "explicit"
    assert got[0]["Attributes"]["MessageGroupId"] == "g"
    assert got[1]["Attributes"]["SequenceNumber"] == second["SequenceNumber"]
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attrs["FifoQueue"] == "true" and attrs["ContentBasedDeduplication"] == "true"


def test_dead_letters_and_message_move_tasks(sqs: Any, node: tuple[Tidings, str]) -> None:
    dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    policy = f'{{"deadLetterTargetArn":"{dlq_arn}","maxReceiveCount":1}}'
    src = sqs.create_queue(QueueName="work", Attributes={"RedrivePolicy": policy})["QueueUrl"]
    redrive = sqs.get_queue_attributes(QueueUrl=src, AttributeNames=["RedrivePolicy"])
    assert dlq_arn in redrive["Attributes"]["RedrivePolicy"]
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] == [src]
    sqs.send_message(QueueUrl=src, MessageBody="poison")
    assert sqs.receive_message(QueueUrl=src, VisibilityTimeout=0)["Messages"]
    assert "Messages" not in sqs.receive_message(QueueUrl=src)  # moved on the second receive
    dead = sqs.receive_message(QueueUrl=dlq, MessageSystemAttributeNames=["All"],
                               VisibilityTimeout=0)["Messages"][0]
    assert dead["Attributes"]["DeadLetterQueueSourceArn"].endswith(":work")

    handle = sqs.start_message_move_task(SourceArn=dlq_arn)["TaskHandle"]
    running = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
    assert running[0]["Status"] == "RUNNING" and running[0]["TaskHandle"] == handle
    node[0].queues.ops.advance_move_tasks(1.0)  # the sweeper's step, run here at once
    done = sqs.list_message_move_tasks(SourceArn=dlq_arn, MaxResults=10)["Results"]
    assert done[0]["Status"] == "COMPLETED" and done[0]["ApproximateNumberOfMessagesMoved"] == 1
    assert sqs.receive_message(QueueUrl=src)["Messages"][0]["Body"] == "poison"
    with pytest.raises(sqs.exceptions.ResourceNotFoundException):
        sqs.cancel_message_move_task(TaskHandle=handle)  # finished: nothing to cancel
    with pytest.raises(sqs.exceptions.ResourceNotFoundException):
        sqs.start_message_move_task(SourceArn=dlq_arn.replace(":dlq", ":gone"))
    with pytest.raises(sqs.exceptions.ResourceNotFoundException):
        sqs.list_message_move_tasks(SourceArn=dlq_arn.replace(":dlq", ":gone"))


def test_long_poll_returns_when_another_client_sends(sqs: Any,
                                                     node: tuple[Tidings, str]) -> None:
    url = sqs.create_queue(QueueName="poll")["QueueUrl"]
    sender = make_client(node[1])
    timer = threading.Timer(0.5, lambda: sender.send_message(QueueUrl=url, MessageBody="hi"))
    started = time.monotonic()
    timer.start()
    try:
        got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=10)
    finally:
        timer.join()
    elapsed = time.monotonic() - started
    assert got["Messages"][0]["Body"] == "hi"
    assert 0.4 < elapsed < 5
    started = time.monotonic()
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)
    assert time.monotonic() - started >= 0.9
