"""The native HTTP API, over a real uvicorn server and a real SQLite file."""

from __future__ import annotations

import importlib.metadata
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from parked import ParkedNotifier
from serving import running_server  # no __init__.py: pytest puts this folder on sys.path

from tidings.client import Tidings, default_notifier
from tidings.errors import (
    BatchError,
    ConflictError,
    PurgeInProgress,
    QueueNotFound,
    ReceiptHandleInvalid,
    StoreUnavailable,
    TidingsError,
    ValidationError,
)
from tidings.notify.base import queue_channel
from tidings.server.app import create_app
from tidings.server.errors import error_info


@pytest.fixture
def api(db_url: str) -> Iterator[httpx.Client]:
    t = Tidings(db_url)
    try:
        with running_server(create_app(t)) as url, httpx.Client(base_url=url,
                                                                 timeout=30) as client:
            yield client
    finally:
        t.close()


def make_queue(api: httpx.Client, name: str, **attributes: object) -> dict[str, object]:
    r = api.post("/v1/queues", json={"name": name, "attributes": attributes})
    assert r.status_code == 201, r.text
    doc: dict[str, object] = r.json()
    return doc


def test_health_names_the_backend_and_the_release(api: httpx.Client, db_url: str) -> None:
    backend = "sqlite" if db_url.startswith("sqlite") else "postgresql"
    assert api.get("/health").json() == {"status": "ok", "db": backend,
                                         "version": importlib.metadata.version("tidings")}


def test_metrics_show_the_release_as_build_info(api: httpx.Client) -> None:
    version = importlib.metadata.version("tidings")
    assert f'tidings_build_info{{version="{version}"}} 1.0' in api.get("/metrics").text


def test_readiness_of_an_app_without_engine_loops_is_its_database(
        api: httpx.Client, db_url: str) -> None:
    # (a node's own loops, the dispatcher and what fails: test_dispatch_process.py,
    # test_disk_full.py, test_pg_faults.py)
    backend = "sqlite" if db_url.startswith("sqlite") else "postgresql"
    r = api.get("/health/ready")
    assert r.status_code == 200
    assert r.json() == {"status": "ready", "db": backend, "checks": {
        "database": {"ok": True, "reason": None, "since": None}}}
    doc = api.get("/openapi.json").json()["paths"]["/health/ready"]["get"]
    assert {"200", "503"} <= set(doc["responses"])


def test_queue_crud(api: httpx.Client) -> None:
    created = make_queue(api, "orders", visibility_timeout_s=45)
    assert created["name"] == "orders"
    assert created["attributes"]["visibility_timeout_s"] == 45  # type: ignore[index]
    assert str(created["created_at"]).endswith("Z")
    # same attributes again: the same queue, as SQS
    assert make_queue(api, "orders", visibility_timeout_s=45)["name"] == "orders"
    conflict = api.post("/v1/queues", json={"name": "orders",
                                            "attributes": {"visibility_timeout_s": 5}})
    assert conflict.status_code == 409
    make_queue(api, "other")

    listed = api.get("/v1/queues", params={"prefix": "ord"}).json()
    assert [q["name"] for q in listed["queues"]] == ["orders"]
    page = api.get("/v1/queues", params={"limit": 1}).json()
    assert len(page["queues"]) == 1 and page["next_token"]
    rest = api.get("/v1/queues", params={"limit": 1, "next_token": page["next_token"]}).json()
    assert [q["name"] for q in rest["queues"]] == ["other"]

    patched = api.patch("/v1/queues/orders", json={"delay_s": 3})
    assert patched.status_code == 200
    assert patched.json()["attributes"]["delay_s"] == 3
    assert patched.json()["attributes"]["visibility_timeout_s"] == 45

    assert api.post("/v1/queues/orders/tags", json={"tags": {"team": "a", "env": "x"}}
                    ).status_code == 204
    assert api.delete("/v1/queues/orders/tags", params={"keys": ["env"]}).status_code == 204
    assert api.get("/v1/queues/orders").json()["tags"] == {"team": "a"}

    assert api.delete("/v1/queues/orders").status_code == 204
    assert api.get("/v1/queues/orders").status_code == 404


