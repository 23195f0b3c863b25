"""SigV4 on the SQS API: real SDK signatures pass, anything else fails with AWS's codes."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import botocore.auth
import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from serving import serve

from tidings.client import Tidings
from tidings.errors import ValidationError
from tidings.server.app import create_app
from tidings.settings import Settings

KEY, SECRET = "AKIDGOOD", "good-secret"
JSON_TYPE = "application/x-amz-json-1.0"


@pytest.fixture(autouse=True)
def _no_aws_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))


@pytest.fixture
def url(db_url: str) -> Iterator[str]:
    yield from serve(db_url, aws_keys=f"OTHER:x, {KEY}:{SECRET}")


def client(url: str, key: str = KEY, secret: str = SECRET) -> Any:
    return boto3.client("sqs", endpoint_url=url, region_name="us-east-1",
                        aws_access_key_id=key, aws_secret_access_key=secret,
                        config=Config(retries={"max_attempts": 1}))


def signed(url: str, body: bytes, target: str | None = "AmazonSQS.ListQueues",
           content_type: str = JSON_TYPE) -> dict[str, str]:
    headers = {"Content-Type": content_type}
    if target:
        headers["X-Amz-Target"] = target
    request = AWSRequest(method="POST", url=url + "/", data=body, headers=headers)
    SigV4Auth(Credentials(KEY, SECRET), "sqs", "us-east-1").add_auth(request)
    return dict(request.headers.items())


def error_of(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, str, int]:
    r = exc.value.response
    return (r["Error"]["Code"], r["Error"].get("QueryErrorCode", ""),
            r["ResponseMetadata"]["HTTPStatusCode"])


def test_correct_keys_pass(url: str) -> None:
    sqs = client(url)
    queue = sqs.create_queue(QueueName="signed")["QueueUrl"]
    sqs.send_message(QueueUrl=queue, MessageBody="x" * 5000)
    assert sqs.receive_message(QueueUrl=queue)["Messages"][0]["Body"] == "x" * 5000


@pytest.mark.parametrize("layout", ["lines", "json"])
def test_keys_from_a_file(tmp_path: Path, db_url: str, layout: str) -> None:
    path = tmp_path / "keys"
    if layout == "json":
        path.write_text(json.dumps({KEY: SECRET}))
    else:
        path.write_text(f"# tidings keys\n\n{KEY} {SECRET}\n")
    for base in serve(db_url, aws_keys_file=str(path)):
        assert "QueueUrls" not in client(base).list_queues()
        with pytest.raises(ClientError) as exc:
            client(base, secret="wrong").list_queues()
        assert error_of(exc)[0] == "SignatureDoesNotMatch"


def test_bad_key_settings_are_refused(tmp_path: Path) -> None:
    t = Tidings(settings=Settings(db=f"sqlite:///{tmp_path}/t.db", aws_keys="no-colon"))
    try:
        with pytest.raises(ValidationError, match="TIDINGS_AWS_KEYS"):
            create_app(t)
    finally:
        t.close()


def test_wrong_secret(url: str) -> None:
    with pytest.raises(ClientError) as exc:
        client(url, secret="not-the-secret").list_queues()
    # the JSON type names the exception, the query-era code is what botocore reports
    assert error_of(exc) == ("SignatureDoesNotMatch", "InvalidSignatureException", 403)


def test_unknown_access_key(url: str) -> None:
    with pytest.raises(ClientError) as exc:
        client(url, key="AKIDUNKNOWN").list_queues()
    assert error_of(exc) == ("InvalidClientTokenId", "UnrecognizedClientException", 403)


def test_altered_body_fails(url: str) -> None:
    body = b'{"QueueName": "honest"}'
    headers = signed(url, body, "AmazonSQS.CreateQueue")
    ok = httpx.post(url + "/", content=body, headers=headers)
    assert ok.status_code == 200, ok.text
    tampered = httpx.post(url + "/", content=b'{"QueueName": "evil"}', headers=headers)
    assert tampered.status_code == 403
    assert tampered.json()["__type"].endswith("#InvalidSignatureException")
    assert tampered.headers["x-amzn-query-error"] == "SignatureDoesNotMatch;Sender"
    assert tampered.headers["x-amzn-requestid"]


def test_stale_date_fails(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) - datetime.timedelta(
        minutes=20)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda *a, **k: stale)
    body = b"{}"
    r = httpx.post(url + "/", content=body, headers=signed(url, body))
    assert r.status_code == 403
    assert "Signature expired" in r.json()["message"]


def test_query_protocol_errors_use_query_codes(url: str) -> None:
    body = b"Action=ListQueues&Version=2012-11-05"
    form = "application/x-www-form-urlencoded; charset=utf-8"
    ok = httpx.post(url + "/", content=body, headers=signed(url, body, None, form))
    assert ok.status_code == 200 and "<ListQueuesResponse" in ok.text
    headers = signed(url, body, None, form)
    bad = httpx.post(url + "/", content=body + b"&QueueNamePrefix=x", headers=headers)
    assert bad.status_code == 403
    assert "<Code>SignatureDoesNotMatch</Code>" in bad.text
    unsigned = httpx.post(url + "/", content=body,
                          headers={"Content-Type": form})
    assert unsigned.status_code == 403
    assert "<Code>MissingAuthenticationToken</Code>" in unsigned.text


def test_unsigned_json_request_is_refused(url: str) -> None:
    r = httpx.post(url + "/", content=b"{}", headers={"Content-Type": JSON_TYPE,
                                                       "X-Amz-Target": "AmazonSQS.ListQueues"})
    assert r.status_code == 403
    assert r.json()["__type"].endswith("#MissingAuthenticationTokenException")


def test_without_keys_anything_goes(db_url: str) -> None:
    for base in serve(db_url):
        r = httpx.post(base + "/", content=b"{}", headers={
            "Content-Type": JSON_TYPE, "X-Amz-Target": "AmazonSQS.ListQueues"})
        assert r.status_code == 200 and r.json() == {}
        assert "QueueUrls" not in client(base, key="anything", secret="at-all").list_queues()
