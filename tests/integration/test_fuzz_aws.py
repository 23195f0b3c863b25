"""Property-based requests to the AWS wire APIs: SQS (JSON and query), Scheduler, SES v2.

Each example starts from a valid request of some operation and breaks it: a field
replaced by a value of the wrong type, an out-of-range or oversized one (past the 1 MiB
message limit), odd Unicode, a field dropped or one added; or the body itself truncated
at a random byte or replaced by bytes that are not UTF-8. Against a real server on
loopback (SQLite and PostgreSQL), every answer must be:

* never a 5xx;
* on error, AWS's shape for that API with a code AWS uses: SQS JSON `__type` +
  `x-amzn-query-error`, SQS query `<ErrorResponse><Error><Code>`, REST-JSON
  `x-amzn-ErrorType` + `Message`;
* never a stored half-request: after an error the store holds exactly what it held
  before (queues and their attributes, tags and message counts, schedules, groups,
  templates, suppressions).

Derandomized with a bounded number of examples, so it is fast in the default suite;
TIDINGS_FUZZ_EXAMPLES raises the count, TIDINGS_FUZZ_RANDOM=1 draws fresh examples.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from serving import running_server

from conftest import BACKENDS, module_pg_schema, pg_url
from tidings.client import Tidings
from tidings.model.schedules import ScheduleSpec, Target, TargetKind
from tidings.server.app import create_app
from tidings.settings import Settings

EXAMPLES = int(os.environ.get("TIDINGS_FUZZ_EXAMPLES", "60"))
RANDOM = os.environ.get("TIDINGS_FUZZ_RANDOM") == "1"
#: A longer hunt needs longer than the suite's 300 s per test.
LONG = pytest.mark.timeout(max(300, EXAMPLES * 2))
FUZZ = settings(max_examples=EXAMPLES, derandomize=not RANDOM, deadline=None, database=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck))

ACCOUNT = "000000000000"
ARN = f"arn:aws:sqs:us-east-1:{ACCOUNT}"
SQS_CODES = {  # what SQS answers (JSON shape names; the query protocol's legacy codes)
    "QueueDoesNotExist", "QueueNameExists", "ReceiptHandleIsInvalid", "MessageNotInflight",
    "PurgeQueueInProgress", "BatchEntryIdsNotDistinct", "BatchRequestTooLong",
    "EmptyBatchRequest", "InvalidBatchEntryId", "TooManyEntriesInBatchRequest",
    "UnsupportedOperation", "InvalidAttributeName", "InvalidAttributeValue",
    "InvalidMessageContents", "InvalidParameterValue", "MissingParameter", "InvalidAction",
    "ResourceNotFoundException", "OverLimit", "RequestEntityTooLarge",
    "AWS.SimpleQueueService.NonExistentQueue", "QueueAlreadyExists",
    "AWS.SimpleQueueService.MessageNotInflight", "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
    "AWS.SimpleQueueService.BatchRequestTooLong", "AWS.SimpleQueueService.EmptyBatchRequest",
    "AWS.SimpleQueueService.InvalidBatchEntryId",
    "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
    "AWS.SimpleQueueService.UnsupportedOperation", "AWS.SimpleQueueService.PurgeQueueInProgress",
}
SCHEDULER_CODES = {"ValidationException", "ResourceNotFoundException", "ConflictException",
                   "ServiceQuotaExceededException", "ThrottlingException",
                   "RequestEntityTooLarge"}
SES_CODES = {"BadRequestException", "NotFoundException", "AlreadyExistsException",
             "TooManyRequestsException", "MessageRejected", "RequestEntityTooLarge"}



class _Big(str):
    """One byte past SQS's largest message; printed short in a failing example."""

    def __repr__(self) -> str:
        return f"'x' * {len(self)}"


BIG = _Big("x" * (1024 * 1024 + 1))
JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=8),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=8), st.text(max_size=8),
                                                        max_size=3),
    st.just(""), st.just(BIG), st.just("-1"), st.just("99999999999999999999"),
)


# --- the server and its store -------------------------------------------------------------


