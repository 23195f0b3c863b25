"""The CLI with a remote node named (`TIDINGS_URL` or `--url`): every command goes to that
node or fails saying why, and none opens or creates a database of its own.

The commands are read from the typer app, not listed here, so a command added later is
covered: if it answers from a local database while a node is named, the first test fails.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import typer
from faults import Serve
from typer.testing import CliRunner

from conftest import BACKENDS, module_pg_schema, pg_url
from tidings.cli.main import app

#: Commands that need neither a node nor a database, so have nothing to refuse.
NEITHER = {
    ("token", "new"): "makes a random token and prints it",
    ("smtp-sink", "list"): "lists what the local development SMTP server kept",
}
#: Not run: it serves until stopped (a local development SMTP server, no node, no database).
NOT_RUN = {("smtp-sink",)}
#: Commands that work on a database by nature: refused while a node is named.
DATABASE_ONLY = {("serve",), ("worker",), ("migrate",), ("backup",), ("restore",)}

#: A value for each required parameter, by its name ("x" for a name not listed here).
VALUES = {
    "source": "-", "campaign": "spring", "template": "welcome", "sender": "a@example.com",
    "method": "GET", "path": "/v1/queues", "dest": "copy.db", "name": "jobs",
    "body": "hello", "dlq": "jobs-dlq", "expression": "rate(1 hour)",
    "address": "a@example.com", "to": "b@example.com", "subject": "Hi",
    "recipient_id": "r1", "until": "5m",
}
#: What a command needs besides its required parameters to be a valid invocation, so that
#: what stops it is the node, not its own input check.
EXTRA = {
    ("schedule", "create"): ["--queue", "jobs"], ("schedule", "apply"): ["--queue", "jobs"],
    ("schedule", "update"): ["--queue", "jobs"], ("email", "send"): ["--template", "welcome"],
    ("fanout",): ["--next", "09:00"],
}


def commands() -> Iterator[tuple[str, ...]]:
    """Every command path of the app: each leaf, and each group that runs by itself."""
    def walk(command: Any, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
        subcommands = getattr(command, "commands", None)  # a group (typer's own click)
        if subcommands is None:
            yield path
            return
        if command.invoke_without_command and path:
            yield path
        for name, sub in subcommands.items():
            yield from walk(sub, (*path, name))

    yield from walk(typer.main.get_command(app), ())


def invocation(path: tuple[str, ...]) -> list[str]:
    command: Any = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    args = [*path]
    for param in command.params:
        if not param.required:
            continue
        value = VALUES.get(param.name or "", "x")
        if param.param_type_name == "option":
            args += [param.opts[0], value]
        else:
            args.append(value)
    return [*args, *EXTRA.get(path, [])]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(args: list[str], cwd: Path, url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    env |= {"TIDINGS_URL": url, "TIDINGS_TOKEN": "tdg_unused", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "tidings", *args], input="", cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=60, check=False)


def test_every_command_goes_to_the_named_node_or_fails_and_creates_nothing(
        tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there: a stopped node
    paths = [p for p in commands() if p not in NOT_RUN]
    assert len(paths) > 50 and ("queue", "peek") in paths  # the app's commands, not a stub
    folders = {p: tmp_path / "-".join(p) for p in paths}
    for folder in folders.values():
        folder.mkdir()
    with ThreadPoolExecutor(4) as pool:  # each is a process start: a few at a time
        results = dict(zip(paths, pool.map(
            lambda p: run(invocation(p), folders[p], url), paths), strict=True))
    problems = []
    for path, r in results.items():
        left = sorted(f.name for f in folders[path].iterdir())
        said = (r.stdout + r.stderr).strip()[-300:]
        if left:
            problems.append(f"{' '.join(path)}: left {left} in the working folder")
        if path in NEITHER:
            ok = r.returncode == 0
        elif path in DATABASE_ONLY:
            ok = r.returncode == 2 and "TIDINGS_URL names a remote node" in r.stderr
        else:
            ok = (r.returncode == 1 and "ConnectionError" in r.stderr
                  and url in r.stderr and "Traceback" not in r.stderr)
        if not ok:
            problems.append(f"{' '.join(invocation(path))}: exit {r.returncode}: {said}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("flag", [["--db", "sqlite:///elsewhere.db"], ["--create"]])
def test_a_database_flag_beside_a_node_is_refused_not_ignored(tmp_path: Path,
                                                              flag: list[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    r = run(["queue", "create", "jobs", *flag], tmp_path, url)
    assert r.returncode == 2, r.stderr
    assert f"error: {flag[0]}: the command goes to the remote node {url}" in r.stderr
    assert list(tmp_path.iterdir()) == []


# Against a live node ---------------------------------------------------------------------

@pytest.fixture(scope="module", params=BACKENDS)
def node(request: pytest.FixtureRequest,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A real `tidings serve` (its sweeper runs move tasks), and its database's URL."""
    def serve(db: str) -> Iterator[tuple[str, str]]:
        server = Serve(db, tmp_path_factory.mktemp("node"), env={
            "TIDINGS_SWEEP_INTERVAL_S": "0.2"})
        try:
            server.wait_ready()
            yield f"http://127.0.0.1:{server.port}", db
        finally:
            server.stop()

    if request.param == "sqlite":
        yield from serve(f"sqlite:///{tmp_path_factory.mktemp('db')}/t.db")
    else:
        with module_pg_schema() as schema:
            yield from serve(pg_url(schema))


