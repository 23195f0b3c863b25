"""The native schedules API, over a real uvicorn server and a real SQLite file.

The clock is frozen at 2027-01-15T08:00:00Z (a Friday), so next occurrences are exact.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from serving import running_server  # no __init__.py: pytest puts this folder on sys.path

from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.server.app import create_app

NOW_MS = 1_800_000_000_000  # 2027-01-15T08:00:00Z
ARN = "arn:aws:scheduler:us-east-1:000000000000"


@pytest.fixture
def api(db_url: str) -> Iterator[httpx.Client]:
    t = Tidings(db_url, clock=FrozenClock(NOW_MS))
    t.queues.create_queue("jobs")
    try:
        with running_server(create_app(t)) as url, httpx.Client(base_url=url,
                                                                 timeout=60) as client:
            yield client
    finally:
        t.close()


def body(name: str, expression: str = "cron(0 9 * * ? *)", **fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"name": name, "expression": expression,
                           "target": {"kind": "queue", "destination": "jobs"}}
    doc.update(fields)
    return doc


def create(api: httpx.Client, doc: dict[str, Any]) -> dict[str, Any]:
    r = api.post("/v1/schedules", json=doc)
    assert r.status_code == 201, r.text
    out: dict[str, Any] = r.json()
    return out


def error(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    err: dict[str, Any] = r.json()["error"]
    return err


def test_schedule_crud(api: httpx.Client) -> None:
    created = create(api, body(
        "daily", timezone="Europe/Paris", description="morning report", client_token="tok-1",
        target={"kind": "queue", "destination": "jobs", "input": {"report": "daily"},
                "retry_policy": {"maximum_retry_attempts": 3}}))
    assert created["arn"] == f"{ARN}:schedule/default/daily"
    assert created["group"] == "default" and created["state"] == "ENABLED"
    # 09:00 in Paris in January is 08:00Z: exactly now, which counts as the first occurrence
    assert created["next_fire_at"] == "2027-01-15T08:00:00.000Z"
    assert created["due_at"] == created["next_fire_at"]
    assert created["last_fired_at"] is None
    assert created["created_at"] == "2027-01-15T08:00:00.000Z"
    assert created["target"]["input"] == '{"report":"daily"}'
    assert created["target"]["retry_policy"] == {"maximum_retry_attempts": 3,
                                                 "maximum_event_age_s": 86400}
    assert api.get("/v1/schedules/default/daily").json() == created

    # the same request retried (same client token) returns the schedule; any other is a 409
    assert create(api, body("daily", client_token="tok-1")) == created
    err = error(api.post("/v1/schedules", json=body("daily")), 409)
    assert err["code"] == "ConflictException"
    error(api.post("/v1/schedules", json=body("daily", client_token="tok-2")), 409)

    # PUT replaces everything: omitted fields go back to their defaults
    r = api.put("/v1/schedules/default/daily", json={
        "expression": "rate(2 hours)", "target": {"kind": "queue", "destination": "jobs"}})
    assert r.status_code == 200, r.text
    replaced = r.json()
    assert replaced["expression"] == "rate(2 hours)"
    assert replaced["timezone"] == "UTC"
    assert replaced["description"] is None
    assert replaced["target"]["input"] is None
    assert replaced["target"]["retry_policy"]["maximum_retry_attempts"] == 185
    assert replaced["created_at"] == created["created_at"]

    assert api.delete("/v1/schedules/default/daily").status_code == 204
    err = error(api.get("/v1/schedules/default/daily"), 404)
    assert err["code"] == "ScheduleNotFound"
    error(api.delete("/v1/schedules/default/daily"), 404)
    error(api.put("/v1/schedules/default/daily", json={
        "expression": "rate(1 hour)", "target": {"kind": "queue", "destination": "jobs"}}), 404)


def test_list_pages_and_filters(api: httpx.Client) -> None:
    for name in ("a-1", "a-2", "a-3", "b-1"):
        create(api, body(name, state="DISABLED" if name == "a-2" else "ENABLED"))
    page = api.get("/v1/schedules", params={"limit": 2}).json()
    assert [s["name"] for s in page["schedules"]] == ["a-1", "a-2"]
    assert page["next_token"]
    rest = api.get("/v1/schedules", params={"limit": 2, "next_token": page["next_token"]}).json()
    assert [s["name"] for s in rest["schedules"]] == ["a-3", "b-1"]
    assert rest["next_token"] is None

    by_prefix = api.get("/v1/schedules", params={"prefix": "a-"}).json()
    assert [s["name"] for s in by_prefix["schedules"]] == ["a-1", "a-2", "a-3"]
    disabled = api.get("/v1/schedules", params={"state": "DISABLED"}).json()
    assert [s["name"] for s in disabled["schedules"]] == ["a-2"]
    assert api.get("/v1/schedules", params={"group": "nope"}).json()["schedules"] == []
    assert error(api.get("/v1/schedules", params={"state": "PAUSED"}), 400)["field"] == "state"
    assert error(api.get("/v1/schedules", params={"next_token": "garbage"}),
                 400)["field"] == "NextToken"


def test_a_batch_breaking_the_documents_rules_is_refused_whole(api: httpx.Client) -> None:
    r = api.post("/v1/schedules:batch", json={"schedules": [
        body("good-1"),
        body("bad-zone", timezone="Mars/Olympus_Mons"),
        body("bad-expr", expression="cron(0 9 * * * *)"),
        body("naive", start="2030-01-01T00:00:00"),
    ]})
    err = error(r, 400)
    assert err["field"] == "schedules.1.timezone" and "IANA" in err["message"]
    assert [d["field"] for d in err["details"]] == [
        "schedules.1.timezone", "schedules.2.expression", "schedules.3.start"]
    assert "? in exactly one of the two day fields" in err["details"][1]["rule"]
    assert api.get("/v1/schedules").json()["schedules"] == []  # nothing was created


def test_batch_reports_each_item_and_creates_the_good_ones(api: httpx.Client) -> None:
    create(api, body("exists"))
    r = api.post("/v1/schedules:batch", json={"schedules": [
        body("good-1"),
        body("no-queue", target={"kind": "queue", "destination": "missing"}),
        body("backwards", expression="cron(0 9-5 * * ? *)"),
        body("exists"),
        body("good-2", expression="at(2027-02-01T10:00:00)", timezone="Asia/Tokyo"),
    ]})
    assert r.status_code == 200, r.text
    out = r.json()
    results = out["results"]
    assert [x["index"] for x in results] == list(range(5))
    assert [x["name"] for x in results] == ["good-1", "no-queue", "backwards", "exists",
                                            "good-2"]
    assert [x["created"] for x in results] == [True, False, False, False, True]
    fields = [x["error"] and x["error"]["field"] for x in results]
    assert fields == [None, "Target.Arn", "ScheduleExpression", None, None]
    assert all(x["error"]["code"] == "InvalidParameterValue" for x in results if x["error"])
    assert (out["created"], out["failed"]) == (2, 2)

    names = [s["name"] for s in api.get("/v1/schedules").json()["schedules"]]
    assert names == ["exists", "good-1", "good-2"]
    # at() is read in its zone: 10:00 in Tokyo is 01:00Z
    assert api.get("/v1/schedules/default/good-2").json()["next_fire_at"] \
        == "2027-02-01T01:00:00.000Z"

    assert error(api.post("/v1/schedules:batch", json={"schedules": []}),
                 400)["field"] == "schedules"
    too_many = [body(f"m-{i}") for i in range(10_001)]
    err = error(api.post("/v1/schedules:batch", json={"schedules": too_many}), 400)
    assert err["field"] == "schedules" and "10000" in err["message"]


def test_enable_and_disable(api: httpx.Client) -> None:
    create(api, body("toggle"))
    r = api.post("/v1/schedules/default/toggle:disable")
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "DISABLED" and r.json()["due_at"] is None
    enabled = api.post("/v1/schedules/default/toggle:enable").json()
    assert enabled["state"] == "ENABLED"
    # 09:00Z daily, counted from now (08:00Z)
    assert enabled["due_at"] == "2027-01-15T09:00:00.000Z"
    assert error(api.post("/v1/schedules/default/ghost:enable"), 404)["code"] \
        == "ScheduleNotFound"


def test_groups(api: httpx.Client) -> None:
    r = api.post("/v1/schedule-groups", json={"name": "team-a", "tags": {"owner": "ops"}})
    assert r.status_code == 201, r.text
    assert r.json()["arn"] == f"{ARN}:schedule-group/team-a"
    assert r.json()["tags"] == {"owner": "ops"}
    assert error(api.post("/v1/schedule-groups", json={"name": "team-a"}), 409)["code"] \
        == "ConflictException"
    api.post("/v1/schedule-groups", json={"name": "team-b"})
    assert api.get("/v1/schedule-groups/team-a").json()["name"] == "team-a"

    listed = api.get("/v1/schedule-groups", params={"prefix": "team"}).json()
    assert [g["name"] for g in listed["groups"]] == ["team-a", "team-b"]
    page = api.get("/v1/schedule-groups", params={"limit": 1}).json()
    assert [g["name"] for g in page["groups"]] == ["default"] and page["next_token"]

    create(api, body("one", group="team-a"))
    create(api, body("two", group="team-a"))
    create(api, body("one"))  # the same name in another group is another schedule
    assert api.get("/v1/schedules/team-a/one").json()["arn"] == f"{ARN}:schedule/team-a/one"

    r = api.delete("/v1/schedule-groups/team-a")
    assert r.status_code == 200, r.text
    assert r.json() == {"name": "team-a", "deleted_schedules": 2}
    error(api.get("/v1/schedules/team-a/one"), 404)
    assert api.get("/v1/schedules/default/one").status_code == 200
    assert error(api.get("/v1/schedule-groups/team-a"), 404)["code"] == "GroupNotFound"
    assert error(api.post("/v1/schedules", json=body("x", group="team-a")), 404)["code"] \
        == "GroupNotFound"
    assert error(api.delete("/v1/schedule-groups/default"), 400)["field"] == "name"


def test_validation_errors_name_the_field(api: httpx.Client) -> None:
    err = error(api.post("/v1/schedules", json=body("n", start="2030-01-01T00:00:00")), 400)
    assert err["field"] == "start" and "offset" in err["message"]
    err = error(api.post("/v1/schedules", json=body("n", end="soon")), 400)
    assert err["field"] == "end"
    err = error(api.post("/v1/schedules", json=body("n", flexible_window_minutes=2000)), 400)
    assert err["field"] == "flexible_window_minutes"
    assert "1440" in err["message"]
    err = error(api.post("/v1/schedules", json=body("bad name!")), 400)
    assert err["field"] == "name"
    err = error(api.post("/v1/schedules", json=body(
        "n", target={"kind": "webhook", "destination": "ftp://x"})), 400)
    assert err["field"] == "target.destination" and "https://" in err["message"]
    err = error(api.post("/v1/schedules", json=body(
        "n", target={"kind": "pigeon", "destination": "x"})), 400)
    assert err["field"] == "target.kind"
    err = error(api.post("/v1/schedules", json=body(
        "n", start="2030-01-02T00:00:00Z", end="2030-01-01T00:00:00Z")), 400)
    assert err["field"] == "EndDate"
    # an aware start with an offset is accepted and shown back in UTC
    ok = create(api, body("n", start="2030-01-01T09:00:00+01:00"))
    assert ok["start"] == "2030-01-01T08:00:00.000Z"
    assert ok["next_fire_at"] == "2030-01-01T09:00:00.000Z"


def test_webhook_secret_is_never_shown(api: httpx.Client) -> None:
    created = create(api, body("hook", target={
        "kind": "webhook", "destination": "https://example.test/hook",
        "options": {"secret": "s3cret", "timeout_s": 5, "headers": {"x-a": "1"}}}))
    assert created["target"]["options"] == {"secret_set": True, "timeout_s": 5,
                                            "headers": {"x-a": "1"}}
    assert "s3cret" not in api.get("/v1/schedules").text


def test_function_target_with_a_then_target(api: httpx.Client) -> None:
    created = create(api, body("fn", target={
        "kind": "function", "destination": "enrich",
        "options": {"then": {"kind": "queue", "destination": "jobs"}}}))
    assert created["target"]["options"] == {"then": {"kind": "queue", "destination": "jobs"}}
    err = error(api.post("/v1/schedules", json=body("fn2", target={
        "kind": "function", "destination": "enrich",
        "options": {"then": {"kind": "webhook", "destination": "not-a-url"}}})), 400)
    assert err["field"] == "target.options.then.destination"


def test_next_occurrences(api: httpx.Client) -> None:
    r = api.get("/v1/expressions/next", params={
        "expression": "cron(0 9 ? * MON-FRI *)", "timezone": "America/New_York", "n": 3,
        "after": "2027-01-15T12:00:00Z"})
    assert r.status_code == 200, r.text
    assert r.json()["occurrences"] == [
        {"utc": "2027-01-15T14:00:00.000Z", "local": "2027-01-15T09:00:00-05:00"},
        {"utc": "2027-01-18T14:00:00.000Z", "local": "2027-01-18T09:00:00-05:00"},
        {"utc": "2027-01-19T14:00:00.000Z", "local": "2027-01-19T09:00:00-05:00"},
    ]
    # without `after`: from the server's clock
    default = api.get("/v1/expressions/next", params={"expression": "rate(1 day)", "n": 1})
    assert default.json()["occurrences"] == [{"utc": "2027-01-16T08:00:00.000Z",
                                              "local": "2027-01-16T08:00:00+00:00"}]
    assert error(api.get("/v1/expressions/next", params={"expression": "cron(nope)"}),
                 400)["field"] == "expression"
    assert error(api.get("/v1/expressions/next", params={
        "expression": "rate(1 day)", "after": "2027-01-15T12:00:00"}), 400)["field"] == "after"
    assert error(api.get("/v1/expressions/next", params={
        "expression": "rate(1 day)", "n": 0}), 400)["field"] == "n"


def test_metrics_are_prometheus_text(api: httpx.Client) -> None:
    r = api.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    # prometheus-client names a counter's sample (and, from 0.20, its TYPE) with _total
    assert re.search(r"^# TYPE tidings_schedule_firings(_total)? counter$", r.text, re.M)
    assert re.search(r"^# TYPE tidings_firing_lateness_seconds histogram$", r.text, re.M)


def test_openapi_documents_the_schedule_paths(api: httpx.Client) -> None:
    paths = api.get("/openapi.json").json()["paths"]
    for path in ("/v1/schedules", "/v1/schedules:batch", "/v1/schedules/{group}/{name}",
                 "/v1/schedules/{group}/{name}:enable", "/v1/schedule-groups",
                 "/v1/schedule-groups/{name}", "/v1/expressions/next", "/metrics"):
        assert path in paths, path