def _seed(t: Tidings) -> None:
    t.queues.create_queue("fz")
    t.queues.create_queue("fz.fifo")
    t.queues.create_queue("fz-dlq")
    t.queues.send("fz", "seed")
    t.schedules.create_group("fz-group")
    t.schedules.create(ScheduleSpec("fz-sched", "rate(1 hour)", Target(TargetKind.QUEUE, "fz")))
    t.email.create_template("fz-template", "Hi {{name}}", text="Hello {{name}}")


def snapshot(t: Tidings) -> Any:
    """Everything a request could have half-written."""
    queues = []
    for record in t.queues.list_queues(limit=1000)[0]:
        counts = t.queues.describe(record.name).counts
        queues.append((record.name, record.attributes.to_json(),
                       counts.visible + counts.in_flight + counts.delayed))
    schedules = [(s.group, s.name, s.spec.expression, s.spec.state.value)
                 for s in t.schedules.list(limit=100)[0]]
    groups = [(g.name, g.tags) for g in t.schedules.list_groups(limit=100)[0]]
    templates = [(x.name, x.subject, x.html, x.text) for x in t.email.list_templates()[0]]
    suppressed = [s.address for s in t.email.list_suppressions()[0]]
    return queues, schedules, groups, templates, suppressed


class Served:
    def __init__(self, t: Tidings, url: str) -> None:
        self.t = t
        self.url = url
        self.http = httpx.Client(base_url=url, timeout=30)

    def check_nothing_half_stored(self, before: Any, status: int, what: str) -> None:
        if status >= 400:
            assert snapshot(self.t) == before, f"a refused request changed the store: {what}"


@pytest.fixture(scope="module", params=BACKENDS)
def served(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    def serve(db: str) -> Iterator[Served]:
        with Tidings(settings=Settings(db=db)) as t:
            _seed(t)
            with running_server(create_app(t)) as url:
                s = Served(t, url)
                yield s
                s.http.close()

    if request.param == "sqlite":
        yield from serve(f"sqlite:///{tmp_path_factory.mktemp('fuzz-aws')}/t.db")
    else:
        with module_pg_schema() as schema:
            yield from serve(pg_url(schema))


# --- breaking a valid request -------------------------------------------------------------


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def broken(draw: st.DrawFn, base: dict[str, Any]) -> dict[str, Any]:
    """`base` with one to three of its fields replaced, dropped, or joined by another."""
    doc = json.loads(json.dumps(base))
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent: Any = doc
        for key in path[:-1]:
            parent = parent[key]
        how = draw(st.sampled_from(["replace", "replace", "drop", "add"]))
        if how == "replace":
            parent[path[-1]] = draw(JUNK)
        elif how == "drop":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=12))] = draw(JUNK)
    return doc


@st.composite
def body_of(draw: st.DrawFn, encode: Callable[[dict[str, Any]], bytes],
            bases: dict[str, dict[str, Any]]) -> tuple[str, bytes]:
    action = draw(st.sampled_from(sorted(bases)))
    doc = draw(st.one_of(st.just(bases[action]), broken(bases[action])))
    raw = encode(doc)
    fault = draw(st.sampled_from(["none", "none", "none", "truncate", "bytes"]))
    if fault == "truncate" and raw:
        raw = raw[: draw(st.integers(0, len(raw) - 1))]
    elif fault == "bytes":
        raw = draw(st.binary(max_size=200)) + b"\xff\xfe"
    return action, raw


def _quick(action: str, doc: dict[str, Any]) -> dict[str, Any]:
    # A valid long poll would wait up to 20 s for nothing: the fuzzer does not need that.
    if action == "ReceiveMessage" and isinstance(doc.get("WaitTimeSeconds"), int):
        doc["WaitTimeSeconds"] = 0
    return doc


# --- SQS ----------------------------------------------------------------------------------