class Both:
    """The CLI in this process, on the node (`TIDINGS_URL`) or on its database (`--db`):
    the same command must print the same document either way."""

    def __init__(self, url: str, db: str) -> None:
        self.url, self.db = url, db

    def run(self, *args: str, local: bool = False, input: str | None = None,
            code: int = 0) -> Any:
        env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("TIDINGS_")}
        env |= {"TIDINGS_DB": self.db} if local else {"TIDINGS_URL": self.url}
        r = CliRunner().invoke(app, list(args), env=env, input=input, catch_exceptions=False)
        assert r.exit_code == code, (args, local, r.exit_code, r.stdout, r.stderr)
        return r

    def json(self, *args: str, input: str | None = None) -> Any:
        return json.loads(self.run(*args, "--json", input=input).stdout)

    def same(self, *args: str) -> Any:
        """The document the node answers, after checking the database answers it too."""
        remote = self.json(*args)
        local = json.loads(self.run(*args, "--json", local=True).stdout)
        assert remote == local, args
        return remote


@pytest.fixture
def both(node: tuple[str, str]) -> Both:
    return Both(*node)


def test_queues_peek_and_redrive_on_the_node(both: Both) -> None:
    both.json("queue", "create", "dead")
    made = both.json("queue", "create", "work", "--dlq", "dead", "--max-receive-count", "1",
                     "--tag", "team=a", "--visibility-timeout", "5")
    assert made["tags"] == {"team": "a"}
    assert made["attributes"]["redrive_policy"] == {"dead_letter_queue": "dead",
                                                    "max_receive_count": 1}
    for i in range(3):
        both.json("queue", "send", "work", f"m{i}")
    assert len(both.json("queue", "receive", "work", "-n", "10", "--visibility-timeout",
                         "0")["messages"]) == 3
    # received once already: the next receive moves them to the dead-letter queue
    assert both.json("queue", "receive", "work", "-n", "10", "--wait", "0")["messages"] == []
    peeked = both.same("queue", "peek", "dead")["messages"]
    assert sorted(m["body"] for m in peeked) == ["m0", "m1", "m2"]
    assert all(m["dead_letter_source"].endswith(":work") for m in peeked)
    moved = both.json("queue", "redrive", "dead", "--max-per-second", "2")  # the node's task
    assert moved == {"queue": "dead", "destination": None, "moved": 3}
    assert both.same("queue", "get", "work")["counts"]["visible"] == 3
    both.json("queue", "receive", "work", "-n", "10", "--visibility-timeout", "0")
    both.json("queue", "receive", "work", "-n", "10", "--wait", "0")
    assert both.json("queue", "redrive", "dead", "--to", "work")["moved"] == 3
    missing = both.run("queue", "peek", "nowhere", code=1)
    assert "QueueNotFound" in missing.stderr


