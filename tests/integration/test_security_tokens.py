"""Bearer tokens and scopes on the native API, through real HTTP; the audit log they feed;
the refusal to start an open node beyond loopback."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from serving import running_server, serve

from tidings.client import Tidings
from tidings.runtime.health import Health
from tidings.server.access import Access, Scope, hash_token, parse_tokens
from tidings.server.app import create_app
from tidings.server.native.auth import ADMIN_READS, OPEN, OPERATE, needed_scope
from tidings.settings import Settings

READ, OPERATE_TOKEN, ADMIN = "r" * 20, "o" * 20, "a" * 20
TOKENS = f"read:{READ},operate:{OPERATE_TOKEN},admin:{ADMIN}"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def url(db_url: str) -> Iterator[str]:
    yield from serve(db_url, api_tokens=TOKENS)


def test_no_token_is_a_401_that_names_the_scheme(url: str) -> None:
    r = httpx.get(f"{url}/v1/queues")
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"
    assert r.json()["error"]["code"] == "Unauthorized"
    assert "Authorization: Bearer" in r.json()["error"]["message"]
    bad = httpx.get(f"{url}/v1/queues", headers=bearer("x" * 20))
    assert bad.status_code == 401 and "not valid" in bad.json()["error"]["message"]
    basic = httpx.get(f"{url}/v1/queues", headers={"Authorization": f"Basic {ADMIN}"})
    assert basic.status_code == 401


def test_open_paths_stay_open_and_metrics_need_read(url: str) -> None:
    assert httpx.get(f"{url}/health").status_code == 200
    assert httpx.get(f"{url}/metrics").status_code == 401
    assert httpx.get(f"{url}/metrics", headers=bearer(READ)).status_code == 200


def test_readiness_is_open_but_its_reasons_need_a_read_token(db_url: str) -> None:
    # A reason can name a file path or a database host: a probe without a token learns
    # which check fails, a caller with a read token also why and since when.
    health = Health()
    health.failing("sweeper", "SQLite database '/srv/secret/tidings.db' cannot be written")
    health.failing("consumer of payroll-secret", "a queue's name is not for everyone")
    with Tidings(settings=Settings(db=db_url, api_tokens=TOKENS)) as t, \
            running_server(create_app(t, node_health=health)) as base:
        for headers in ({}, bearer("x" * 20)):
            hidden = httpx.get(f"{base}/health/ready", headers=headers)
            assert hidden.status_code == 503
            assert hidden.json()["checks"] == {
                "database": {"ok": True, "reason": None, "since": None},
                "dispatcher": {"ok": True, "reason": None, "since": None},
                "other": {"ok": False, "reason": None, "since": None}}
            assert "secret" not in hidden.text
        shown = httpx.get(f"{base}/health/ready", headers=bearer(READ))
        assert shown.status_code == 503
        sweeper = shown.json()["checks"]["sweeper"]
        assert "/srv/secret/tidings.db" in sweeper["reason"] and sweeper["since"]
        assert shown.json()["checks"]["consumer of payroll-secret"]["ok"] is False
        health.recovered("sweeper")
        health.recovered("consumer of payroll-secret")
        assert httpx.get(f"{base}/health/ready").status_code == 200


def test_each_scope_does_what_it_may_and_no_more(url: str) -> None:
    def call(token: str, method: str, path: str, **kw: Any) -> httpx.Response:
        return httpx.request(method, f"{url}{path}", headers=bearer(token), **kw)

    assert call(READ, "POST", "/v1/queues", json={"name": "jobs"}).status_code == 403
    assert call(OPERATE_TOKEN, "POST", "/v1/queues", json={"name": "jobs"}).status_code == 403
    assert call(ADMIN, "POST", "/v1/queues", json={"name": "jobs"}).status_code == 201
    # read: lists, gets, peeks; not sends or receives (a receive changes state)
    assert call(READ, "GET", "/v1/queues").status_code == 200
    assert call(READ, "GET", "/v1/queues/jobs").status_code == 200
    denied = call(READ, "POST", "/v1/queues/jobs/messages", json={"body": "x"})
    assert denied.status_code == 403
    assert denied.json()["error"] == {
        "code": "Forbidden",
        "message": f"token token-{hash_token(READ)[:8]} has the read scope; this action "
                   "needs operate"}
    assert call(READ, "GET", "/v1/queues/jobs/messages").status_code == 403
    # operate: send, receive, delete; not purge or delete the queue
    assert call(OPERATE_TOKEN, "POST", "/v1/queues/jobs/messages",
                json={"body": "x"}).status_code == 201
    got = call(OPERATE_TOKEN, "GET", "/v1/queues/jobs/messages").json()["messages"]
    handle = got[0]["receipt_handle"]
    assert call(OPERATE_TOKEN, "DELETE",
                f"/v1/queues/jobs/messages/{handle}").status_code == 204
    assert call(OPERATE_TOKEN, "POST", "/v1/queues/jobs/purge").status_code == 403
    assert call(OPERATE_TOKEN, "DELETE", "/v1/queues/jobs").status_code == 403
    assert call(ADMIN, "DELETE", "/v1/queues/jobs").status_code == 204


def test_admin_actions_are_audited_with_the_token_id_never_the_token(
        url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    h = bearer(ADMIN)
    httpx.post(f"{url}/v1/queues", json={"name": "audited"}, headers=h).raise_for_status()
    httpx.post(f"{url}/v1/queues/audited/messages", json={"body": "x"},
               headers=bearer(OPERATE_TOKEN)).raise_for_status()  # not audited: a send
    httpx.delete(f"{url}/v1/queues/audited", headers=h).raise_for_status()
    httpx.delete(f"{url}/v1/queues/missing", headers=h)  # failed: not audited
    assert httpx.get(f"{url}/v1/audit", headers=bearer(READ)).status_code == 403
    deadline = time.monotonic() + 5
    while True:  # the entry is written just after the answer
        entries = httpx.get(f"{url}/v1/audit", headers=h).json()["entries"]
        if len(entries) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    actor = f"token-{hash_token(ADMIN)[:8]}"
    assert [(e["actor"], e["face"], e["action"], e["resource"]) for e in entries] == [
        (actor, "native", "DELETE /v1/queues/{name}", "/v1/queues/audited"),
        (actor, "native", "POST /v1/queues", "/v1/queues"),
    ]
    assert entries[0]["at"].endswith("Z")
    for token in (READ, OPERATE_TOKEN, ADMIN):
        assert token not in caplog.text


def test_a_tokens_file_holds_hashes_and_names(db_url: str, tmp_path: Path) -> None:
    token = "s3cret-token-for-ops-team"
    path = tmp_path / "tokens"
    path.write_text(f"# scope sha256 name\noperate {hash_token(token)} ops-team\n")
    assert token not in path.read_text()
    for url in serve(db_url, api_tokens_file=str(path)):
        assert httpx.get(f"{url}/v1/queues", headers=bearer(token)).status_code == 200
        assert httpx.get(f"{url}/v1/queues",
                         headers=bearer(hash_token(token))).status_code == 401


def test_beyond_loopback_without_tokens_the_native_api_is_closed(db_url: str) -> None:
    """A node whose only credentials are AWS keys still keeps its native API shut."""
    for url in serve(db_url, host="0.0.0.0", aws_keys="AKID:secret"):
        r = httpx.get(f"{url}/v1/queues", headers=bearer(ADMIN))
        assert r.status_code == 401
        assert "TIDINGS_API_TOKENS" in r.json()["error"]["message"]
        assert httpx.get(f"{url}/health").status_code == 200


def _unsigned_sqs(base: str) -> httpx.Response:
    return httpx.post(base, content=b"{}", headers={
        "X-Amz-Target": "AmazonSQS.ListQueues",
        "Content-Type": "application/x-amz-json-1.0"})


@pytest.mark.parametrize("credential", ["api_tokens", "aws_keys"])
def test_on_loopback_one_configured_credential_closes_every_api(
        db_url: str, tmp_path: Path, credential: str) -> None:
    """A `tidings serve` on 127.0.0.1 with only API tokens, or only AWS keys: the native
    API, the console and the AWS APIs all want credentials (behind a reverse proxy on the
    same host, every client would be "loopback"); an API with none of its own configured
    refuses every call, naming what to set."""
    from faults import Serve

    env = {"TIDINGS_API_TOKENS": TOKENS} if credential == "api_tokens" else {
        "TIDINGS_AWS_KEYS": "AKIDLOCAL:local-secret"}
    node = Serve(db_url, tmp_path, env=env)
    try:
        node.wait_ready()
        base = f"http://127.0.0.1:{node.port}"
        native = httpx.get(f"{base}/v1/queues")
        assert native.status_code == 401, native.text
        console = httpx.get(f"{base}/ui/", follow_redirects=False)
        assert (console.status_code, console.headers["location"].split("?")[0]) == (
            303, "/ui/signin")
        aws = _unsigned_sqs(base)
        assert aws.status_code in (400, 403), aws.text
        assert "QueueUrls" not in aws.text
        if credential == "api_tokens":
            assert httpx.get(f"{base}/v1/queues", headers=bearer(READ)).status_code == 200
            assert "UnrecognizedClientException" in aws.text  # (InvalidClientTokenId in JSON)
            assert "TIDINGS_AWS_KEYS" in aws.text
        else:
            assert "TIDINGS_API_TOKENS" in native.json()["error"]["message"]
        assert httpx.get(f"{base}/health").status_code == 200
    finally:
        node.stop()
    log = (tmp_path / "serve.log").read_text()
    assert "security: native API and console: bearer tokens required" in log
    assert "security: AWS APIs: SigV4 required" in log


def test_a_development_node_stays_open(db_url: str) -> None:
    for url in serve(db_url):
        assert httpx.post(f"{url}/v1/queues", json={"name": "q"}).status_code == 201


def test_every_route_has_the_scope_it_was_meant_to_have(tmp_path: Path) -> None:
    with Tidings(settings=Settings(db=f"sqlite:///{tmp_path}/t.db")) as t:
        app = create_app(t)
    routes = {(m.upper(), path) for path, ops in app.openapi()["paths"].items() for m in ops}
    # every listed exception names a route that exists
    assert (OPEN | OPERATE | ADMIN_READS) - routes == set()
    admin_writes = {(m, p) for m, p in routes if needed_scope(m, p) is Scope.ADMIN
                    and m != "GET"}
    assert admin_writes == {
        ("POST", "/v1/queues"), ("PATCH", "/v1/queues/{name}"),
        ("DELETE", "/v1/queues/{name}"), ("POST", "/v1/queues/{name}/purge"),
        ("POST", "/v1/queues/{name}/tags"), ("DELETE", "/v1/queues/{name}/tags"),
        ("POST", "/v1/schedule-groups"), ("DELETE", "/v1/schedule-groups/{name}"),
        ("POST", "/v1/schedules"), ("POST", "/v1/schedules:batch"),
        ("PUT", "/v1/schedules/{group}/{name}"), ("DELETE", "/v1/schedules/{group}/{name}"),
        ("POST", "/v1/schedules/{group}/{name}:apply"),
        ("POST", "/v1/email/templates"), ("PUT", "/v1/email/templates/{name}"),
        ("DELETE", "/v1/email/templates/{name}"), ("PUT", "/v1/email/suppressions/{address}"),
        ("DELETE", "/v1/email/suppressions/{address}"),
        ("POST", "/v1/campaigns/{name}/fanout"),
        ("POST", "/v1/email/contact-lists"), ("PUT", "/v1/email/contact-lists/{name}"),
        ("DELETE", "/v1/email/contact-lists/{name}"),
        ("PUT", "/v1/limits/{key}"), ("DELETE", "/v1/limits/{key}"),
        ("POST", "/v1/limits/{key}/pause"), ("POST", "/v1/limits/{key}/resume"),
        ("POST", "/v1/queues/{name}/subscription"), ("PATCH", "/v1/queues/{name}/subscription"),
        ("DELETE", "/v1/queues/{name}/subscription"),
        ("POST", "/v1/queues/{name}/subscription/pause"),
        ("POST", "/v1/queues/{name}/subscription/resume"),
        ("POST", "/v1/queues/{name}/subscription/rotate-secret"),
        ("POST", "/v1/queues/{name}/subscription/test"),
    }


def test_tokens_are_checked_in_full_and_kept_out_of_repr() -> None:
    access = Access(parse_tokens(f"admin:{ADMIN}"), required=True)
    assert access.identify(ADMIN) is not None
    assert access.identify(ADMIN[:-1]) is None and access.identify(ADMIN + "a") is None
    assert ADMIN not in repr(Settings(api_tokens=f"admin:{ADMIN}", token=ADMIN))


def _serve_cli(tmp_path: Path, *args: str, env: dict[str, str] | None = None,
               ) -> subprocess.Popen[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    full_env |= env or {}
    return subprocess.Popen(
        [sys.executable, "-m", "tidings", "serve", "--db", f"sqlite:///{tmp_path}/t.db",
         "--port", "0", *args], env=full_env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)


def test_an_open_node_beyond_loopback_refuses_to_start(tmp_path: Path) -> None:
    proc = _serve_cli(tmp_path, "--host", "0.0.0.0")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "beyond loopback" in out and "TIDINGS_API_TOKENS" in out
    assert "--insecure-no-auth" in out
    assert not (tmp_path / "t.db").exists()  # refused before opening anything


def test_insecure_no_auth_starts_and_says_so(tmp_path: Path) -> None:
    proc = _serve_cli(tmp_path, "--host", "0.0.0.0", "--insecure-no-auth")
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        seen = ""
        while "authentication off" not in seen and time.monotonic() < deadline:
            seen += proc.stdout.readline()
        assert "authentication off (--insecure-no-auth)" in seen
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_the_console_signs_in_with_the_same_tokens(url: str) -> None:
    with httpx.Client(base_url=url) as c:
        page = c.get("/ui/queues")
        assert page.status_code in (302, 303, 307) and "/ui/signin" in page.headers["location"]
        assert c.post("/ui/signin", data={"token": "x" * 20}).status_code == 401
        signed = c.post("/ui/signin", data={"token": READ, "next": "/ui/queues"})
        assert signed.status_code == 303
        assert c.get("/ui/queues").status_code == 200


def test_the_consoles_limit_changes_need_the_admin_scope(url: str) -> None:
    """As over the API: an operate token sees the limits page but cannot change a limit;
    an admin's change needs the page's CSRF token."""
    form = {"key": "partner", "rate": "5/s", "back": "/ui/limits"}
    for token, allowed in ((OPERATE_TOKEN, False), (ADMIN, True)):
        with httpx.Client(base_url=url) as c:
            c.post("/ui/signin", data={"token": token, "next": "/ui/limits"})
            page = c.get("/ui/limits")
            assert page.status_code == 200 and ('id="set-limit"' in page.text) is allowed
            assert c.post("/ui/limits/set", data=form).status_code == 403  # no CSRF token
            csrf = page.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
            done = c.post("/ui/limits/set", data={**form, "csrf": csrf})
            assert done.status_code == (303 if allowed else 403)
    with httpx.Client(base_url=url, headers={"authorization": f"Bearer {READ}"}) as c:
        assert c.get("/v1/limits/partner").json()["rate"] == "5/s"  # the admin's, once