Q = f"http://127.0.0.1/{ACCOUNT}/fz"
SQS_BASES: dict[str, dict[str, Any]] = {
    "CreateQueue": {"QueueName": "fz-new", "Attributes": {
        "VisibilityTimeout": "30", "RedrivePolicy": json.dumps(
            {"deadLetterTargetArn": f"{ARN}:fz-dlq", "maxReceiveCount": 3})},
        "tags": {"team": "a"}},
    "SendMessage": {"QueueUrl": Q, "MessageBody": "hello", "DelaySeconds": 0,
                    "MessageAttributes": {"kind": {"DataType": "String",
                                                   "StringValue": "greeting"}}},
    "SendMessageBatch": {"QueueUrl": Q, "Entries": [
        {"Id": "a", "MessageBody": "one"},
        {"Id": "b", "MessageBody": "two", "DelaySeconds": 1}]},
    "ReceiveMessage": {"QueueUrl": Q, "MaxNumberOfMessages": 1, "VisibilityTimeout": 0,
                       "WaitTimeSeconds": 0, "MessageSystemAttributeNames": ["All"]},
    "DeleteMessage": {"QueueUrl": Q, "ReceiptHandle": "AAAA"},
    "DeleteMessageBatch": {"QueueUrl": Q, "Entries": [{"Id": "a", "ReceiptHandle": "AAAA"}]},
    "ChangeMessageVisibility": {"QueueUrl": Q, "ReceiptHandle": "AAAA",
                                "VisibilityTimeout": 10},
    "ChangeMessageVisibilityBatch": {"QueueUrl": Q, "Entries": [
        {"Id": "a", "ReceiptHandle": "AAAA", "VisibilityTimeout": 10}]},
    "SetQueueAttributes": {"QueueUrl": Q, "Attributes": {"DelaySeconds": "0",
                                                         "MaximumMessageSize": "262144"}},
    "GetQueueAttributes": {"QueueUrl": Q, "AttributeNames": ["All"]},
    "TagQueue": {"QueueUrl": Q, "Tags": {"k": "v"}},
    "UntagQueue": {"QueueUrl": Q, "TagKeys": ["k"]},
    "GetQueueUrl": {"QueueName": "fz"},
    "ListQueues": {"QueueNamePrefix": "fz", "MaxResults": 5},
    "ListQueueTags": {"QueueUrl": Q},
    "StartMessageMoveTask": {"SourceArn": f"{ARN}:fz-dlq", "DestinationArn": f"{ARN}:fz"},
}


def _json_encode(action: str) -> Callable[[dict[str, Any]], bytes]:
    return lambda doc: json.dumps(_quick(action, doc)).encode()


def _check_sqs_json(r: httpx.Response) -> None:
    assert r.status_code < 500, r.text
    if r.status_code >= 400:
        doc = r.json()
        shape = str(doc["__type"]).rsplit("#", 1)[-1]
        assert shape in SQS_CODES, doc
        assert isinstance(doc.get("message"), str) and doc["message"]
        code, fault = r.headers["x-amzn-query-error"].split(";")
        assert code in SQS_CODES and fault == "Sender", r.headers


@given(data=st.data())
@FUZZ
def _sqs_json(served: Served, data: st.DataObject) -> None:
    action = data.draw(st.sampled_from(sorted(SQS_BASES)))
    _, raw = data.draw(body_of(_json_encode(action), {action: SQS_BASES[action]}))
    before = snapshot(served.t)
    r = served.http.post("/", content=raw, headers={
        "X-Amz-Target": f"AmazonSQS.{action}", "Content-Type": "application/x-amz-json-1.0"})
    _check_sqs_json(r)
    served.check_nothing_half_stored(before, r.status_code, f"{action} {raw[:300]!r}")


@LONG
def test_sqs_json_protocol_under_fuzzing(served: Served) -> None:
    _sqs_json(served)


def _flatten(doc: Any, prefix: str = "") -> list[tuple[str, str]]:
    """A JSON request as query-protocol parameters (Attribute.1.Name, Entry.2.Id, ...)."""
    if isinstance(doc, dict):
        if prefix and all(isinstance(k, str) for k in doc) and prefix.endswith(
                ("Attribute", "Tag", "MessageAttribute")):
            out = []
            for i, (k, v) in enumerate(doc.items(), 1):
                out += [(f"{prefix}.{i}.Name" if not prefix.endswith("Tag")
                         else f"{prefix}.{i}.Key", str(k))]
                out += _flatten(v, f"{prefix}.{i}.Value")
            return out
        out = []
        for k, v in doc.items():
            name = {"Attributes": "Attribute", "Tags": "Tag", "tags": "Tag",
                    "MessageAttributes": "MessageAttribute", "Entries":
                    "Entry"}.get(str(k), str(k))
            out += _flatten(v, f"{prefix}.{name}" if prefix else name)
        return out
    if isinstance(doc, list):
        out = []
        for i, v in enumerate(doc, 1):
            out += _flatten(v, f"{prefix}.{i}")
        return out
    return [(prefix, "" if doc is None else str(doc))]


