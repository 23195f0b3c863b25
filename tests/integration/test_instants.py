"""Instants to the millisecond through every face of tidings: Python, the native HTTP API
and the CLI take an aware datetime (or `at(…T…:03.250)`), keep it exactly, and refuse a
naive one naming the field; the AWS API keeps AWS's whole seconds."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import boto3
import botocore.exceptions
import httpx
import pytest
from cli_runner import Cli
from serving import running_server

from tidings.client import Tidings
from tidings.clock import FrozenClock, to_ms
from tidings.errors import ValidationError
from tidings.model.schedules import ScheduleSpec, Target, TargetKind
from tidings.server.app import create_app

NOW = datetime(2027, 1, 15, 8, 0, tzinfo=UTC)
PARIS = timezone(timedelta(hours=1))
DUE = datetime(2027, 1, 15, 12, 0, 3, 250_000, tzinfo=PARIS)  # 11:00:03.250Z
DUE_MS = to_ms(DUE)


@pytest.fixture
def t(db_url: str) -> Iterator[Tidings]:
    client = Tidings(db_url, clock=FrozenClock(to_ms(NOW)))
    client.queues.create_queue("jobs")
    yield client
    client.close()


def test_python(t: Tidings) -> None:
    made = t.schedules.create(ScheduleSpec.once("reminder", DUE, Target(TargetKind.QUEUE,
                                                                          "jobs")))
    assert made.spec.expression == "at(2027-01-15T11:00:03.250)"
    assert t.schedules.get("reminder").next_fire_at == DUE_MS
    t.queues.send("jobs", "x", deliver_at=DUE)
    [view], _ = t.queues.peek("jobs")
    assert view.message.visible_at == DUE_MS and view.state.value == "delayed"
    with pytest.raises(ValidationError) as naive:
        ScheduleSpec.once("n", DUE.replace(tzinfo=None), Target(TargetKind.QUEUE, "jobs"))
    assert naive.value.field == "at"
    with pytest.raises(ValidationError) as naive:
        t.queues.send("jobs", "x", deliver_at=DUE.replace(tzinfo=None))
    assert naive.value.field == "deliver_at"


def test_native_http(t: Tidings) -> None:
    with running_server(create_app(t)) as url, httpx.Client(base_url=url) as api:
        r = api.post("/v1/schedules", json={
            "name": "reminder", "at": "2027-01-15T12:00:03.250+01:00",
            "target": {"kind": "queue", "destination": "jobs"}})
        assert r.status_code == 201, r.text
        assert t.schedules.get("reminder").next_fire_at == DUE_MS
        r = api.post("/v1/schedules", json={
            "name": "naive", "at": "2027-01-15T12:00:03.250",
            "target": {"kind": "queue", "destination": "jobs"}})
        assert r.status_code == 400 and r.json()["error"]["field"] == "at", r.text
        r = api.post("/v1/queues/jobs/messages",
                     json={"body": "x", "deliver_at": "2027-01-15T11:00:03.250Z"})
        assert r.status_code == 201, r.text
        [peeked] = api.get("/v1/queues/jobs/peek").json()["messages"]
        assert peeked["visible_at"] == "2027-01-15T11:00:03.250Z"
        r = api.post("/v1/queues/jobs/messages",
                     json={"body": "x", "deliver_at": "2027-01-15T11:00:03.250"})
        assert r.status_code == 400 and r.json()["error"]["field"] == "deliver_at", r.text


def test_cli(db_url: str, tmp_path: Path) -> None:
    cli = Cli(db_url, tmp_path)
    cli.ok("queue", "create", "jobs")
    cli.ok("schedule", "create", "reminder", "-e", "at(2099-01-15T11:00:03.250)",
           "--queue", "jobs")
    doc = cli.json("schedule", "get", "reminder")
    assert doc["expression"] == "at(2099-01-15T11:00:03.250)"
    assert doc["next_fire_at"].startswith("2099-01-15T11:00:03.250")
    soon = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=125_000)
    text = soon.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    cli.ok("queue", "send", "jobs", "x", "--deliver-at", text)
    [peeked] = cli.json("queue", "peek", "jobs")["messages"]
    assert peeked["visible_at"] == text and peeked["state"] == "delayed"
    too_far = (soon + timedelta(days=30)).isoformat()  # beyond the 4-day retention
    refused = cli.run("queue", "send", "jobs", "x", "--deliver-at", too_far)
    assert refused.returncode == 2 and "deliver_at" in refused.stderr
    naive = cli.run("queue", "send", "jobs", "x", "--deliver-at", "2027-01-01T00:00:00.125")
    assert naive.returncode == 2 and "--deliver-at" in naive.stderr


def test_aws_scheduler_keeps_whole_seconds(t: Tidings) -> None:
    with running_server(create_app(t)) as url:
        client = boto3.client("scheduler", endpoint_url=url, region_name="us-east-1",
                              aws_access_key_id="x", aws_secret_access_key="x")
        target = {"Arn": "arn:aws:sqs:us-east-1:000000000000:jobs",
                  "RoleArn": "arn:aws:iam::000000000000:role/x"}
        with pytest.raises(botocore.exceptions.ClientError) as refused:
            client.create_schedule(Name="frac", ScheduleExpression="at(2027-01-15T11:00:03.250)",
                                   FlexibleTimeWindow={"Mode": "OFF"}, Target=target)
        assert refused.value.response["Error"]["Code"] == "ValidationException"
        client.create_schedule(Name="whole", ScheduleExpression="at(2027-01-15T11:00:03)",
                               FlexibleTimeWindow={"Mode": "OFF"}, Target=target)
