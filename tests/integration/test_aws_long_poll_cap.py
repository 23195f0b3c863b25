"""The long-poll cap (`TIDINGS_MAX_LONG_POLLS`) as boto3 meets it: SQS's throttling error,
which botocore's legacy and standard retry modes retry by themselves, on both of SQS's
protocols. The node allows one long poll; a test holds it with a real receive, and
botocore's own event hooks count the attempts a second receive makes.
"""

from __future__ import annotations

import json
import threading
import time
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
from test_aws_sqs_query import query_model

from conftest import BACKENDS, module_backend
from tidings.client import Tidings
from tidings.queues.coalesce import Coalescer
from tidings.server.app import create_app
from tidings.settings import Settings


class Served:
    def __init__(self, url: str, coalescer: Coalescer, models: Path) -> None:
        self.url = url
        self.coalescer = coalescer
        self.models = models  # botocore's query-era SQS model, for the query protocol

    def client(self, protocol: str = "json", **retries: Any) -> Any:
        session = botocore.session.Session()
        if protocol == "query":
            session.get_component("data_loader").search_paths.insert(0, str(self.models))
        client = boto3.Session(botocore_session=session).client(
            "sqs", endpoint_url=self.url, region_name="us-east-1",
            aws_access_key_id="AKIDTEST", aws_secret_access_key="secret",
            config=Config(retries=retries or {"total_max_attempts": 1}))
        assert client.meta.service_model.protocol == protocol
        return client


def serve(db: str, models: Path) -> Iterator[Served]:
    t = Tidings(settings=Settings(db=db, max_long_polls=1))
    app = create_app(t)
    try:
        with running_server(app) as url:
            yield Served(url, app.state.tidings_context.coalescer, models)
    finally:
        t.close()