def _check_sqs_query(r: httpx.Response) -> None:
    assert r.status_code < 500, r.text
    if r.status_code >= 400:
        root = ET.fromstring(r.content)
        ns = {"q": root.tag[1:].split("}")[0]} if root.tag.startswith("{") else {}
        code = root.find("q:Error/q:Code" if ns else "Error/Code", ns)
        kind = root.find("q:Error/q:Type" if ns else "Error/Type", ns)
        assert code is not None and code.text in SQS_CODES, r.text
        assert kind is not None and kind.text == "Sender", r.text


@given(data=st.data())
@FUZZ
def _sqs_query(served: Served, data: st.DataObject) -> None:
    action = data.draw(st.sampled_from(sorted(SQS_BASES)))

    def encode(doc: dict[str, Any]) -> bytes:
        return urlencode([("Action", action), *_flatten(_quick(action, doc))]).encode()

    _, raw = data.draw(body_of(encode, {action: SQS_BASES[action]}))
    before = snapshot(served.t)
    r = served.http.post(f"/{ACCOUNT}/fz", content=raw,
                         headers={"Content-Type": "application/x-www-form-urlencoded"})
    _check_sqs_query(r)
    served.check_nothing_half_stored(before, r.status_code, f"{action} {raw[:300]!r}")


@LONG
def test_sqs_query_protocol_under_fuzzing(served: Served) -> None:
    _sqs_query(served)


# --- Scheduler and SES v2 (REST-JSON) -----------------------------------------------------

SCHEDULE = {"ScheduleExpression": "rate(1 hour)", "FlexibleTimeWindow": {"Mode": "OFF"},
            "State": "ENABLED", "Description": "fuzzed",
            "Target": {"Arn": f"{ARN}:fz", "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/r",
                       "Input": '{"a": 1}',
                       "RetryPolicy": {"MaximumRetryAttempts": 3,
                                       "MaximumEventAgeInSeconds": 600},
                       "DeadLetterConfig": {"Arn": f"{ARN}:fz-dlq"}}}
SCHEDULER_CALLS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "CreateSchedule": ("POST", "/schedules/fz-new", SCHEDULE),
    "UpdateSchedule": ("PUT", "/schedules/fz-sched", SCHEDULE),
    "CreateScheduleGroup": ("POST", "/schedule-groups/fz-new-group",
                            {"Tags": [{"Key": "k", "Value": "v"}], "ClientToken": "t"}),
    "TagResource": ("POST", f"/tags/arn:aws:scheduler:us-east-1:{ACCOUNT}:schedule-group/"
                    "fz-group", {"Tags": [{"Key": "k", "Value": "v"}]}),
}
SES_CALLS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "CreateEmailTemplate": ("POST", "/v2/email/templates", {
        "TemplateName": "fz-new", "TemplateContent": {
            "Subject": "Hi {{name}}", "Text": "Hello {{name}}", "Html": "<p>{{name}}</p>"}}),
    "UpdateEmailTemplate": ("PUT", "/v2/email/templates/fz-template", {
        "TemplateContent": {"Subject": "Hey", "Text": "Hey {{name}}"}}),
    "TestRenderEmailTemplate": ("POST", "/v2/email/templates/fz-template/render",
                                {"TemplateData": '{"name": "Ada"}'}),
    "PutSuppressedDestination": ("PUT", "/v2/email/suppression/addresses",
                                 {"EmailAddress": "a@example.com", "Reason": "BOUNCE"}),
}


