"""The AWS CLI against `tidings serve`'s SQS API, changing only the endpoint URL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serving import running_server

from tidings.client import Tidings
from tidings.server.app import create_app
from tidings.settings import Settings

AWS = Path(sys.executable).parent / "aws"

pytestmark = pytest.mark.skipif(not AWS.exists(), reason="the AWS CLI (awscli) is not installed")


@pytest.fixture
def aws(tmp_path: Path, db_url: str) -> Iterator[Any]:
    t = Tidings(settings=Settings(db=db_url, aws_keys="AKIDCLI:cli-secret"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    # The machine's own AWS configuration must not leak into the test.
    env.update(AWS_ACCESS_KEY_ID="AKIDCLI", AWS_SECRET_ACCESS_KEY="cli-secret",
               AWS_CONFIG_FILE=str(tmp_path / "no-config"),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-credentials"),
               AWS_MAX_ATTEMPTS="1")
    try:
        with running_server(create_app(t)) as url:

            def run(*args: str) -> Any:
                done = subprocess.run(
                    [str(AWS), "--endpoint-url", url, "--region", "us-east-1",
                     "--output", "json", "sqs", *args],
                    env=env, capture_output=True, text=True, timeout=60, check=False)
                assert done.returncode == 0, done.stderr
                return json.loads(done.stdout) if done.stdout.strip() else None

            yield run
    finally:
        t.close()


def test_cli_round_trip(aws: Any) -> None:
    url = aws("create-queue", "--queue-name", "cli-queue",
              "--attributes", "VisibilityTimeout=60")["QueueUrl"]
    assert url.endswith("/000000000000/cli-queue")
    assert aws("list-queues")["QueueUrls"] == [url]
    sent = aws("send-message", "--queue-url", url, "--message-body", "from the cli",
               "--message-attributes",
               '{"kind": {"DataType": "String", "StringValue": "smoke"}}')
    assert sent["MessageId"] and len(sent["MD5OfMessageAttributes"]) == 32
    got = aws("receive-message", "--queue-url", url, "--message-attribute-names", "All",
              "--wait-time-seconds", "1")["Messages"]
    assert got[0]["Body"] == "from the cli"
    assert got[0]["MessageAttributes"]["kind"]["StringValue"] == "smoke"
    attrs = aws("get-queue-attributes", "--queue-url", url, "--attribute-names", "All")
    assert attrs["Attributes"]["VisibilityTimeout"] == "60"
    assert attrs["Attributes"]["ApproximateNumberOfMessagesNotVisible"] == "1"
    aws("delete-message", "--queue-url", url, "--receipt-handle", got[0]["ReceiptHandle"])
    attrs = aws("get-queue-attributes", "--queue-url", url, "--attribute-names",
                "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible")
    assert attrs["Attributes"] == {"ApproximateNumberOfMessages": "0",
                                   "ApproximateNumberOfMessagesNotVisible": "0"}
