"""The email native API and the unsubscribe pages over real HTTP, plus sends through a
running node into a real relay, and the relay limits (rate, connections)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from email_relay import Relay, running_relay
from serving import running_server
from test_email_delivery import email_target, just_now, run_node, send_doc, tidings_for

from tidings.client import Tidings
from tidings.model.email import DeliveryState, SuppressionReason
from tidings.model.schedules import ScheduleSpec
from tidings.server.app import create_app


@pytest.fixture
def t(db_url: str) -> Iterator[Tidings]:
    """On the wall clock (conftest's `t` is frozen): a node fires and delivers in real time."""
    with tidings_for(db_url) as client:
        yield client


def test_one_click_unsubscribe_opts_out_and_forgeries_are_refused(t: Tidings) -> None:
    t.email.contacts.create_list("news", [{"TopicName": "weekly", "DisplayName": "Weekly news",
                                           "DefaultSubscriptionStatus": "OPT_IN"}])
    token = t.email.tokens().make("Reader@Example.org", "news/weekly")
    bulk = t.email.tokens().make("bulk@example.org")  # mail that named no contact list
    with running_server(create_app(t)) as base, httpx.Client(base_url=base) as http:
        page = http.get(f"/unsubscribe/{token}")
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        assert 'method="post"' in page.text and "r\u2022\u2022\u2022@example.org" in page.text
        assert "Weekly news" in page.text and "reader@" not in page.text
        assert t.email.contacts.store.get_contact("news", "reader@example.org") is None
        r = http.post(f"/unsubscribe/{token}", content="List-Unsubscribe=One-Click",
                      headers={"content-type": "application/x-www-form-urlencoded"})
        assert r.status_code == 200
        contact = t.email.contacts.get_contact("news", "reader@example.org")
        assert dict(contact.preferences) == {"weekly": "OPT_OUT"}
        assert t.email.suppression("reader@example.org") is None  # not the account
        assert http.post(f"/unsubscribe/{token}",
                         content="List-Unsubscribe=One-Click").status_code == 200  # idempotent
        assert http.post(f"/unsubscribe/{bulk}",
                         content="List-Unsubscribe=One-Click").status_code == 200
        entry = t.email.suppression("bulk@example.org")
        assert entry is not None and entry.reason is SuppressionReason.UNSUBSCRIBE
        # mail naming a list that is gone (or that predates stored lists): suppressed
        ghost = t.email.tokens().make("ghost@example.org", "old-list/weekly")
        assert http.post(f"/unsubscribe/{ghost}",
                         content="List-Unsubscribe=One-Click").status_code == 200
        assert t.email.suppression("ghost@example.org") is not None
        other = t.email.tokens().make("other@example.org")
        for bad in (other[:-4] + token[-4:], "nonsense", token[:-2] + "AA", "a.b"):
            assert http.post(f"/unsubscribe/{bad}",
                             content="List-Unsubscribe=One-Click").status_code in (400, 404)
            assert http.get(f"/unsubscribe/{bad}").status_code in (400, 404)
        assert t.email.suppression("other@example.org") is None


def test_native_api_templates_render_send_log_and_suppressions(t: Tidings) -> None:
    relay = Relay()
    with running_relay(relay) as url, running_server(create_app(t)) as base, \
            httpx.Client(base_url=base) as http:
        r = http.post("/v1/email/templates", json={
            "name": "receipt", "subject": "Receipt {{n}}", "text": "Total: {{total}}"})
        assert r.status_code == 201, r.text
        assert http.post("/v1/email/templates", json={
            "name": "receipt", "subject": "x", "text": "y"}).status_code == 409
        bad = http.post("/v1/email/templates", json={"name": "b", "subject": "{{#if}}",
                                                     "text": "x"})
        assert bad.status_code == 400 and bad.json()["error"]["field"] == "Subject"
        assert [x["name"] for x in http.get("/v1/email/templates").json()["templates"]] == \
            ["receipt"]
        preview = http.post("/v1/email/templates/receipt/render",
                            json={"data": {"n": 7, "total": "9.50"}}).json()
        assert preview == {"subject": "Receipt 7", "html": None, "text": "Total: 9.50"}
        missing = http.post("/v1/email/templates/receipt/render", json={"data": {"n": 7}})
        assert missing.status_code == 400
        assert missing.json()["error"]["code"] == "RenderingFailure"
        assert http.put("/v1/email/templates/receipt", json={
            "subject": "Receipt #{{n}}", "text": "Total: {{total}} EUR"}).status_code == 200
        assert http.post("/v1/email/templates/receipt/render", json={
            "data": '{"n": 8, "total": "1"}'}).json()["subject"] == "Receipt #8"
        sent = http.post("/v1/email/send", json=json.loads(send_doc(
            ["buyer@example.org"], template="receipt", data={"n": 8, "total": "1"})))
        assert sent.status_code == 202, sent.text
        assert sent.json()["state"] == "QUEUED"
        nope = http.post("/v1/email/send", json=json.loads(send_doc(["x@example.org"],
                                                                    template="absent")))
        assert nope.status_code == 404
        invalid = http.post("/v1/email/send", json={"FromEmailAddress": "not-an-address"})
        assert invalid.status_code == 400
        put = http.put("/v1/email/suppressions/Blocked@Example.org", json={"reason": "COMPLAINT"})
        assert put.json()["reason"] == "COMPLAINT" and put.json()["address"] == \
            "blocked@example.org"
        assert http.get("/v1/email/suppressions").json()["suppressions"][0]["address"] == \
            "blocked@example.org"
        assert http.delete("/v1/email/suppressions/blocked@example.org").status_code == 204
        assert http.delete("/v1/email/suppressions/blocked@example.org").status_code == 404
        assert http.get("/v1/email/suppressions/blocked@example.org").status_code == 404
        run_node(t, lambda: bool(relay.received), smtp_url=url)
        log = http.get("/v1/email/deliveries", params={"recipient": "BUYER@example.org"}).json()
        (entry,) = log["deliveries"]
        assert entry["id"] == sent.json()["id"] and entry["state"] == "SENT"
        assert entry["schedule"] is None and entry["template"] == "receipt"
        assert http.get(f"/v1/email/deliveries/{entry['id']}").json()["state"] == "SENT"
        assert http.get("/v1/email/deliveries/nope").status_code == 404
        assert http.get("/v1/email/deliveries", params={"state": "WHAT"}).status_code == 400
        assert http.delete("/v1/email/templates/receipt").status_code == 204
        assert http.get("/v1/email/templates/receipt").status_code == 404
    assert relay.received[0].message["Subject"] == "Receipt #8"
    assert relay.received[0].message.get_content().rstrip() == "Total: 1 EUR"


def test_email_target_is_validated_when_the_schedule_is_created(t: Tidings) -> None:
    t.email.create_template("welcome", "Hi", text="Hello")
    cases: list[tuple[str, str]] = [
        (send_doc(["x@example.org"], template="absent"), "does not exist"),
        ('{"FromEmailAddress": "a@example.com"}', "Content"),
        (send_doc(["not an address"]), "ToAddresses"),
        ("not json", "Input"),
    ]
    for doc, expected in cases:
        try:
            t.schedules.create(ScheduleSpec("bad", just_now(), email_target(doc)))
        except Exception as exc:  # noqa: BLE001 - the message is what is checked
            assert expected in str(exc), (doc, exc)
        else:
            raise AssertionError(f"accepted {doc}")
    ok = send_doc(["x@example.org"], data={"id": "<aws.scheduler.execution-id>"})
    t.schedules.create(ScheduleSpec("good", just_now(), email_target(ok)))


def schedule_many(t: Any, n: int) -> None:
    t.email.create_template("welcome", "Hi {{n}}", text="Number {{n}}")
    for i in range(n):
        t.schedules.create(ScheduleSpec(f"r{i}", just_now(), email_target(
            send_doc([f"user{i}@example.org"], data={"n": i}))))


def test_rate_limit_spreads_a_spike(t: Tidings) -> None:
    relay = Relay()
    n = 100
    with running_relay(relay) as url:
        schedule_many(t, n)
        run_node(t, lambda: len(relay.received) >= n, timeout=60, smtp_url=url,
                 smtp_max_rate=50, concurrency=16)
    assert len(relay.received) == n
    times = sorted(r.at for r in relay.received)
    spread = times[-1] - times[0]
    assert 1.9 <= spread < 4.0, spread  # 99 intervals of 1/50 s: the bucket holds one token
    assert all(d.state is DeliveryState.SENT for d in t.email.log(limit=n)[0])


def test_connection_cap_queues_instead_of_opening_more(t: Tidings) -> None:
    relay = Relay(data_delay_s=0.02)
    n = 60
    with running_relay(relay) as url:
        baseline = relay.total_sessions  # the controller's own start-up probe
        schedule_many(t, n)
        run_node(t, lambda: len(relay.received) >= n, timeout=60, smtp_url=url,
                 smtp_max_connections=2, concurrency=16)
    assert len(relay.received) == n
    assert relay.peak_sessions == 2  # capped, and the cap was reached
    assert relay.total_sessions - baseline == 2  # connections were reused, not reopened
