"""Limits that protect the node, through real sockets: oversized bodies refused with 413
before they are read, bounded headers and query strings, slow bodies timed out, long polls
capped per node. Clear errors, never a 5xx."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from serving import running_server, serve

from tidings.client import Tidings
from tidings.server.app import create_app
from tidings.server.limits import (
    NATIVE_MAX_BODY,
    SCHEDULER_MAX_BODY,
    SES_MAX_BODY,
    SQS_MAX_BODY,
)
from tidings.settings import Settings


@pytest.fixture
def url(db_url: str) -> Iterator[str]:
    yield from serve(db_url, client_timeout_s=0.5, max_long_polls=2)


def raw(url: str, head: str, body: bytes = b"", read_timeout: float = 5) -> tuple[int, bytes]:
    """Send `head` (and `body`) on a socket, read the answer: (status, everything)."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=read_timeout) as s:
        s.sendall(head.encode() + body)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        return int(data.split(b" ", 2)[1]), data


@pytest.mark.parametrize(("path", "extra", "limit"), [
    ("/", "X-Amz-Target: AmazonSQS.SendMessage\r\nContent-Type: "
          "application/x-amz-json-1.0\r\n", SQS_MAX_BODY),
    ("/", "Content-Type: application/x-www-form-urlencoded\r\n", SQS_MAX_BODY),
    ("/schedules/big", "Content-Type: application/json\r\n", SCHEDULER_MAX_BODY),
    ("/v2/email/outbound-emails", "Content-Type: application/json\r\n", SES_MAX_BODY),
    ("/v1/queues/q/messages", "Content-Type: application/json\r\n", NATIVE_MAX_BODY),
])
def test_a_declared_oversized_body_is_refused_before_it_is_sent(
        url: str, path: str, extra: str, limit: int) -> None:
    """Only the headers go out; the 413 comes back without the node waiting for a byte
    of the body."""
    status, answer = raw(url, f"POST {path} HTTP/1.1\r\nHost: x\r\n{extra}"
                              f"Content-Length: {limit + 1}\r\n\r\n")
    assert status == 413
    assert b"RequestEntityTooLarge" in answer or b"PayloadTooLarge" in answer \
        or b"longer than" in answer


def test_a_streamed_oversized_body_is_cut_off(url: str) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(80):
            yield b"x" * 65536  # 5 MiB, no Content-Length: chunked

    r = httpx.post(f"{url}/v1/queues/q/messages", content=chunks(),
                   headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "RequestEntityTooLarge"


def test_boto3_gets_an_aws_shaped_413(url: str, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    sqs = boto3.client("sqs", endpoint_url=url, region_name="us-east-1",
                       aws_access_key_id="x", aws_secret_access_key="x",
                       config=Config(retries={"max_attempts": 1}))
    queue = sqs.create_queue(QueueName="big")["QueueUrl"]
    with pytest.raises(ClientError) as refused:
        sqs.send_message(QueueUrl=queue, MessageBody="\x01" * (SQS_MAX_BODY // 5))
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 413
    assert refused.value.response["Error"]["Code"] == "RequestEntityTooLarge"


def test_headers_and_query_strings_are_bounded(url: str) -> None:
    big = {f"x-filler-{i}": "y" * 1000 for i in range(13)}
    r = httpx.get(f"{url}/v1/queues", headers=big)
    assert r.status_code == 431
    r = httpx.get(f"{url}/v1/queues", params={"prefix": "p" * 9000})
    assert r.status_code == 414
    assert httpx.get(f"{url}/v1/queues", params={"prefix": "p" * 100}).status_code == 200


def test_a_slow_body_times_out_with_408(url: str) -> None:
    started = time.monotonic()
    status, answer = raw(url, "POST /v1/queues HTTP/1.1\r\nHost: x\r\nContent-Type: "
                              "application/json\r\nContent-Length: 100\r\n\r\n",
                         b'{"name": ')
    assert status == 408 and b"RequestTimeout" in answer
    assert time.monotonic() - started < 3


def test_long_polls_are_capped_per_node(db_url: str) -> None:
    t = Tidings(settings=Settings(db=db_url, max_long_polls=2))
    app = create_app(t)
    coalescer = app.state.tidings_context.coalescer
    try:
        with running_server(app) as url:
            httpx.post(f"{url}/v1/queues", json={"name": "waits"}).raise_for_status()
            results: list[int] = []

            def wait() -> None:
                results.append(httpx.get(f"{url}/v1/queues/waits/messages",
                                         params={"wait": 3}, timeout=20).status_code)

            waiting = [threading.Thread(target=wait) for _ in range(2)]
            for thread in waiting:
                thread.start()
            deadline = time.monotonic() + 10
            while coalescer.long_polls < 2 and time.monotonic() < deadline:
                time.sleep(0.01)  # until both hold their slot (a busy machine is slow)
            assert coalescer.long_polls == 2
            third = httpx.get(f"{url}/v1/queues/waits/messages", params={"wait": 2})
            assert third.status_code == 429
            assert third.json()["error"]["code"] == "TooManyLongPolls"
            assert third.headers["retry-after"] == "1"
            short = httpx.get(f"{url}/v1/queues/waits/messages", params={"wait": 0})
            assert short.status_code == 200  # a short poll takes no slot
            for thread in waiting:
                thread.join()
            assert results == [200, 200] and coalescer.long_polls == 0
            assert httpx.get(f"{url}/v1/queues/waits/messages",
                             params={"wait": 1}).status_code == 200
    finally:
        t.close()
