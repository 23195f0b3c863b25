"""`tidings queue subscribe` and `tidings queue subscription …`, on a database and through
a node's native API (TIDINGS_URL), and the native endpoints under them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cli_runner import Cli
from push_receiver import Receiver
from serving import running_server
from standardwebhooks import Webhook

from tidings.client import Tidings
from tidings.server.app import create_app
from tidings.settings import Settings


@pytest.fixture
def cli(db_url: str, tmp_path: Path) -> Cli:
    with Tidings(settings=Settings(db=db_url)) as t:
        t.queues.create_queue("jobs")
    return Cli(db_url, tmp_path)


def test_subscribe_shows_the_secret_once_then_manages_the_subscription(cli: Cli) -> None:
    created = cli.json("queue", "subscribe", "jobs", "--endpoint", "http://127.0.0.1:9/hook",
                       "--concurrency", "8", "--rate", "100/s", "--timeout", "5s")
    assert created["secret"].startswith("whsec_") and created["concurrency"] == 8
    assert created["rate"] == "100/s" and created["timeout_ms"] == 5000
    shown = cli.json("queue", "subscription", "get", "jobs")
    assert "secret" not in shown and shown["state"] == "active"
    assert cli.json("queue", "subscription", "pause", "jobs")["state"] == "paused"
    assert cli.json("queue", "subscription", "resume", "jobs")["state"] == "active"
    updated = cli.json("queue", "subscription", "update", "jobs", "--rate", "none",
                       "--concurrency", "3")
    assert (updated["rate"], updated["concurrency"]) == (None, 3)
    rotated = cli.json("queue", "subscription", "rotate-secret", "jobs")
    assert rotated["secret"] != created["secret"] and rotated["previous_secret_until"]
    listed = cli.json("queue", "subscription", "list")["subscriptions"]
    assert [d["queue"] for d in listed] == ["jobs"]
    bad = cli.run("queue", "subscription", "update", "jobs", "--concurrency", "0")
    assert bad.returncode != 0 and "concurrency" in bad.stderr
    again = cli.run("queue", "subscribe", "jobs", "--endpoint", "http://127.0.0.1:9/")
    assert again.returncode != 0 and "already has a push subscription" in again.stderr
    cli.ok("queue", "subscription", "delete", "jobs")
    assert cli.json("queue", "subscription", "list")["subscriptions"] == []


@pytest.fixture
def node(db_url: str) -> Iterator[str]:
    with Tidings(settings=Settings(db=db_url)) as t:
        t.queues.create_queue("jobs")
        with running_server(create_app(t)) as base:
            yield base


def remote(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    env |= {"TIDINGS_URL": url, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "tidings", *args], capture_output=True,
                          text=True, env=env, timeout=60, check=False)


def test_with_tidings_url_the_commands_go_to_the_node(node: str) -> None:
    receiver = Receiver()
    with running_server(receiver) as hook:
        r = remote(node, "queue", "subscribe", "jobs", "--endpoint", hook, "--json")
        assert r.returncode == 0, r.stderr
        secret = json.loads(r.stdout)["secret"]
        r = remote(node, "queue", "subscription", "test", "jobs", "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout) == {"ok": True, "status": 200, "error": ""}
    pushed = receiver.requests[0]
    assert Webhook(secret).verify(pushed.body, pushed.headers) == {"test": True,
                                                                   "queue": "jobs"}
    got = httpx.get(f"{node}/v1/queues/jobs/subscription").json()
    assert got["endpoint"] == hook and "secret" not in got or got["secret"] is None
    assert httpx.get(f"{node}/v1/queues/nope/subscription").status_code == 404
    assert httpx.get(f"{node}/v1/queues/jobs/subscription/failures").json() == {
        "failures": []}
    r = remote(node, "queue", "subscription", "delete", "jobs")
    assert r.returncode == 0, r.stderr
    assert httpx.get(f"{node}/v1/queues/jobs/subscription").status_code == 404
