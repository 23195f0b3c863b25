"""The native campaigns API over a real uvicorn server: a streamed fan-out, status, pause,
resume, cancel-recipient, cancel and the forecast."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from serving import running_server

from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.server.app import create_app

NOW_MS = 1_800_000_000_000  # 2027-01-15T08:00:00Z


@pytest.fixture
def api(db_url: str) -> Iterator[httpx.Client]:
    t = Tidings(db_url, clock=FrozenClock(NOW_MS))
    t.email.create_template("welcome", "Welcome {{name}}", text="Hi {{name}}")
    try:
        with running_server(create_app(t)) as url, httpx.Client(base_url=url,
                                                                 timeout=60) as client:
            yield client
    finally:
        t.close()


def rows(n: int) -> Iterator[bytes]:
    """A streamed body: one JSON line at a time."""
    for i in range(n):
        zone = "Mars/Base" if i == 3 else "Europe/Paris"
        yield (json.dumps({"id": f"r{i}", "email": f"r{i}@example.com", "timezone": zone,
                           "name": f"R{i}"}) + "\n").encode()


def test_fanout_and_campaign_lifecycle_over_http(api: httpx.Client) -> None:
    r = api.post("/v1/campaigns/winter/fanout", content=rows(500),
                 headers={"content-type": "application/x-ndjson"},
                 params={"template": "welcome", "from": "news@example.com",
                         "local_time": "09:00", "on": "2027-02-01",
                         "step": ["first:0", "second:3:10:00"], "flexible_window": "10"})
    assert r.status_code == 200, r.text
    summary = r.json()
    assert (summary["rows_read"], summary["schedules_created"], summary["errors"]) == \
        (500, 998, 1)
    assert summary["error_sample"][0]["id"] == "r3"
    status = api.get("/v1/campaigns/winter").json()
    assert status["counts"]["scheduled"] == 998 and [s["name"] for s in status["steps"]] == \
        ["first", "second"]
    assert api.post("/v1/campaigns/winter/pause").json()["counts"]["disabled"] == 998
    assert api.post("/v1/campaigns/winter/resume").json()["counts"]["enabled"] == 998
    gone = api.post("/v1/campaigns/winter/recipients/r7/cancel").json()
    assert gone["removed"] == 2
    fc = api.get("/v1/forecast", params={"hours": 24 * 31, "bucket_minutes": 60}).json()
    assert sum(fc["occurrences"]["email"]) == 996
    assert [c["name"] for c in api.get("/v1/campaigns").json()["campaigns"]] == ["winter"]
    assert api.post("/v1/campaigns/winter/cancel").json()["counts"]["cancelled"] == 998
    missing = api.get("/v1/campaigns/nope")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "NotFound"
    bad = api.post("/v1/campaigns/x/fanout", content=b"id,email,timezone\n",
                   params={"template": "welcome", "from": "news@example.com",
                           "local_time": "25:00", "on": "2027-02-01"})
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "local_time"