def test_missing_queue_is_404(api: httpx.Client) -> None:
    for r in (api.get("/v1/queues/nope"),
              api.post("/v1/queues/nope/messages", json={"body": "x"}),
              api.get("/v1/queues/nope/messages")):
        assert r.status_code == 404
        assert r.json()["error"]["code"] == "QueueNotFound"


def test_send_receive_delete_and_counters(api: httpx.Client) -> None:
    make_queue(api, "jobs")
    sent = api.post("/v1/queues/jobs/messages", json={
        "body": {"order": 7},
        "attributes": {"kind": {"data_type": "String", "string_value": "new"},
                       "blob": {"data_type": "Binary", "binary_value": "AAEC"}}})
    assert sent.status_code == 201, sent.text
    assert len(sent.json()["md5_of_body"]) == 32 and sent.json()["md5_of_attributes"]
    api.post("/v1/queues/jobs/messages", json={"body": "later", "delay_seconds": 3600})
    counts = api.get("/v1/queues/jobs").json()["counts"]
    assert counts == {"visible": 1, "in_flight": 0, "delayed": 1}

    got = api.get("/v1/queues/jobs/messages", params={"max": 10}).json()["messages"]
    assert len(got) == 1
    msg = got[0]
    assert msg["body"] == '{"order":7}'  # a JSON value is sent as its JSON text
    assert msg["message_id"] == sent.json()["message_id"]
    assert msg["attributes"]["kind"]["string_value"] == "new"
    assert msg["attributes"]["blob"]["binary_value"] == "AAEC"
    assert msg["system_attributes"]["ApproximateReceiveCount"] == "1"
    assert msg["receive_count"] == 1
    assert api.get("/v1/queues/jobs").json()["counts"]["in_flight"] == 1

    assert api.delete(f"/v1/queues/jobs/messages/{msg['receipt_handle']}").status_code == 204
    assert api.get("/v1/queues/jobs").json()["counts"] == {
        "visible": 0, "in_flight": 0, "delayed": 1}


def test_visibility_change_releases_a_message(api: httpx.Client) -> None:
    make_queue(api, "vis")
    api.post("/v1/queues/vis/messages", json={"body": "x"})
    handle = api.get("/v1/queues/vis/messages").json()["messages"][0]["receipt_handle"]
    r = api.post("/v1/queues/vis/messages:visibility",
                 json={"receipt_handle": handle, "visibility_timeout": 0})
    assert r.status_code == 204
    again = api.get("/v1/queues/vis/messages").json()["messages"]
    assert again[0]["receive_count"] == 2
    batch = api.post("/v1/queues/vis/messages:visibility-batch", json={"entries": [
        {"id": "new", "receipt_handle": again[0]["receipt_handle"], "visibility_timeout": 60},
        {"id": "old", "receipt_handle": handle, "visibility_timeout": 60}]}).json()
    assert [e["id"] for e in batch["successful"]] == ["new"]
    assert [(e["id"], e["code"]) for e in batch["failed"]] == [("old", "MessageNotInflight")]


def test_batches_report_each_entry(api: httpx.Client) -> None:
    make_queue(api, "batch")
    r = api.post("/v1/queues/batch/messages:batch", json={"entries": [
        {"id": "a", "body": "one"},
        {"id": "b", "body": "two", "delay_seconds": -1},
        {"id": "c", "body": "three"}]})
    assert r.status_code == 200
    doc = r.json()
    assert sorted(e["id"] for e in doc["successful"]) == ["a", "c"]
    [failed] = doc["failed"]
    assert failed["id"] == "b" and failed["code"] == "InvalidParameterValue"
    assert "DelaySeconds" in failed["message"] and failed["sender_fault"] is True

    dup = api.post("/v1/queues/batch/messages:batch", json={"entries": [
        {"id": "a", "body": "x"}, {"id": "a", "body": "y"}]})
    assert dup.status_code == 400 and dup.json()["error"]["field"] == "Entries.Id"

    got = api.get("/v1/queues/batch/messages", params={"max": 10}).json()["messages"]
    assert sorted(m["body"] for m in got) == ["one", "three"]
    deleted = api.post("/v1/queues/batch/messages:delete", json={"entries": [
        {"id": "x", "receipt_handle": got[0]["receipt_handle"]},
        {"id": "y", "receipt_handle": "not-a-handle"}]}).json()
    assert [e["id"] for e in deleted["successful"]] == ["x"]
    assert [(e["id"], e["code"]) for e in deleted["failed"]] == [("y", "ReceiptHandleIsInvalid")]


