"""`tidings email list …` and `tidings email contact …` as users run them (real
subprocesses), on a database and on a node named by TIDINGS_URL (then over the native API
under /v1/email/contact-lists), with the same answers both ways."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from serving import running_server

from tidings.client import Tidings
from tidings.server.app import create_app
from tidings.settings import Settings


class Runner:
    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.env = env
        self.cwd = cwd

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tidings", *args], capture_output=True,
                              text=True, env=self.env, cwd=self.cwd, timeout=60, check=False)

    def ok(self, *args: str) -> str:
        r = self.run(*args)
        assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
        return r.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json"))


@pytest.fixture
def t(db_url: str) -> Iterator[Tidings]:
    with Tidings(settings=Settings(db=db_url)) as client:
        yield client


@pytest.fixture(params=["database", "node"])
def runner(request: pytest.FixtureRequest, t: Tidings, db_url: str,
           tmp_path: Path) -> Iterator[Runner]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    env["COLUMNS"] = "200"
    if request.param == "database":
        env["TIDINGS_DB"] = db_url
        yield Runner(env, tmp_path)
        return
    with running_server(create_app(t)) as url:
        env["TIDINGS_URL"] = url  # and no database: the command must go to the node
        yield Runner(env, tmp_path)


def test_lists_and_contacts_from_the_cli(runner: Runner, t: Tidings) -> None:
    made = runner.json("email", "list", "create", "news", "--description", "Our news",
                       "--topic", "weekly:OPT_IN:Weekly digest", "--topic", "offers:OPT_OUT")
    assert made["name"] == "news" and made["description"] == "Our news"
    assert [(x["name"], x["display_name"], x["default"]) for x in made["topics"]] == [
        ("weekly", "Weekly digest", "OPT_IN"), ("offers", "offers", "OPT_OUT")]
    assert t.email.contacts.get_list("news").topic("offers") is not None  # really stored
    assert [d["name"] for d in runner.json("email", "list", "list")] == ["news"]
    assert "Weekly digest" in runner.ok("email", "list", "get", "news")

    runner.ok("email", "contact", "create", "news", "Ana@Example.org",
              "--topic", "weekly=OPT_OUT")
    runner.ok("email", "contact", "create", "news", "bo@example.org", "--unsubscribe-all")
    runner.ok("email", "contact", "create", "news", "cy@example.org")
    ana = runner.json("email", "contact", "get", "news", "ana@example.org")
    assert ana["topics"] == {"weekly": "OPT_OUT"} and ana["unsubscribe_all"] is False
    out = runner.json("email", "contact", "list", "news", "--status", "OPT_OUT")
    assert [c["address"] for c in out] == ["bo@example.org"]
    weekly_in = runner.json("email", "contact", "list", "news", "--status", "OPT_IN",
                            "--topic", "weekly", "--use-default")
    assert [c["address"] for c in weekly_in] == ["cy@example.org"]
    updated = runner.json("email", "contact", "update", "news", "ana@example.org",
                          "--topic", "weekly=OPT_IN", "--topic", "offers=OPT_IN")
    assert updated["topics"] == {"offers": "OPT_IN", "weekly": "OPT_IN"}
    assert dict(t.email.contacts.get_contact("news", "ana@example.org").preferences) == \
        {"offers": "OPT_IN", "weekly": "OPT_IN"}

    # refusals name the field or the thing that is missing, with the usual exit codes
    bad = runner.run("email", "contact", "create", "news", "x@example.org",
                     "--topic", "nope=OPT_IN")
    assert bad.returncode != 0 and "nope" in bad.stderr
    missing = runner.run("email", "contact", "get", "nope", "x@example.org")
    assert missing.returncode != 0 and "nope" in missing.stderr
    twice = runner.run("email", "list", "create", "news")
    assert twice.returncode != 0 and "already exists" in twice.stderr

    runner.ok("email", "contact", "delete", "news", "cy@example.org")
    assert [c["address"] for c in runner.json("email", "contact", "list", "news")] == \
        ["ana@example.org", "bo@example.org"]
    runner.ok("email", "list", "update", "news", "--topic", "weekly")
    assert [x["name"] for x in runner.json("email", "list", "get", "news")["topics"]] == \
        ["weekly"]
    runner.ok("email", "list", "delete", "news")
    assert runner.json("email", "list", "list") == []


def test_native_api_contact_lists(t: Tidings) -> None:
    with running_server(create_app(t)) as base, httpx.Client(base_url=base) as http:
        r = http.post("/v1/email/contact-lists", json={
            "name": "club", "topics": [{"name": "events", "display_name": "Events"}]})
        assert r.status_code == 201, r.text
        assert r.json()["topics"][0]["default"] == "OPT_IN"
        assert http.post("/v1/email/contact-lists", json={"name": "club"}).status_code == 409
        bad = http.post("/v1/email/contact-lists", json={
            "name": "x", "topics": [{"name": "t", "default": "MAYBE"}]})
        assert bad.status_code == 400 and bad.json()["error"]["field"] == "topics.0.default"
        assert "OPT_IN" in bad.json()["error"]["message"]
        r = http.post("/v1/email/contact-lists/club/contacts", json={
            "address": "m@example.org", "topics": {"events": "OPT_OUT"}})
        assert r.status_code == 201 and r.json()["topics"] == {"events": "OPT_OUT"}
        assert http.get("/v1/email/contact-lists/club/contacts/nobody@example.org"
                        ).status_code == 404
        r = http.get("/v1/email/contact-lists/club/contacts",
                     params={"status": "OPT_OUT", "topic": "events"})
        assert [c["address"] for c in r.json()["contacts"]] == ["m@example.org"]
        assert http.delete("/v1/email/contact-lists/club").status_code == 204
        assert http.get("/v1/email/contact-lists/club").status_code == 404
