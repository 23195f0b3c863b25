"""The SQS query protocol (form posts, XML answers), as older SDKs speak it.

botocore speaks it again when given the query-era service model: the current JSON model
with `protocol: query`, each operation's `<Action>Result` wrapper, and the query-era
member names (`Attribute.N.Name`, `MessageAttribute.N.Value.StringValue`, …) restored.
"""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import botocore.session
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from serving import running_server

from tidings.client import Tidings
from tidings.server.app import create_app
from tidings.settings import Settings

NS = {"sqs": "http://queue.amazonaws.com/doc/2012-11-05/"}
ACCOUNT = "000000000000"

#: List shapes whose query-era member name is not the list's name without "List".
_LIST_MEMBERS = {"MessageSystemAttributeList": "MessageSystemAttributeName",
                 "StringList": "StringListValue", "BinaryList": "BinaryListValue"}
_MAP_MEMBERS = {"Attributes": "Attribute", "MessageAttributes": "MessageAttribute",
                "MessageSystemAttributes": "MessageSystemAttribute", "tags": "Tag",
                "Tags": "Tag"}


def query_model() -> dict[str, Any]:
    loader = botocore.session.Session().get_component("data_loader")
    model: dict[str, Any] = copy.deepcopy(loader.load_service_model("sqs", "service-2"))
    meta = model["metadata"]
    meta["protocol"], meta["protocols"] = "query", ["query"]
    meta.pop("awsQueryCompatible", None)
    meta.pop("jsonVersion", None)
    meta.pop("targetPrefix", None)
    meta["xmlNamespace"] = NS["sqs"]
    for name, op in model["operations"].items():
        if "output" in op:
            op["output"]["resultWrapper"] = f"{name}Result"
    for name, shape in model["shapes"].items():
        if shape["type"] == "list":
            shape["member"]["locationName"] = _LIST_MEMBERS.get(name, name.removesuffix("List"))
        elif shape["type"] == "map":
            shape["key"]["locationName"] = "Key" if name == "TagMap" else "Name"
            shape["value"]["locationName"] = "Value"
        elif shape["type"] == "structure":
            for member_name, member in shape.get("members", {}).items():
                if member_name in _MAP_MEMBERS:
                    member["locationName"] = _MAP_MEMBERS[member_name]
    # the query-era code of one modeled error, so botocore can name its exception
    model["shapes"]["QueueDoesNotExist"]["error"] = {
        "code": "AWS.SimpleQueueService.NonExistentQueue", "httpStatusCode": 400,
        "senderFault": True}
    return model


@pytest.fixture
def node(tmp_path: Path, db_url: str,
         monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Tidings, str]]:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    t = Tidings(settings=Settings(db=db_url))
    try:
        with running_server(create_app(t)) as url:
            yield t, url
    finally:
        t.close()


@pytest.fixture
def sqs(node: tuple[Tidings, str], tmp_path: Path) -> Any:
    models = tmp_path / "models" / "sqs" / "2012-11-05"
    models.mkdir(parents=True)
    (models / "service-2.json").write_text(json.dumps(query_model()))
    session = botocore.session.Session()
    session.get_component("data_loader").search_paths.insert(0, str(tmp_path / "models"))
    client = boto3.Session(botocore_session=session).client(
        "sqs", endpoint_url=node[1], region_name="us-east-1", aws_access_key_id="AKID",
        aws_secret_access_key="secret", config=Config(retries={"max_attempts": 1}))
    assert client.meta.service_model.protocol == "query"
    return client