def test_long_poll_returns_as_soon_as_a_message_arrives(db_url: str) -> None:
    """A send wakes a parked long poll through its notification. The fallback poll is set
    far beyond the assertion, so the test fails if the notification does not arrive."""
    notifier = ParkedNotifier(default_notifier(db_url))
    with Tidings(db_url, notifier=notifier, fallback_poll_s=30) as t, \
            running_server(create_app(t)) as url, \
            httpx.Client(base_url=url, timeout=30) as api:
        make_queue(api, "poll")
        channel = queue_channel(t.queues.get_queue("poll").id)
        result: dict[str, object] = {}

        def receive() -> None:
            r = api.get("/v1/queues/poll/messages", params={"wait": 10})
            result["returned_at"] = time.monotonic()
            result["messages"] = r.json()["messages"]

        waiter = threading.Thread(target=receive)
        waiter.start()
        assert notifier.parked(channel).wait(10), "the receive never started waiting"
        sent_at = time.monotonic()
        assert api.post("/v1/queues/poll/messages", json={"body": "wake up"}).status_code == 201
        waiter.join(15)
    assert [m["body"] for m in result["messages"]] == ["wake up"]  # type: ignore[attr-defined]
    # Without the wake-up it would return empty when its 10 s wait ends (the fallback poll
    # is 30 s); the bound is loose so a loaded machine does not decide the test.
    assert result["returned_at"] - sent_at < 5  # type: ignore[operator]


def test_long_poll_waits_when_nothing_arrives(api: httpx.Client) -> None:
    make_queue(api, "quiet")
    started = time.monotonic()
    r = api.get("/v1/queues/quiet/messages", params={"wait": 1})
    assert r.json() == {"messages": []}
    assert time.monotonic() - started >= 0.9


