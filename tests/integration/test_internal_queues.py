"""tidings' own queues (`tidings-deliveries`, `tidings-email`) are the engine's: no client
lists them by default, and none can send to, receive from, purge, change or delete them,
through the SQS API (boto3, JSON and query protocols), the native API or the CLI. A test
teardown that deletes every queue it lists leaves the node working; an operator still
sees them, read-only (`tidings queue list --all`, `GET /v1/queues?all=true`, the
console)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from cli_runner import Cli
from serving import running_server

from tidings.client import Tidings
from tidings.errors import InternalQueueAccess, ValidationError
from tidings.model.queues import DELIVERY_QUEUE, EMAIL_QUEUE
from tidings.model.schedules import ScheduleSpec, Target, TargetKind
from tidings.queues.internal import ensure_internal_queues
from tidings.server.app import create_app
from tidings.settings import Settings

ACCOUNT = "000000000000"


@pytest.fixture(autouse=True)
def _no_aws_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SQS", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))


@pytest.fixture
def node(db_url: str) -> Iterator[tuple[Tidings, str]]:
    t = Tidings(settings=Settings(db=db_url))
    ensure_internal_queues(t.queues)  # what every node does at start
    try:
        with running_server(create_app(t)) as url:
            yield t, url
    finally:
        t.close()


def _sqs(url: str) -> Any:
    return boto3.client("sqs", endpoint_url=url, region_name="us-east-1",
                        aws_access_key_id="x", aws_secret_access_key="x",
                        config=Config(retries={"max_attempts": 1}))


def _denied(call: Any, **kwargs: Any) -> None:
    with pytest.raises(ClientError) as exc:
        call(**kwargs)
    err = exc.value.response
    assert (err["ResponseMetadata"]["HTTPStatusCode"], err["Error"]["Code"]) == \
        (403, "AccessDenied"), err
    assert "tidings' own" in err["Error"]["Message"]


def test_sqs_clients_neither_see_nor_touch_them(node: tuple[Tidings, str]) -> None:
    t, url = node
    sqs = _sqs(url)
    mine = sqs.create_queue(QueueName="mine")["QueueUrl"]
    listed = sqs.list_queues().get("QueueUrls", [])
    assert listed == [mine]
    assert sqs.list_queues(QueueNamePrefix="tidings").get("QueueUrls") is None
    # a paged listing is not cut short by the hidden ones
    page = sqs.list_queues(MaxResults=1)
    assert page["QueueUrls"] == [mine] and "NextToken" not in page
    for name in (DELIVERY_QUEUE, EMAIL_QUEUE):
        q = f"{url}/{ACCOUNT}/{name}"
        _denied(sqs.send_message, QueueUrl=q, MessageBody="x")
        _denied(sqs.send_message_batch, QueueUrl=q, Entries=[{"Id": "1", "MessageBody": "x"}])
        _denied(sqs.receive_message, QueueUrl=q, WaitTimeSeconds=0)
        _denied(sqs.purge_queue, QueueUrl=q)
        _denied(sqs.delete_queue, QueueUrl=q)
        _denied(sqs.set_queue_attributes, QueueUrl=q, Attributes={"VisibilityTimeout": "1"})
        _denied(sqs.tag_queue, QueueUrl=q, Tags={"a": "b"})
        _denied(sqs.delete_message, QueueUrl=q, ReceiptHandle="x")
        _denied(sqs.change_message_visibility, QueueUrl=q, ReceiptHandle="x",
                VisibilityTimeout=0)
        _denied(sqs.create_queue, QueueName=name)
        # a queue of the client's may not dead-letter into one of them either
        with pytest.raises(ClientError) as exc:
            sqs.set_queue_attributes(QueueUrl=mine, Attributes={"RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": f"arn:aws:sqs:us-east-1:{ACCOUNT}:{name}",
                 "maxReceiveCount": 3})})
        assert exc.value.response["Error"]["Code"] == "InvalidAttributeValue"
    # the test teardown of many suites: delete every queue listed; the node's stay
    for q in sqs.list_queues().get("QueueUrls", []):
        sqs.delete_queue(QueueUrl=q)
    assert {r.name for r in t.queues.list_queues(include_internal=True)[0]} == \
        {DELIVERY_QUEUE, EMAIL_QUEUE}


def test_the_query_protocol_is_refused_the_same(node: tuple[Tidings, str]) -> None:
    _, url = node
    form = {"Action": "PurgeQueue", "QueueUrl": f"{url}/{ACCOUNT}/{EMAIL_QUEUE}",
            "Version": "2012-11-05"}
    r = httpx.post(url + "/", data=form)
    assert r.status_code == 403 and "<Code>AccessDenied</Code>" in r.text
    r = httpx.post(url + "/", data={"Action": "ListQueues", "Version": "2012-11-05"})
    assert r.status_code == 200 and "tidings-" not in r.text


def test_native_api_and_cli_show_them_only_when_asked(node: tuple[Tidings, str],
                                                      db_url: str, tmp_path: Path) -> None:
    t, url = node
    t.queues.create_queue("mine")
    names = [q["name"] for q in httpx.get(f"{url}/v1/queues").json()["queues"]]
    assert names == ["mine"]
    names = [q["name"] for q in httpx.get(f"{url}/v1/queues?all=true").json()["queues"]]
    assert names == ["mine", DELIVERY_QUEUE, EMAIL_QUEUE]
    r = httpx.post(f"{url}/v1/queues/{EMAIL_QUEUE}/purge")
    assert r.status_code == 403 and r.json()["error"]["code"] == "Forbidden"
    r = httpx.delete(f"{url}/v1/queues/{DELIVERY_QUEUE}")
    assert r.status_code == 403
    assert httpx.get(f"{url}/v1/queues/{EMAIL_QUEUE}").status_code == 200  # looked at
    cli = Cli(db_url, tmp_path)
    assert [q["name"] for q in cli.json("queue", "list")["queues"]] == ["mine"]
    assert [q["name"] for q in cli.json("queue", "list", "--all")["queues"]] == \
        ["mine", DELIVERY_QUEUE, EMAIL_QUEUE]
    out = cli.run("queue", "purge", EMAIL_QUEUE)
    assert out.returncode != 0 and "tidings' own" in out.stdout + out.stderr


def test_python_api_and_schedules_cannot_write_into_them(t: Tidings) -> None:
    ensure_internal_queues(t.queues)
    with pytest.raises(InternalQueueAccess):
        t.queues.send(EMAIL_QUEUE, "{}")
    with pytest.raises(InternalQueueAccess):
        t.queues.receive(DELIVERY_QUEUE)
    with pytest.raises(ValidationError, match="Target.Arn"):
        t.schedules.create(ScheduleSpec("s", "rate(1 hour)",
                                        Target(TargetKind.QUEUE, DELIVERY_QUEUE)))
    t.queues.create_queue("jobs")
    with pytest.raises(ValidationError, match="DeadLetterConfig"):
        t.schedules.create(ScheduleSpec("s", "rate(1 hour)", Target(
            TargetKind.QUEUE, "jobs", dead_letter_queue=EMAIL_QUEUE)))


@pytest.mark.timeout(600)
def test_the_js_sdk_neither_sees_nor_touches_them(node: tuple[Tidings, str]) -> None:
    """The AWS SDK for JavaScript v3 (tests/js/internal_queues.mjs): ListQueues shows only
    the client's queue, every write on the engine's queues is AccessDenied (403)."""
    from test_aws_js import JS, NODE, ensure_packages

    if NODE is None:
        pytest.fail("Node.js is required by the AWS SDK for JavaScript tests")
    ensure_packages()
    t, url = node
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(ENDPOINT=url, AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x",
               AWS_REGION="us-east-1")
    done = subprocess.run([NODE, str(JS / "internal_queues.mjs")], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "hidden and refused" in done.stdout
    assert {r.name for r in t.queues.list_queues(include_internal=True)[0]} == \
        {DELIVERY_QUEUE, EMAIL_QUEUE}
