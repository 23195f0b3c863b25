"""`tidings queue …` as users run it: a real subprocess against a SQLite file."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runner import Cli

from tidings.client import Tidings
from tidings.settings import Settings


@pytest.fixture
def cli(tmp_path: Path, db_url: str) -> Cli:
    c = Cli(db_url, tmp_path)
    c.ok("migrate")  # the database a node made (making one is tested on its own)
    return c


def test_queue_lifecycle(cli: Cli) -> None:
    created = cli.json("queue", "create", "work", "--visibility-timeout", "60",
                       "--tag", "team=core")
    assert created["name"] == "work"
    assert created["attributes"]["visibility_timeout_s"] == 60
    assert created["tags"] == {"team": "core"}
    assert "work" in cli.ok("queue", "list")  # the human table
    assert [q["name"] for q in cli.json("queue", "list", "--prefix", "wo")["queues"]] == ["work"]
    assert cli.json("queue", "list", "--prefix", "zz") == {"queues": []}

    sent = cli.json("queue", "send", "work", "hello", "--attr", "kind=greeting")
    assert len(sent["md5_of_body"]) == 32
    cli.json("queue", "send", "work", "-", stdin="from stdin")
    assert cli.json("queue", "get", "work")["counts"] == {
        "visible": 2, "in_flight": 0, "delayed": 0}

    got = cli.json("queue", "receive", "work", "-n", "10", "--delete")["messages"]
    assert sorted(m["body"] for m in got) == ["from stdin", "hello"]
    greeting = next(m for m in got if m["body"] == "hello")
    assert greeting["attributes"]["kind"]["string_value"] == "greeting"
    assert cli.json("queue", "get", "work")["counts"] == {
        "visible": 0, "in_flight": 0, "delayed": 0}

    cli.ok("queue", "send", "work", "x", "--delay", "3600")
    assert cli.json("queue", "get", "work")["counts"]["delayed"] == 1
    assert cli.json("queue", "purge", "work") == {"queue": "work", "purged": 1}
    assert cli.json("queue", "get", "work")["counts"]["delayed"] == 0

    cli.ok("queue", "delete", "work")
    assert cli.json("queue", "list") == {"queues": []}


def test_human_output_prints_bodies_as_written(cli: Cli) -> None:
    cli.ok("queue", "create", "h")
    cli.ok("queue", "send", "h", "[bold]not markup[/bold]")
    out = cli.ok("queue", "receive", "h")
    assert "[bold]not markup[/bold]" in out


def test_bad_values_exit_2_naming_the_field(cli: Cli) -> None:
    r = cli.run("queue", "create", "q", "--visibility-timeout", "50000")
    assert r.returncode == 2
    assert r.stderr.startswith("error: VisibilityTimeout: must be from 0 to 43200")
    assert r.stdout == ""
    r = cli.run("queue", "create", "bad name!")
    assert r.returncode == 2 and "error: QueueName:" in r.stderr
    r = cli.run("queue", "create", "q", "--tag", "novalue")
    assert r.returncode == 2 and "error: --tag: must look like key=value" in r.stderr
    r = cli.run("queue", "create", "q", "--dlq", "d")
    assert r.returncode == 2 and "--max-receive-count" in r.stderr
    r = cli.run("queue", "create", "q", "--delay", "soon")  # click's own usage error
    assert r.returncode == 2 and "--delay" in r.stderr


def test_missing_queue_and_conflicts_exit_1(cli: Cli) -> None:
    for args in (("queue", "get", "nope"), ("queue", "send", "nope", "x"),
                 ("queue", "receive", "nope"), ("queue", "delete", "nope")):
        r = cli.run(*args)
        assert r.returncode == 1, args
        assert r.stderr.strip() == "error: queue 'nope' does not exist"
    cli.ok("queue", "create", "c", "--delay", "1")
    r = cli.run("queue", "create", "c", "--delay", "2")
    assert r.returncode == 1 and r.stderr.startswith("error: ")


def _dead_letter(db: str, source: str, bodies: list[str]) -> None:
    """Put messages in the source's DLQ the way it happens: received past maxReceiveCount."""
    with Tidings(settings=Settings(db=db)) as t:
        for body in bodies:
            t.queues.send(source, body)
        for m in t.queues.receive(source, 10):
            t.queues.change_visibility(source, m.receipt_handle, 0)
        assert t.queues.receive(source, 10) == []  # moved to the DLQ instead


def test_redrive(cli: Cli) -> None:
    cli.ok("queue", "create", "dlq")
    cli.ok("queue", "create", "src", "--dlq", "dlq", "--max-receive-count", "1")
    _dead_letter(cli.db, "src", ["a", "b", "c"])
    assert cli.json("queue", "get", "dlq")["counts"]["visible"] == 3

    moved = cli.json("queue", "redrive", "dlq")
    assert moved == {"queue": "dlq", "destination": None, "moved": 3}
    assert cli.json("queue", "get", "src")["counts"]["visible"] == 3

    cli.ok("queue", "create", "other")
    cli.ok("queue", "purge", "src")
    _dead_letter(cli.db, "src", ["d", "e", "f"])
    out = cli.ok("queue", "redrive", "dlq", "--to", "other", "--max-per-second", "2")
    assert "moved 2 so far" in out and "moved 3 message(s)" in out
    assert cli.json("queue", "get", "other")["counts"]["visible"] == 3

    r = cli.run("queue", "redrive", "src")
    assert r.returncode == 2 and "SourceArn" in r.stderr


def test_help_lists_the_commands(cli: Cli) -> None:
    top = cli.ok("--help")
    for command in ("serve", "worker", "queue"):
        assert command in top
    queue = cli.ok("queue", "--help")
    for command in ("create", "list", "get", "delete", "purge", "send", "receive", "redrive"):
        assert command in queue
    assert "--port" in cli.ok("serve", "--help")
    assert "--app" in cli.ok("worker", "--help")