def test_query_protocol_through_botocore(sqs: Any) -> None:
    sent_requests: list[str] = []
    sqs.meta.events.register("before-send.sqs.*",
                             lambda request, **_: sent_requests.append(str(request.body)))
    url = sqs.create_queue(QueueName="legacy", Attributes={"VisibilityTimeout": "40"},
                           tags={"team": "core"})["QueueUrl"]
    assert "Action=CreateQueue" in sent_requests[-1]
    assert "Attribute.1.Name=VisibilityTimeout" in sent_requests[-1]
    assert url.endswith(f"/{ACCOUNT}/legacy")
    attributes = {"s": {"DataType": "String", "StringValue": "a & <b>\r\n"},
                  "n": {"DataType": "Number.int", "StringValue": "42"},
                  "b": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xfe"}}
    sent = sqs.send_message(QueueUrl=url, MessageBody="hello <xml> & \"quotes\"\r\n",
                            MessageAttributes=attributes)
    assert "MessageAttribute.1.Value.DataType" in sent_requests[-1]
    assert len(sent["MD5OfMessageAttributes"]) == 32
    got = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"],
                              AttributeNames=["All"])["Messages"]
    assert got[0]["Body"] == "hello <xml> & \"quotes\"\r\n"  # CR survives the XML
    assert got[0]["MessageAttributes"] == attributes
    assert got[0]["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]
    assert got[0]["Attributes"]["ApproximateReceiveCount"] == "1"
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attrs["VisibilityTimeout"] == "40"
    assert attrs["ApproximateNumberOfMessagesNotVisible"] == "1"
    sqs.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessagesNotVisible"])["Attributes"] == {
        "ApproximateNumberOfMessagesNotVisible": "0"}
    assert sqs.list_queues()["QueueUrls"] == [url]
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "core"}


def test_query_batches_and_errors(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="legacy")["QueueUrl"]
    sent = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "a", "MessageBody": "one", "MessageAttributes": {
            "k": {"DataType": "String", "StringValue": "v"}}},
        {"Id": "b", "MessageBody": "two", "DelaySeconds": 9999}])
    assert [e["Id"] for e in sent["Successful"]] == ["a"]
    assert sent["Failed"][0]["Id"] == "b" and sent["Failed"][0]["SenderFault"] is True
    handle = sqs.receive_message(QueueUrl=url)["Messages"][0]["ReceiptHandle"]
    deleted = sqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": "x", "ReceiptHandle": handle}, {"Id": "y", "ReceiptHandle": "forged"}])
    assert [e["Id"] for e in deleted["Successful"]] == ["x"]
    assert deleted["Failed"][0]["Code"] == "ReceiptHandleIsInvalid"
    with pytest.raises(sqs.exceptions.QueueDoesNotExist) as exc:
        sqs.get_queue_url(QueueName="missing")
    assert exc.value.response["Error"]["Code"] == "AWS.SimpleQueueService.NonExistentQueue"
    assert exc.value.response["Error"]["Type"] == "Sender"
    with pytest.raises(ClientError) as exc2:
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "x"},
                                                      {"Id": "a", "MessageBody": "y"}])
    assert exc2.value.response["Error"]["Code"] == (
        "AWS.SimpleQueueService.BatchEntryIdsNotDistinct")


def test_form_post_to_the_queue_url(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="direct")["QueueUrl"]
    with httpx.Client(timeout=10) as http:
        r = http.post(url, data={"Action": "SendMessage", "MessageBody": "via path",
                                 "Version": "2012-11-05"})
        assert r.status_code == 200, r.text
        assert r.headers["x-amzn-requestid"]
        root = ET.fromstring(r.text)
        assert root.tag == f"{{{NS['sqs']}}}SendMessageResponse"
        assert root.find("sqs:SendMessageResult/sqs:MessageId", NS) is not None
        assert root.findtext("sqs:ResponseMetadata/sqs:RequestId", namespaces=NS) == (
            r.headers["x-amzn-requestid"])
        missing = http.post(url.replace("/direct", "/absent"),
                            data={"Action": "ReceiveMessage"})
        assert missing.status_code == 400
        error = ET.fromstring(missing.text)
        assert error.findtext("sqs:Error/sqs:Code", namespaces=NS) == (
            "AWS.SimpleQueueService.NonExistentQueue")
        assert error.findtext("sqs:Error/sqs:Type", namespaces=NS) == "Sender"
        unknown = http.post(url, data={"Action": "Juggle"})
        assert ET.fromstring(unknown.text).findtext("sqs:Error/sqs:Code",
                                                    namespaces=NS) == "InvalidAction"
    assert sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "via path"