@pytest.fixture(scope="module", params=BACKENDS)
def served(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("long-polls")
    models = tmp / "models"
    (models / "sqs" / "2012-11-05").mkdir(parents=True)
    (models / "sqs" / "2012-11-05" / "service-2.json").write_text(
        json.dumps(query_model()))
    yield from module_backend(request.param, tmp, lambda db: serve(db, models),
                              "AWS_ENDPOINT_URL_SQS")


class HeldPoll:
    """A long poll holding the node's one slot until `release()` sends to its queue."""

    def __init__(self, served: Served, name: str) -> None:
        self.client = served.client()
        self.url = self.client.create_queue(QueueName=name)["QueueUrl"]
        self.got: list[dict[str, Any]] = []
        self.thread = threading.Thread(target=lambda: self.got.append(
            self.client.receive_message(QueueUrl=self.url, WaitTimeSeconds=20)))
        self.thread.start()
        deadline = time.monotonic() + 10
        while served.coalescer.long_polls < 1 and time.monotonic() < deadline:
            time.sleep(0.01)  # until the receive holds its slot (a busy machine is slow)
        assert served.coalescer.long_polls == 1

    def release(self) -> None:
        if self.thread.is_alive():
            self.client.send_message(QueueUrl=self.url, MessageBody="release")
            self.thread.join(20)
        assert self.got and self.got[0]["Messages"][0]["Body"] == "release"


class Attempts:
    """Every attempt of one operation as botocore made it, with the answer it parsed."""

    def __init__(self, client: Any, operation: str) -> None:
        self.sent = 0
        self.answers: list[tuple[int, str, str | None]] = []  # status, code, Retry-After
        self.on_throttled: Any = None
        client.meta.events.register(f"before-send.sqs.{operation}", self._before_send)
        client.meta.events.register(f"needs-retry.sqs.{operation}", self._answered)

    def _before_send(self, **_: Any) -> None:
        self.sent += 1

    def _answered(self, response: Any = None, **_: Any) -> None:
        if response is None:
            return
        http, parsed = response
        code = parsed.get("Error", {}).get("Code", "")
        self.answers.append((http.status_code, code, http.headers.get("retry-after")))
        if code == "RequestThrottled" and self.on_throttled is not None:
            self.on_throttled()


@pytest.mark.parametrize("protocol", ["json", "query"])
@pytest.mark.parametrize("mode", ["legacy", "standard"])
def test_the_sdk_retries_a_receive_refused_by_the_cap(served: Served, protocol: str,
                                                      mode: str) -> None:
    held = HeldPoll(served, f"held-{protocol}-{mode}")
    consumer = served.client(protocol, mode=mode, total_max_attempts=4)
    url = consumer.create_queue(QueueName=f"work-{protocol}-{mode}")["QueueUrl"]
    consumer.send_message(QueueUrl=url, MessageBody="job")
    attempts = Attempts(consumer, "ReceiveMessage")
    attempts.on_throttled = held.release  # the slot frees; the SDK's retry finds it free
    try:
        got = consumer.receive_message(QueueUrl=url, WaitTimeSeconds=5)
    finally:
        held.release()
    assert got["Messages"][0]["Body"] == "job"
    assert attempts.answers[0] == (429, "RequestThrottled", "1")
    assert attempts.answers[-1][:2] == (200, "")
    assert attempts.sent == len(attempts.answers) >= 2
    assert got["ResponseMetadata"]["RetryAttempts"] == attempts.sent - 1


@pytest.mark.parametrize("protocol", ["json", "query"])
@pytest.mark.parametrize("mode", ["legacy", "standard"])
def test_the_sdk_names_the_throttling_once_its_retries_run_out(served: Served, protocol: str,
                                                               mode: str) -> None:
    held = HeldPoll(served, f"held-out-{protocol}-{mode}")
    consumer = served.client(protocol, mode=mode, total_max_attempts=3)
    url = consumer.create_queue(QueueName=f"out-{protocol}-{mode}")["QueueUrl"]
    attempts = Attempts(consumer, "ReceiveMessage")
    try:
        with pytest.raises(ClientError) as exc:
            consumer.receive_message(QueueUrl=url, WaitTimeSeconds=5)
        # A short poll takes no slot: the consumer still reads while long polls are capped.
        assert "Messages" not in consumer.receive_message(QueueUrl=url, WaitTimeSeconds=0)
    finally:
        held.release()
    assert isinstance(exc.value, consumer.exceptions.RequestThrottled)
    error = exc.value.response
    assert error["Error"]["Code"] == "RequestThrottled"
    assert "TIDINGS_MAX_LONG_POLLS" in error["Error"]["Message"]
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 429
    assert error["ResponseMetadata"]["RetryAttempts"] == 2
    assert attempts.sent == 4  # three for the long poll, one for the short poll
    assert attempts.answers[:3] == [(429, "RequestThrottled", "1")] * 3


def test_the_wire_answers_of_the_cap(served: Served) -> None:
    """What an SDK reads: the JSON protocol's shape and query-era code, the query
    protocol's XML code, and the native API's 429; each with Retry-After."""
    held = HeldPoll(served, "held-wire")
    client = served.client()
    url = client.create_queue(QueueName="wire")["QueueUrl"]
    try:
        with httpx.Client(base_url=served.url, timeout=10) as http:
            json_answer = http.post("/", json={"QueueUrl": url, "WaitTimeSeconds": 2},
                                    headers={"X-Amz-Target": "AmazonSQS.ReceiveMessage",
                                             "Content-Type": "application/x-amz-json-1.0"})
            query_answer = http.post(url, data={"Action": "ReceiveMessage",
                                                "WaitTimeSeconds": "2"})
            native = http.get("/v1/queues/wire/messages", params={"wait": 2})
    finally:
        held.release()
    assert json_answer.status_code == 429 and json_answer.headers["retry-after"] == "1"
    assert json_answer.json()["__type"] == "com.amazonaws.sqs#RequestThrottled"
    assert json_answer.headers["x-amzn-query-error"] == "RequestThrottled;Sender"
    assert query_answer.status_code == 429 and query_answer.headers["retry-after"] == "1"
    assert "<Code>RequestThrottled</Code>" in query_answer.text
    assert "<Type>Sender</Type>" in query_answer.text
    assert native.status_code == 429 and native.headers["retry-after"] == "1"
    assert native.json()["error"]["code"] == "TooManyLongPolls"
