"""SigV4 verification against requests signed by botocore itself."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from email.utils import formatdate
from typing import Any
from urllib.parse import urlsplit

import boto3  # type: ignore[import-untyped]
import pytest
from botocore.auth import SigV4Auth, SigV4QueryAuth  # type: ignore[import-untyped]
from botocore.awsrequest import AWSPreparedRequest, AWSRequest  # type: ignore[import-untyped]
from botocore.config import Config  # type: ignore[import-untyped]
from botocore.credentials import Credentials  # type: ignore[import-untyped]

from tidings.server.aws.sigv4 import SigV4Error, SigV4Request, verify

AKID = "AKIDTIDINGS0001"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
SECRETS = {AKID: SECRET, "AKIDOTHER": "another-secret"}
CREDS = Credentials(AKID, SECRET)
MINUTE_MS = 60_000


def now_ms() -> int:
    return int(time.time() * 1000)


def _to_request(prepared: AWSPreparedRequest | AWSRequest) -> SigV4Request:
    raw_headers = list(prepared.headers.items())  # AWSRequest keeps repeated headers
    if isinstance(prepared, AWSRequest):
        prepared = prepared.prepare()
    parts = urlsplit(prepared.url)
    # before-send sees header values as bytes; servers hand them over as latin-1 text.
    headers = [(n, v.decode("latin-1") if isinstance(v, bytes) else v) for n, v in raw_headers]
    if not any(name.lower() == "host" for name, _ in headers):
        headers.append(("Host", parts.netloc))  # what the HTTP client adds on the wire
    body = prepared.body or b""
    if isinstance(body, str):
        body = body.encode()
    assert isinstance(body, bytes)
    return SigV4Request(prepared.method, parts.path, parts.query, headers, body)


def sign(
    method: str,
    url: str,
    service: str,
    body: bytes | str = b"",
    headers: dict[str, str] | None = None,
    creds: Credentials = CREDS,
    region: str = "us-east-1",
) -> SigV4Request:
    request = AWSRequest(method=method, url=url, data=body, headers=headers or {})
    SigV4Auth(creds, service, region).add_auth(request)
    return _to_request(request)


def presign(url: str, service: str, expires: int = 300) -> SigV4Request:
    request = AWSRequest(method="GET", url=url)
    SigV4QueryAuth(CREDS, service, "us-east-1", expires=expires).add_auth(request)
    return _to_request(request)


def pairs(request: SigV4Request) -> list[tuple[str, str]]:
    headers = request.headers
    return list(headers.items()) if isinstance(headers, Mapping) else list(headers)


def fails(request: SigV4Request, at_ms: int | None = None, **kw: Any) -> SigV4Error:
    with pytest.raises(SigV4Error) as info:
        verify(request, SECRETS, now_ms() if at_ms is None else at_ms, **kw)
    return info.value


def with_headers(request: SigV4Request, **changes: str) -> SigV4Request:
    names = {k.replace("_", "-").lower(): v for k, v in changes.items()}
    kept = [(n, v) for n, v in pairs(request) if n.lower() not in names]
    return SigV4Request(request.method, request.path, request.query,
                        kept + list(names.items()), request.body)


# -- real SDK clients: the exact bytes boto3 would put on the wire --------------------


class _Captured(Exception):
    pass


def capture(service: str, operation: str, **params: Any) -> SigV4Request:
    client = boto3.client(
        service,
        endpoint_url="http://127.0.0.1:4566",
        region_name="us-east-1",
        aws_access_key_id=AKID,
        aws_secret_access_key=SECRET,
        config=Config(retries={"max_attempts": 0}),
    )
    seen: list[AWSPreparedRequest] = []

    def stop(request: AWSPreparedRequest, **_: Any) -> None:
        seen.append(request)
        raise _Captured

    client.meta.events.register("before-send", stop)
    with pytest.raises(_Captured):
        getattr(client, operation)(**params)
    return _to_request(seen[0])


_TARGET = {"Arn": "arn:aws:sqs:us-east-1:000000000000:q", "RoleArn": "arn:aws:iam::0:role/r"}


@pytest.mark.parametrize(
    ("service", "operation", "params"),
    [
        ("sqs", "send_message", {
            "QueueUrl": "http://127.0.0.1:4566/000000000000/orders",
            "MessageBody": '{"ü": "✓ snowman ☃", "n": 1}',
            "MessageAttributes": {"k": {"DataType": "String", "StringValue": "v v"}},
        }),
        ("sqs", "list_queues", {"QueueNamePrefix": "a b"}),
        ("scheduler", "create_schedule", {
            "Name": "nightly.job-1_x", "GroupName": "team.a-b_c",
            "ScheduleExpression": "cron(0 3 * * ? *)", "Target": _TARGET,
            "FlexibleTimeWindow": {"Mode": "OFF"},
        }),
        ("scheduler", "get_schedule", {"Name": "with space:colon ü", "GroupName": "g 1"}),
        ("scheduler", "delete_schedule", {"Name": "a/b%c+d~e", "GroupName": "x"}),
        ("scheduler", "list_schedules", {"GroupName": "g g", "NamePrefix": "n*", "MaxResults": 5}),
        ("scheduler", "get_schedule_group", {"Name": "grp.é"}),
        ("ses", "send_email", {
            "Source": "a@example.com",
            "Destination": {"ToAddresses": ["b@example.com", "c+tag@example.com"]},
            "Message": {"Subject": {"Data": "Hé & bye"}, "Body": {"Text": {"Data": "x=1&y=2"}}},
        }),
    ],
)
def test_boto3_clients_verify(service: str, operation: str, params: dict[str, Any]) -> None:
    request = capture(service, operation, **params)
    assert verify(request, SECRETS, now_ms(), service=service, region="us-east-1") == AKID
    # Any byte of the body changed breaks the signature.
    if request.body:
        tampered = SigV4Request(request.method, request.path, request.query,
                                request.headers, request.body + b" ")
        assert fails(tampered).code == "SignatureDoesNotMatch"


def test_scheduler_path_is_double_encoded_like_botocore() -> None:
    request = capture("scheduler", "get_schedule", Name="a b:c")
    assert request.path == "/schedules/a%20b%3Ac"
    assert verify(request, SECRETS, now_ms()) == AKID
    decoded = SigV4Request(request.method, "/schedules/a b:c", request.query,
                           request.headers, request.body)
    assert fails(decoded).code == "SignatureDoesNotMatch"


# -- hand-built requests ---------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost:8080/",
        "http://localhost:8080",
        "http://localhost:8080/schedules/a%20b%3Ac%C3%BC",
        "http://localhost:8080/a/./b/../c//d/",
        "http://localhost:8080/q?b=2&a=2&a=1&c=%20x%2F&flag&empty=",
        "http://localhost:8080/q?Action=ReceiveMessage&AttributeName.1=All&AttributeName.2=All",
        "http://localhost:8080/~user/x-y_z.1?tilde=~&uni=%C3%A9",
    ],
)
def test_paths_and_queries(url: str) -> None:
    assert verify(sign("GET", url, "sqs"), SECRETS, now_ms()) == AKID


def test_form_body_query_protocol() -> None:
    body = "Action=SendMessage&MessageBody=h%C3%A9llo+world&QueueUrl=http%3A%2F%2Fx%2Fq"
    request = sign("POST", "http://localhost:8080/", "sqs", body,
                   {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})
    assert verify(request, SECRETS, now_ms()) == AKID


def test_repeated_and_spaced_headers_are_canonicalised() -> None:
    request = AWSRequest(method="POST", url="http://localhost:8080/", data=b"{}")
    request.headers["X-Amz-Target"] = "AmazonSQS.ListQueues"
    request.headers["X-Multi"] = "  one   two  "
    request.headers["X-Multi"] = "three"  # HTTPHeaders keeps both values
    SigV4Auth(CREDS, "sqs", "us-east-1").add_auth(request)
    signed = _to_request(request)
    assert [v for n, v in pairs(signed) if n == "X-Multi"] == ["  one   two  ", "three"]
    assert verify(signed, SECRETS, now_ms()) == AKID
    reordered = with_headers(signed, X_Multi="three")
    assert fails(reordered).code == "SignatureDoesNotMatch"


def test_mapping_headers_are_accepted() -> None:
    request = sign("POST", "http://localhost:8080/", "sqs", b"{}")
    as_mapping = SigV4Request(request.method, request.path, request.query,
                              {n.upper(): v for n, v in pairs(request)},
                              request.body)
    assert verify(as_mapping, SECRETS, now_ms()) == AKID


def test_date_header_instead_of_x_amz_date() -> None:
    request = sign("POST", "http://localhost:8080/", "ses", b"Action=GetSendQuota",
                   {"Date": formatdate(usegmt=True)})
    assert not any(n.lower() == "x-amz-date" for n, _ in pairs(request))
    assert verify(request, SECRETS, now_ms()) == AKID
    assert "expired" in fails(request, now_ms() + 20 * MINUTE_MS).message


def test_content_sha256_header() -> None:
    body = b'{"a": 1}'
    digest = hashlib.sha256(body).hexdigest()
    request = sign("POST", "http://localhost:8080/", "scheduler", body,
                   {"X-Amz-Content-SHA256": digest})
    assert verify(request, SECRETS, now_ms()) == AKID
    swapped = SigV4Request(request.method, request.path, request.query, request.headers,
                           b'{"a": 2}')
    err = fails(swapped)
    assert (err.code, err.status) == ("XAmzContentSHA256Mismatch", 400)


def test_unsigned_payload_leaves_body_unauthenticated() -> None:
    request = AWSRequest(method="POST", url="https://localhost:8443/", data=b"{}")
    request.context["payload_signing_enabled"] = False
    SigV4Auth(CREDS, "sqs", "us-east-1").add_auth(request)
    signed = _to_request(request)
    assert ("X-Amz-Content-SHA256", "UNSIGNED-PAYLOAD") in signed.headers
    other_body = SigV4Request(signed.method, signed.path, signed.query, signed.headers, b"[]")
    assert verify(other_body, SECRETS, now_ms()) == AKID


# -- failures --------------------------------------------------------------------------


def test_wrong_secret() -> None:
    request = sign("POST", "http://localhost:8080/", "sqs", b"{}",
                   creds=Credentials(AKID, "not-the-secret"))
    err = fails(request)
    assert (err.code, err.status, err.json_code) == (
        "SignatureDoesNotMatch", 403, "InvalidSignatureException")
    assert err.message.startswith("The request signature we calculated does not match")
    assert err.canonical_request is not None and err.canonical_request.startswith("POST\n/\n")


def test_altered_parts_fail() -> None:
    request = sign("POST", "http://localhost:8080/a?x=1", "sqs", b"{}",
                   {"X-Amz-Target": "AmazonSQS.ListQueues", "Content-Type": "application/json"})
    assert verify(request, SECRETS, now_ms()) == AKID
    variants = [
        with_headers(request, X_Amz_Target="AmazonSQS.PurgeQueue"),
        with_headers(request, Host="evil.example:8080"),
        SigV4Request("PUT", request.path, request.query, request.headers, request.body),
        SigV4Request(request.method, "/b", request.query, request.headers, request.body),
        SigV4Request(request.method, request.path, "x=2", request.headers, request.body),
        SigV4Request(request.method, request.path, "x=1&y=", request.headers, request.body),
    ]
    for variant in variants:
        assert fails(variant).code == "SignatureDoesNotMatch"
    # Headers outside SignedHeaders are not covered, as in AWS.
    assert verify(with_headers(request, User_Agent="x"), SECRETS, now_ms()) == AKID


def test_unknown_access_key() -> None:
    request = sign("POST", "http://localhost:8080/", "sqs", b"{}",
                   creds=Credentials("AKIDNOBODY", SECRET))
    err = fails(request)
    assert (err.code, err.status, err.json_code) == (
        "InvalidClientTokenId", 403, "UnrecognizedClientException")
    assert err.message == "The security token included in the request is invalid."


def test_clock_skew() -> None:
    request = sign("POST", "http://localhost:8080/", "sqs", b"{}")
    signed_at = now_ms()
    assert verify(request, SECRETS, signed_at + 14 * MINUTE_MS) == AKID
    assert verify(request, SECRETS, signed_at - 14 * MINUTE_MS) == AKID
    late = fails(request, signed_at + 20 * MINUTE_MS)
    assert (late.code, late.status) == ("SignatureDoesNotMatch", 403)
    assert late.message.startswith("Signature expired: ")
    assert "is now earlier than" in late.message and late.message.endswith("- 15 min.)")
    early = fails(request, signed_at - 20 * MINUTE_MS)
    assert early.message.startswith("Signature not yet current: ")
    assert verify(request, SECRETS, signed_at + 20 * MINUTE_MS, 30 * MINUTE_MS) == AKID


def test_missing_authentication() -> None:
    bare = SigV4Request("POST", "/", "Action=ListQueues", [("Host", "h")], b"")
    err = fails(bare)
    assert (err.code, err.status) == ("MissingAuthenticationToken", 403)
    assert err.json_code == "MissingAuthenticationTokenException"


@pytest.mark.parametrize(
    "authorization",
    [
        "AWS AKID:c2lnbmF0dXJl",
        "AWS4-HMAC-SHA256 Credential=AKIDTIDINGS0001/20260101/us-east-1/sqs/aws4_request",
        "AWS4-HMAC-SHA256 Credential=AKIDTIDINGS0001/us-east-1/sqs/aws4_request,"
        " SignedHeaders=host, Signature=00",
        "AWS4-HMAC-SHA256 Credential=AKIDTIDINGS0001/20260101/us-east-1/sqs/aws4_request,"
        " SignedHeaders=x-amz-date, Signature=00",
    ],
)
def test_malformed_authorization(authorization: str) -> None:
    request = SigV4Request("POST", "/", "", [("Host", "h"), ("Authorization", authorization),
                                             ("X-Amz-Date", "20260101T000000Z")], b"")
    err = fails(request)
    assert (err.code, err.status) == ("IncompleteSignature", 400)


def test_missing_date_and_bad_date() -> None:
    request = sign("POST", "http://localhost:8080/", "sqs", b"{}")
    no_date = SigV4Request(request.method, request.path, request.query,
                           [(n, v) for n, v in pairs(request)
                            if n.lower() != "x-amz-date"], request.body)
    assert "'X-Amz-Date' or a 'Date'" in fails(no_date).message
    bad = with_headers(request, X_Amz_Date="2026-01-01T00:00:00Z")
    assert fails(bad).code == "IncompleteSignature"


def test_scope_checks() -> None:
    request = sign("POST", "http://localhost:8080/", "sqs", b"{}", region="eu-west-1")
    assert verify(request, SECRETS, now_ms(), service="sqs", region="eu-west-1") == AKID
    assert "correct service: 'scheduler'" in fails(request, service="scheduler").message
    assert "valid region" in fails(request, region="us-east-1").message
    other_day = with_headers(request, X_Amz_Date="20200101T000000Z")
    assert "Date in Credential scope does not match" in fails(other_day).message


# -- presigned URLs --------------------------------------------------------------------


def test_presigned_url() -> None:
    request = presign("http://localhost:8080/000000000000/q?Action=GetQueueAttributes"
                      "&AttributeName.1=All&Extra=a%20b", "sqs", expires=300)
    assert "X-Amz-Signature=" in request.query
    assert not any(n.lower() == "authorization" for n, _ in pairs(request))
    signed_at = now_ms()
    assert verify(request, SECRETS, signed_at) == AKID
    assert verify(request, SECRETS, signed_at + 299_000) == AKID
    expired = fails(request, signed_at + 301_000)
    assert (expired.code, expired.status) == ("SignatureDoesNotMatch", 403)
    assert expired.message.startswith("Signature expired: ")
    assert fails(request, signed_at - 20 * MINUTE_MS).message.startswith("Signature not yet")


def test_presigned_url_tampering_and_malformed() -> None:
    request = presign("http://localhost:8080/?Action=ListQueues", "sqs")
    longer = request.query.replace("X-Amz-Expires=300", "X-Amz-Expires=900")
    assert fails(SigV4Request("GET", "/", longer, request.headers)).code == (
        "SignatureDoesNotMatch")
    other_action = request.query.replace("ListQueues", "PurgeQueue")
    assert fails(SigV4Request("GET", "/", other_action, request.headers)).code == (
        "SignatureDoesNotMatch")
    no_expiry = "&".join(p for p in request.query.split("&")
                         if not p.startswith("X-Amz-Expires="))
    assert fails(SigV4Request("GET", "/", no_expiry, request.headers)).code == (
        "IncompleteSignature")
    too_long = request.query.replace("X-Amz-Expires=300", "X-Amz-Expires=604801")
    assert fails(SigV4Request("GET", "/", too_long, request.headers)).code == (
        "IncompleteSignature")
    unknown = presign("http://localhost:8080/?Action=ListQueues", "sqs")
    swapped = unknown.query.replace(AKID, "AKIDNOBODY")
    assert fails(SigV4Request("GET", "/", swapped, unknown.headers)).code == (
        "InvalidClientTokenId")
