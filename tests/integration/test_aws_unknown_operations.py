"""Operations tidings does not serve, as the AWS SDKs meet them: each API answers its own
"unknown operation" error, so boto3 names it instead of raising a bare 404.

- REST-JSON (SES v2, Scheduler): `UnknownOperationException`, 404, in `x-amzn-ErrorType`,
  with the service's message member; an SES v2 operation tidings does not implement is
  named in the message. Routes tidings serves keep their own errors (NotFoundException…).
- SQS JSON protocol: `UnknownOperationException` (400); query protocol: `InvalidAction`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from serving import serve

from conftest import BACKENDS, module_backend


@pytest.fixture(scope="module", params=BACKENDS)
def url(request: pytest.FixtureRequest,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from module_backend(request.param, tmp_path_factory.mktemp("unknown-ops"), serve,
                              "AWS_ENDPOINT_URL_SESV2", "AWS_ENDPOINT_URL_SQS",
                              "AWS_ENDPOINT_URL_SCHEDULER")


def client(service: str, url: str) -> Any:
    return boto3.client(service, endpoint_url=url, region_name="us-east-1",
                        aws_access_key_id="AKIDTEST", aws_secret_access_key="secret",
                        config=Config(retries={"total_max_attempts": 1}))


def error(call: Any, **kwargs: Any) -> tuple[int, str, str]:
    with pytest.raises(ClientError) as exc:
        call(**kwargs)
    err = exc.value.response
    return err["ResponseMetadata"]["HTTPStatusCode"], err["Error"]["Code"], (
        err["Error"]["Message"])


def test_ses_operations_tidings_does_not_implement_are_named(url: str) -> None:
    ses = client("sesv2", url)
    status, code, message = error(ses.get_account)
    assert (status, code) == (404, "UnknownOperationException")
    assert message == ("GetAccount is an Amazon SES v2 operation that tidings does not "
                       "implement (GET /v2/email/account).")
    status, code, message = error(ses.create_configuration_set,
                                  ConfigurationSetName="marketing")
    assert (status, code) == (404, "UnknownOperationException")
    assert message.startswith("CreateConfigurationSet is an Amazon SES v2 operation")
    assert error(ses.create_import_job, ImportDestination={
        "ContactListDestination": {"ContactListName": "news",
                                   "ContactListImportAction": "PUT"}},
        ImportDataSource={"S3Url": "s3://bucket/contacts.csv", "DataFormat": "CSV"})[1] == (
        "UnknownOperationException")
    # Routes tidings serves answer their own errors, a missing resource included.
    assert error(ses.get_email_template, TemplateName="absent")[:2] == (
        404, "NotFoundException")
    assert error(ses.delete_email_template, TemplateName="absent")[:2] == (
        404, "NotFoundException")
    assert error(ses.get_suppressed_destination, EmailAddress="nobody@example.org")[:2] == (
        404, "NotFoundException")
    assert ses.list_email_templates()["TemplatesMetadata"] == []


def test_rest_json_wire_shapes(url: str) -> None:
    with httpx.Client(base_url=url, timeout=10) as http:
        nothing = http.get("/v2/email/no-such-thing")
        wrong_method = http.patch("/v2/email/templates")
        scheduler = http.patch("/schedules/nightly")
        deep = http.get("/schedule-groups/a/b/c")
        native = http.get("/v1/no/such/thing")
    assert nothing.status_code == 404
    assert nothing.headers["x-amzn-errortype"] == "UnknownOperationException"
    assert nothing.headers["x-amzn-requestid"]
    assert nothing.json() == {"message": "No Amazon SES v2 operation answers GET "
                                         "/v2/email/no-such-thing."}
    assert wrong_method.status_code == 404
    assert wrong_method.headers["x-amzn-errortype"] == "UnknownOperationException"
    assert scheduler.status_code == 404
    assert scheduler.headers["x-amzn-errortype"] == "UnknownOperationException"
    assert scheduler.json() == {"Message": "No EventBridge Scheduler operation answers PATCH "
                                           "/schedules/nightly."}
    assert deep.headers["x-amzn-errortype"] == "UnknownOperationException"
    # The native API keeps its own error body.
    assert native.status_code == 404 and native.json()["error"]["code"] == "NotFound"


def test_scheduler_routes_keep_their_errors(url: str) -> None:
    scheduler = client("scheduler", url)
    assert error(scheduler.get_schedule, Name="absent")[:2] == (
        404, "ResourceNotFoundException")
    assert error(scheduler.delete_schedule_group, Name="absent")[:2] == (
        404, "ResourceNotFoundException")


def test_sqs_json_unknown_target(url: str) -> None:
    sqs = client("sqs", url)

    def retarget(request: Any, **_: Any) -> None:
        # What a newer SDK calling an operation tidings does not know would send.
        request.headers.replace_header("X-Amz-Target", "AmazonSQS.Juggle")

    sqs.meta.events.register_first("before-sign.sqs.ListQueues", retarget)
    status, code, message = error(sqs.list_queues)
    assert (status, code) == (400, "UnknownOperationException")
    assert message == "Juggle is not an operation of Amazon SQS (X-Amz-Target: " \
                      "AmazonSQS.Juggle)."
    with httpx.Client(base_url=url, timeout=10) as http:
        raw = http.post("/", content=b"{}", headers={
            "X-Amz-Target": "AmazonSQS.Juggle", "Content-Type": "application/x-amz-json-1.0"})
        other = http.post("/", content=b"{}", headers={
            "X-Amz-Target": "AWSEvents.PutEvents",
            "Content-Type": "application/x-amz-json-1.1"})
        query = http.post("/", data={"Action": "Juggle", "Version": "2012-11-05"})
    assert raw.status_code == 400
    assert raw.json()["__type"] == "com.amazon.coral.service#UnknownOperationException"
    assert raw.headers["x-amzn-errortype"] == "UnknownOperationException"
    assert "x-amzn-query-error" not in raw.headers  # no query-era code to translate to
    assert other.status_code == 400
    assert other.headers["x-amzn-errortype"] == "UnknownOperationException"
    assert "AWSEvents.PutEvents" in other.json()["message"]
    assert query.status_code == 400 and "<Code>InvalidAction</Code>" in query.text
    assert "x-amzn-errortype" not in query.headers