def test_schedules_and_groups_on_the_node(both: Both) -> None:
    both.json("schedule-group", "create", "team", "--tag", "env=test")
    assert [g["name"] for g in both.same("schedule-group", "list")["groups"]] == [
        "default", "team"]
    target = ("--queue", "work-s", "--input", '{"kind": "nightly"}')
    both.json("queue", "create", "work-s")
    made = both.json("schedule", "create", "nightly", "-g", "team", "-e", "cron(0 3 * * ? *)",
                     "--tz", "Europe/Paris", *target)
    assert made["target"]["input"] == '{"kind": "nightly"}' and made["timezone"] == "Europe/Paris"
    # apply: the same settings leave it as it is; other settings replace it; a new name
    # creates it (POST /v1/schedules/{group}/{name}:apply)
    same = both.json("schedule", "apply", "nightly", "-g", "team", "-e", "cron(0 3 * * ? *)",
                     "--tz", "Europe/Paris", *target)
    assert same["modified_at"] == made["modified_at"]
    changed = both.json("schedule", "apply", "nightly", "-g", "team", "-e", "rate(2 hours)",
                        *target)
    assert changed["expression"] == "rate(2 hours)" and changed["timezone"] == "UTC"
    created = both.json("schedule", "apply", "weekly", "-g", "team", "-e",
                        "cron(0 9 ? * MON *)", "--queue", "work-s", "--disabled")
    assert created["state"] == "DISABLED" and created["due_at"] is None
    updated = both.json("schedule", "update", "weekly", "-g", "team", "-e",
                        "cron(0 10 ? * MON *)", "--queue", "work-s")
    assert updated["state"] == "ENABLED" and updated["expression"] == "cron(0 10 ? * MON *)"
    assert both.same("schedule", "get", "weekly", "-g", "team") == {
        **updated, "modified_at": updated["modified_at"]}
    assert both.json("schedule", "disable", "weekly", "-g", "team")["state"] == "DISABLED"
    assert both.json("schedule", "enable", "weekly", "-g", "team")["state"] == "ENABLED"
    page = both.same("schedule", "list", "-g", "team", "--limit", "1")
    assert [s["name"] for s in page["schedules"]] == ["nightly"] and page["next_token"]
    assert "more: --next-token" in both.run("schedule", "list", "-g", "team", "--limit",
                                            "1").stdout
    after = "2030-03-30T12:00:00+02:00"
    assert both.same("schedule", "next", "cron(0 3 * * ? *)", "--tz", "Europe/Paris",
                     "--after", after, "-n", "2")["occurrences"][0]["utc"] == (
        "2030-03-31T01:00:00.000Z")  # the night the clocks go forward
    both.json("schedule", "delete", "weekly", "-g", "team")
    assert both.run("schedule", "get", "weekly", "-g", "team", code=1).stderr.startswith(
        "error: ScheduleNotFound:")
    bad = both.run("schedule", "create", "x", "-e", "rate(1 hour)", code=2)  # checked here
    assert "give exactly one target" in bad.stderr
    assert both.json("schedule-group", "delete", "team") == {"name": "team",
                                                             "deleted_schedules": 1}


def test_email_on_the_node(both: Both, tmp_path: Path) -> None:
    text = tmp_path / "welcome.txt"
    text.write_text("Hello {{name}}")
    both.json("email", "template", "create", "hello", "--subject", "Hi {{name}}",
              "--text", str(text))
    assert both.same("email", "template", "get", "hello")["text"] == "Hello {{name}}"
    assert [t["name"] for t in both.same("email", "template", "list")] == ["hello"]
    both.json("email", "template", "update", "hello", "--subject", "Hey {{name}}",
              "--text", str(text))
    rendered = both.json("email", "render", "hello", "--data", '{"name": "Ada"}')
    assert rendered == {"subject": "Hey Ada", "text": "Hello Ada", "html": None}
    failed = both.run("email", "render", "hello", code=1)  # no data for {{name}}
    assert "RenderingFailure" in failed.stderr
    sent = both.json("email", "send", "--from", "shop@example.com", "--to", "ada@example.com",
                     "--template", "hello", "--data", '{"name": "Ada"}')
    assert sent["state"] == "QUEUED" and sent["recipients"] == ["ada@example.com"]
    [logged] = both.same("email", "log", "--recipient", "ada@example.com")
    assert logged["id"] == sent["id"] and logged["template"] == "hello"
    status = both.json("email", "status")
    assert status == {"waiting": 1, "relay": False}  # the node has no SMTP relay
    assert "(this node has no SMTP relay)" in both.run("email", "status").stdout
    assert both.json("email", "resend", "--since", "2020-01-01T00:00:00Z") == {
        "resent": 0, "skipped": []}
    assert both.run("email", "suppress", "add", "bob@example.com").stdout.strip() == (
        "suppressed bob@example.com")
    assert "was already suppressed" in both.run("email", "suppress", "add",
                                                "bob@example.com").stdout
    assert [s["address"] for s in both.same("email", "suppress", "list")] == [
        "bob@example.com"]
    both.run("email", "suppress", "remove", "bob@example.com")
    assert "not on the suppression list" in both.run("email", "suppress", "remove",
                                                     "bob@example.com", code=1).stderr
    both.run("email", "template", "delete", "hello")
    assert both.same("email", "template", "list") == []


