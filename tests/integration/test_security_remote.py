"""The CLI and `tidings.remote` talk to a node with tokens, over real HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from serving import running_server

from tidings.client import Tidings
from tidings.remote import RemoteError, RemoteTidings
from tidings.server.app import create_app
from tidings.settings import Settings

OPERATE, ADMIN = "operate-token-0123456789", "admin-token-0123456789"


@pytest.fixture
def url(db_url: str) -> Iterator[str]:
    t = Tidings(settings=Settings(db=db_url, api_tokens=f"operate:{OPERATE},admin:{ADMIN}"))
    try:
        with running_server(create_app(t)) as base:
            yield base
    finally:
        t.close()


@pytest.fixture
def cli_url(tmp_path: Path) -> Iterator[str]:
    """The CLI's HTTP path touches no storage of its own, and each command is a process
    start: one backend is enough here (the client test above runs on both)."""
    t = Tidings(settings=Settings(db=f"sqlite:///{tmp_path}/cli.db",
                                  api_tokens=f"operate:{OPERATE},admin:{ADMIN}"))
    try:
        with running_server(create_app(t)) as base:
            yield base
    finally:
        t.close()


def cli(url: str, token: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    env |= {"TIDINGS_URL": url, "COLUMNS": "200"}
    if token:
        env["TIDINGS_TOKEN"] = token
    return subprocess.run([sys.executable, "-m", "tidings", *args], capture_output=True,
                          text=True, env=env, timeout=60, check=False)


def test_the_python_remote_client_uses_its_token(url: str) -> None:
    with RemoteTidings(url, token=ADMIN) as admin, RemoteTidings(url, token=OPERATE) as op:
        admin.create_queue("remote-jobs")
        op.send("remote-jobs", {"order": 17})
        [m] = op.receive("remote-jobs", wait_s=1)
        assert json.loads(m["body"]) == {"order": 17}
        op.delete("remote-jobs", m["receipt_handle"])
        with pytest.raises(RemoteError) as denied:
            op.delete_queue("remote-jobs")
        assert denied.value.status == 403 and denied.value.code == "Forbidden"
        assert ADMIN not in repr(admin) and OPERATE not in str(denied.value)
        admin.delete_queue("remote-jobs")
        deadline = time.monotonic() + 5
        while len(entries := admin.audit()) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [e["action"] for e in entries] == ["DELETE /v1/queues/{name}",
                                                 "POST /v1/queues"]
    with RemoteTidings(url) as anonymous, pytest.raises(RemoteError) as missing:
        anonymous.list_queues()
    assert missing.value.status == 401


def test_the_cli_reads_the_audit_log_of_a_remote_node(cli_url: str) -> None:
    url = cli_url
    created = cli(url, ADMIN, "api", "POST", "/v1/queues", "--data", '{"name": "from-cli"}')
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["name"] == "from-cli"
    refused = cli(url, OPERATE, "api", "DELETE", "/v1/queues/from-cli")
    assert refused.returncode == 1 and "Forbidden" in refused.stderr
    no_token = cli(url, None, "audit", "--json")
    assert no_token.returncode == 1 and "Unauthorized" in no_token.stderr
    deadline = time.monotonic() + 5
    while True:
        listed = cli(url, ADMIN, "audit", "--json")
        assert listed.returncode == 0, listed.stderr
        entries = json.loads(listed.stdout)["entries"]
        if entries or time.monotonic() > deadline:
            break
    assert entries[0]["action"] == "POST /v1/queues"
    assert ADMIN not in listed.stdout + listed.stderr


def test_token_new_prints_a_hash_line_that_a_node_accepts(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "tidings", "token", "new", "--scope",
                          "read", "--name", "ops"], capture_output=True, text=True,
                         check=True).stdout
    token = out.split("token:", 1)[1].split()[0]
    file_line = out.split("tokens-file line:", 1)[1].splitlines()[0].strip()
    (tmp_path / "tokens").write_text(file_line + "\n")
    from tidings.server.access import Access

    access = Access.from_settings(Settings(api_tokens_file=str(tmp_path / "tokens")))
    entry = access.identify(token)
    assert entry is not None and entry.id == "ops" and entry.scope.label == "read"
    assert token not in file_line


def test_queue_commands_talk_to_a_remote_node_with_the_token(cli_url: str) -> None:
    url = cli_url
    assert cli(url, ADMIN, "api", "POST", "/v1/queues", "-d",
               '{"name": "cli-remote"}').returncode == 0
    sent = cli(url, OPERATE, "queue", "send", "cli-remote", "hello", "--attr", "k=v",
               "--json")
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout)["message_id"]
    listed = cli(url, OPERATE, "queue", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    [queue] = json.loads(listed.stdout)["queues"]
    assert queue["name"] == "cli-remote" and queue["counts"]["visible"] == 1
    got = cli(url, OPERATE, "queue", "receive", "cli-remote", "--delete", "--json")
    assert got.returncode == 0, got.stderr
    [message] = json.loads(got.stdout)["messages"]
    assert message["body"] == "hello"
    assert message["attributes"]["k"]["string_value"] == "v"
    refused = cli(url, OPERATE, "queue", "delete", "cli-remote")
    assert refused.returncode == 1 and "Forbidden" in refused.stderr
    assert cli(url, ADMIN, "queue", "purge", "cli-remote").returncode == 0
    assert cli(url, ADMIN, "queue", "delete", "cli-remote").returncode == 0
    gone = cli(url, ADMIN, "queue", "get", "cli-remote")
    assert gone.returncode == 1 and "QueueNotFound" in gone.stderr