def test_validation_errors_name_the_field_and_rule(api: httpx.Client) -> None:
    r = api.post("/v1/queues", json={"name": "v", "attributes": {"visibility_timeout_s": 50000}})
    assert r.status_code == 400
    err = r.json()["error"]
    # the field as the client named it, and the rule the document states for it
    assert err["code"] == "InvalidParameterValue"
    assert err["field"] == "attributes.visibility_timeout_s"
    assert "less than or equal to 43200" in err["message"]

    make_queue(api, "v")
    r = api.get("/v1/queues/v/messages", params={"visibility_timeout": 50000})
    assert r.status_code == 400 and r.json()["error"]["field"] == "visibility_timeout"
    r = api.get("/v1/queues/v/messages", params={"max": 11})
    assert r.status_code == 400 and "less than or equal to 10" in r.json()["error"]["message"]
    # shape errors, caught before the engine, have the same body and status
    r = api.get("/v1/queues/v/messages", params={"max": "many"})
    assert r.status_code == 400 and r.json()["error"]["field"] == "max"
    r = api.post("/v1/queues", json={"name": "w", "attributes": {"colour": "red"}})
    assert r.status_code == 400 and r.json()["error"]["field"] == "attributes.colour"
    r = api.post("/v1/queues/v/messages", json={})
    assert r.status_code == 400 and r.json()["error"]["field"] == "body"
    r = api.post("/v1/queues", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["field"] == "body"


def test_tampered_receipt_handle_is_rejected(api: httpx.Client) -> None:
    make_queue(api, "t")
    api.post("/v1/queues/t/messages", json={"body": "x"})
    handle = api.get("/v1/queues/t/messages").json()["messages"][0]["receipt_handle"]
    flipped = handle[:-2] + ("AA" if handle[-2:] != "AA" else "BB")
    r = api.delete(f"/v1/queues/t/messages/{flipped}")
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "ReceiptHandleIsInvalid"
    assert api.get("/v1/queues/t").json()["counts"]["in_flight"] == 1  # nothing was deleted


def test_redrive_moves_dead_letters_back(api: httpx.Client) -> None:
    make_queue(api, "dlq")
    make_queue(api, "src", redrive_policy={"dead_letter_queue": "dlq", "max_receive_count": 1})
    assert api.get("/v1/queues/dlq/dead-letter-sources").json() == {"queues": ["src"]}
    api.post("/v1/queues/src/messages:batch", json={"entries": [
        {"id": "a", "body": "1"}, {"id": "b", "body": "2"}]})
    for m in api.get("/v1/queues/src/messages", params={"max": 10}).json()["messages"]:
        api.post("/v1/queues/src/messages:visibility",
                 json={"receipt_handle": m["receipt_handle"], "visibility_timeout": 0})
    # the next receive finds them past maxReceiveCount and dead-letters them instead
    assert api.get("/v1/queues/src/messages", params={"max": 10}).json()["messages"] == []
    assert api.get("/v1/queues/dlq").json()["counts"]["visible"] == 2

    r = api.post("/v1/queues/dlq/redrive", json={})
    assert r.status_code == 200 and r.json()["moved"] == 2
    assert api.get("/v1/queues/dlq").json()["counts"]["visible"] == 0
    back = api.get("/v1/queues/src/messages", params={"max": 10}).json()["messages"]
    assert sorted(m["body"] for m in back) == ["1", "2"]

    not_dlq = api.post("/v1/queues/src/redrive", json={})
    assert not_dlq.status_code == 400 and not_dlq.json()["error"]["field"] == "SourceArn"


def test_rate_limited_redrive_starts_a_move_task(api: httpx.Client) -> None:
    make_queue(api, "dlq2")
    make_queue(api, "src2", redrive_policy={"dead_letter_queue": "dlq2", "max_receive_count": 3})
    make_queue(api, "elsewhere")
    r = api.post("/v1/queues/dlq2/redrive", json={"destination": "elsewhere",
                                                  "max_per_second": 10})
    handle = r.json()["task_handle"]
    assert r.status_code == 200 and handle
    [task] = api.get("/v1/queues/dlq2/move-tasks").json()["tasks"]
    assert task["task_handle"] == handle and task["status"] == "RUNNING"
    assert task["source"] == "dlq2" and task["destination"] == "elsewhere"
    cancelled = api.post(f"/v1/move-tasks/{handle}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "CANCELLED"
    assert api.get("/v1/queues/dlq2/move-tasks").json()["tasks"][0]["status"] == "CANCELLED"
    assert api.post(f"/v1/move-tasks/{handle}/cancel").status_code == 400


def test_purge(api: httpx.Client) -> None:
    make_queue(api, "p")
    api.post("/v1/queues/p/messages", json={"body": "x"})
    assert api.post("/v1/queues/p/purge").json() == {"purged": 1}
    again = api.post("/v1/queues/p/purge")
    assert again.status_code == 403 and again.json()["error"]["code"] == "PurgeQueueInProgress"


def test_openapi_lists_the_paths(api: httpx.Client) -> None:
    doc = api.get("/openapi.json").json()
    paths = set(doc["paths"])
    assert {"/health", "/v1/queues", "/v1/queues/{name}", "/v1/queues/{name}/messages",
            "/v1/queues/{name}/messages:batch", "/v1/queues/{name}/messages/{receipt_handle}",
            "/v1/queues/{name}/redrive", "/v1/move-tasks/{handle}/cancel"} <= paths
    assert "400" in doc["paths"]["/v1/queues"]["post"]["responses"]
    assert api.get("/docs").status_code == 200


def test_error_info_is_the_wire_view_of_the_table() -> None:
    assert error_info(QueueNotFound("q")) == (404, "QueueDoesNotExist", "queue 'q' does not exist")
    assert error_info(ValidationError("DelaySeconds", "too long"))[:2] == (
        400, "InvalidParameterValue")
    assert error_info(BatchError("TooManyEntriesInBatchRequest", "at most 10"))[:2] == (
        400, "TooManyEntriesInBatchRequest")
    assert error_info(PurgeInProgress())[:2] == (403, "PurgeQueueInProgress")
    assert error_info(ReceiptHandleInvalid())[:2] == (400, "ReceiptHandleIsInvalid")
    assert error_info(ConflictError())[:2] == (409, "QueueNameExists")
    assert error_info(StoreUnavailable())[0] == 503
    assert error_info(TidingsError())[:2] == (500, "InternalFailure")