def test_campaigns_on_the_node(both: Both) -> None:
    people = "id,email,timezone\n" + "".join(
        f"r{i},r{i}@example.com,{zone}\n"
        for i, zone in enumerate(["UTC", "Europe/Paris", "Asia/Tokyo", "Mars/Olympus"]))
    both.run("email", "template", "create", "drip", "--subject", "Hi", "--text", "-",
             input="x", code=2)  # --text is a file, not stdin: refused as usage
    template = Path(os.getcwd()) / "drip.txt"
    try:
        template.write_text("Hello")
        both.json("email", "template", "create", "drip", "--subject", "Hi", "--text",
                  str(template))
    finally:
        template.unlink()
    summary = both.json("fanout", "-", "--campaign", "spring", "--template", "drip",
                        "--from", "shop@example.com", "--next", "09:00",
                        "--step", "welcome:0", "--step", "nudge:2", input=people)
    assert summary["schedules_created"] == 6 and summary["errors"] == 1
    assert summary["error_sample"][0]["id"] == "r3"
    refused = both.run("fanout", "-", "--campaign", "spring", "--template", "drip",
                       "--from", "shop@example.com", "--next", "09:00", "--errors", "bad.jsonl",
                       input=people, code=2)
    assert "error: --errors:" in refused.stderr
    listed = both.same("campaign", "list")["campaigns"]
    assert [(c["name"], [s["name"] for s in c["steps"]]) for c in listed] == [
        ("spring", ["welcome", "nudge"])]
    assert both.same("campaign", "status", "spring")["counts"]["scheduled"] == 6
    shown = both.same("campaign", "show", "spring", "r1")  # GET …/recipients/{id}
    assert [(s["step"], s["state"]) for s in shown["steps"]] == [
        ("welcome", "scheduled"), ("nudge", "scheduled")]
    assert "no recipient 'r9'" in both.run("campaign", "show", "spring", "r9", code=1).stderr
    assert both.json("campaign", "cancel-recipient", "spring", "r1")["removed"] == 2
    assert "no pending step" in both.run("campaign", "cancel-recipient", "spring", "r1",
                                         code=1).stderr
    assert both.json("campaign", "pause", "spring")["counts"]["disabled"] == 4
    assert both.json("campaign", "resume", "spring")["counts"]["enabled"] == 4
    # each step is at most 24 h + 2 days away, whatever the hour the suite runs at
    forecast = both.json("forecast", "--hours", "96", "--bucket", "60")
    assert sum(sum(c) for c in forecast["firings"].values()) == 4
    assert "firings" in both.run("forecast", "--hours", "1").stdout.lower()
    assert both.json("campaign", "cancel", "spring")["status"] == "CANCELLED"
    entries = both.same("audit", "--actor", "anonymous")["entries"]
    assert "POST /v1/campaigns/{name}/cancel" in [e["action"] for e in entries]


def test_limits_on_the_node(both: Both) -> None:
    made = both.json("limit", "set", "partner-api", "--rate", "50/s", "--concurrency", "4")
    assert (made["rate"], made["concurrency"], made["source"]) == ("50/s", 4, "set")
    paused = both.json("limit", "pause", "partner-api:eu", "--until", "10m")
    assert paused["paused_until"].endswith("Z")
    listed = {d["key"]: d for d in both.same("limit", "list")["limits"]}
    assert listed["partner-api"]["rate"] == "50/s"
    assert listed["partner-api:eu"]["paused_until"] == paused["paused_until"]
    both.json("limit", "resume", "partner-api:eu")
    both.json("limit", "delete", "partner-api")
    assert both.same("limit", "list")["limits"] == []
    bad = both.run("limit", "set", "partner-api", "--rate", "lots", code=2)
    assert "rate" in bad.stderr
    assert "does not exist" in both.run("limit", "delete", "nope", code=1).stderr