def _rest_json(served: Served, data: st.DataObject,
               calls: dict[str, tuple[str, str, dict[str, Any]]], codes: set[str]) -> None:
    name = data.draw(st.sampled_from(sorted(calls)))
    method, path, base = calls[name]
    _, raw = data.draw(body_of(lambda doc: json.dumps(doc).encode(), {name: base}))
    before = snapshot(served.t)
    r = served.http.request(method, path, content=raw,
                            headers={"Content-Type": "application/json"})
    assert r.status_code < 500, (name, r.text)
    if r.status_code >= 400:
        assert r.headers.get("x-amzn-ErrorType") in codes, (name, r.headers, r.text)
        doc = r.json()
        assert isinstance(doc.get("Message", doc.get("message")), str), doc
    served.check_nothing_half_stored(before, r.status_code, f"{name} {raw[:300]!r}")


@given(data=st.data())
@FUZZ
def _scheduler(served: Served, data: st.DataObject) -> None:
    _rest_json(served, data, SCHEDULER_CALLS, SCHEDULER_CODES)


@given(data=st.data())
@FUZZ
def _ses(served: Served, data: st.DataObject) -> None:
    _rest_json(served, data, SES_CALLS, SES_CODES)


@LONG
def test_scheduler_api_under_fuzzing(served: Served) -> None:
    _scheduler(served)


@LONG
def test_ses_v2_api_under_fuzzing(served: Served) -> None:
    _ses(served)


def test_the_fuzzer_breaks_requests(served: Served) -> None:
    """The checks can fail: a refused request is seen, in AWS's shape, with nothing stored."""
    before = snapshot(served.t)
    r = served.http.post("/", content=b'{"QueueUrl": "' + Q.encode() + b'", "MessageBo',
                         headers={"X-Amz-Target": "AmazonSQS.SendMessage",
                                  "Content-Type": "application/x-amz-json-1.0"})
    assert r.status_code == 400
    _check_sqs_json(r)
    served.check_nothing_half_stored(before, r.status_code, "truncated SendMessage")
    with pytest.raises(AssertionError):
        _check_sqs_json(httpx.Response(500, text="boom"))


@pytest.mark.parametrize("entry_id", [5, 1.5e300, None, ["a"], "a\n"])
def test_a_batch_entry_id_that_is_not_a_valid_string_is_refused(served: Served,
                                                                 entry_id: Any) -> None:
    """Found by the fuzzer: a number as a batch entry's Id was a 500."""
    before = snapshot(served.t)
    doc = {"QueueUrl": Q, "Entries": [{"Id": entry_id, "MessageBody": "x"}]}
    r = served.http.post("/", content=json.dumps(doc).encode(), headers={
        "X-Amz-Target": "AmazonSQS.SendMessageBatch",
        "Content-Type": "application/x-amz-json-1.0"})
    assert r.status_code == 400, r.text
    _check_sqs_json(r)
    served.check_nothing_half_stored(before, r.status_code, "SendMessageBatch")


def test_query_errors_quoting_control_characters_are_still_xml(served: Served) -> None:
    """Found by the fuzzer: an error message quoting an attribute name with a control
    character was not well-formed XML (XML 1.0 cannot carry U+0000-U+001F at all)."""
    raw = urlencode([("Action", "SetQueueAttributes"), ("Attribute.1.Name", "bad\x00\x1cname"),
                     ("Attribute.1.Value", "1")]).encode()
    r = served.http.post(f"/{ACCOUNT}/fz", content=raw,
                         headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status_code == 400
    _check_sqs_query(r)
    assert "bad\ufffd\ufffdname" in r.text


def test_a_nul_character_in_a_template_is_refused_on_every_backend(served: Served) -> None:
    """Found by the fuzzer: a template part with U+0000 was a 500 on PostgreSQL (its text
    cannot hold it) and stored on SQLite; now a 400 naming the part on both."""
    before = snapshot(served.t)
    doc = {"TemplateName": "nul", "TemplateContent": {"Subject": "s", "Text": "a\x00b"}}
    r = served.http.post("/v2/email/templates", content=json.dumps(doc).encode(),
                         headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    assert r.headers["x-amzn-ErrorType"] == "BadRequestException"
    assert "TemplateContent.Text" in r.json()["message"]
    served.check_nothing_half_stored(before, r.status_code, "CreateEmailTemplate")
