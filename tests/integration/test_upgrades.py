"""Upgrades, on both backends, with real `tidings` processes: a database made by the first
release brought to this one's schema with every row kept; a database a newer release
migrated refused at start (exit 3, both versions named); a running node whose database a
newer node migrates under it stopping cleanly (exit 3, the reason in its log), or, when
the newer migrations are additive, running on with a warning."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_runner import Cli
from faults import Serve
from old_schema import FIRST_RELEASE, NEWER, SECRET, TABLES, dump, first_release, raw

from tidings.client import Tidings
from tidings.clock import SystemClock
from tidings.errors import SchemaTooOld
from tidings.model.receipts import ReceiptSigner
from tidings.settings import Settings
from tidings.store import Create
from tidings.store.migrate import SchemaRecord
from tidings.store.sqlfiles import migrations
from tidings.version import VERSION

pytestmark = pytest.mark.timeout(240)


def backend(url: str) -> str:
    return "sqlite" if url.startswith("sqlite") else "postgres"


def newest(url: str) -> tuple[int, str]:
    version, name, _ = migrations(backend(url))[-1]
    return version, name


def as_newer_release(url: str, kind: str, cwd: Path) -> None:
    """Open the database as tidings 9.9.0 would, whose migration 99 is `kind`."""
    (cwd / "newer.py").write_text(NEWER)
    done = subprocess.run([sys.executable, "newer.py", url, kind], cwd=cwd,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


# the first release's database, upgraded -----------------------------------------------------

def test_a_first_release_database_upgrades_keeping_every_row(db_url: str,
                                                             tmp_path: Path) -> None:
    now = SystemClock().now_ms()
    ids = first_release(db_url, now)
    before = dump(db_url)
    assert all(before[table] for table in TABLES), "every table has rows to keep"

    cli = Cli(db_url, tmp_path)
    upgraded = cli.run("migrate")
    assert upgraded.returncode == 0, upgraded.stderr
    top, name = newest(db_url)
    for version, step, _ in migrations(backend(db_url))[FIRST_RELEASE:]:
        assert f"applied migration {version:04d} {step} in " in upgraded.stderr
    assert f"from schema {FIRST_RELEASE} to {top}" in upgraded.stderr
    assert f"schema {top} ({name}), migrated by tidings {VERSION}" in upgraded.stdout

    after = dump(db_url)
    assert set(before["meta"]) <= set(after["meta"])  # (+ the release that migrated it)
    for table in TABLES:
        if table != "meta":
            assert after[table] == before[table], table
    with raw(db_url) as db:
        # what the migrations moved: the counts out of `queues`, done jobs into job_keys,
        # a move task being cancelled to cancelled
        counts = dict(db.run("SELECT queue_id, sum(n) FROM queue_counts GROUP BY queue_id"))
        assert {k: int(v) for k, v in counts.items()} == {
            ids["jobs"]: 3, ids["jobs-dlq"]: 1, ids["orders.fifo"]: 1}
        assert db.run("SELECT queue_id, job_key, state, done_at FROM job_keys") == [
            (ids["jobs"], "invoice:0", "done", now - 5000)]
        assert db.run("SELECT handle, status, moved, to_move FROM move_tasks ORDER BY 1") == [
            ("move-1", "COMPLETED", 2, 2), ("move-2", "CANCELLED", 0, 1)]
        assert [v for v, in db.run("SELECT version FROM schema_migrations ORDER BY 1")] == \
            list(range(1, top + 1))
        record = SchemaRecord.from_json(db.one("SELECT value FROM meta WHERE key = 'schema'"))
    assert record is not None and (record.version, record.migrated_by) == (top, VERSION)

    # ... and the services read them as they were written
    with Tidings(settings=Settings(db=db_url), create=Create.NOTHING) as t:
        counts_now = t.queues.describe("jobs").counts
        assert (counts_now.visible, counts_now.in_flight, counts_now.delayed) == (1, 1, 1)
        # the leased message's receipt (signed with the key the first release kept)
        receipt = ReceiptSigner(SECRET).sign(ids["jobs"], ids["leased"], 7_777)
        t.queues.delete("jobs", receipt)
        [got] = t.queues.receive("jobs", max_messages=10, wait_s=0)
        assert got.body == '{"type": "invoice", "id": 1}'
        [dead], _ = t.queues.peek("jobs-dlq")
        assert dead.message.last_error == "handler raised: ValueError"
        assert dead.dead_letter_source is not None and dead.dead_letter_source.endswith(":jobs")
        again = t.queues.send("orders.fifo", '{"order": 9}', group_id="customer-9",
                              deduplication_id="dedup-9")
        assert again.duplicate and again.message_id == "m-fifo"
        nightly = t.schedules.get("nightly")
        assert (nightly.spec.expression, nightly.spec.timezone,
                nightly.spec.target.destination) == (
            "cron(0 2 * * ? *)", "Europe/Paris", "jobs")
        assert t.schedules.get("alice-welcome", "spring").next_fire_at == 4_076_060_400_000
        assert t.email.render("welcome", {"name": "Ada"}).subject == "Welcome Ada"
        assert t.email.suppression("bounced@example.org") is not None
        [delivery], _ = t.email.log(recipient="bob@example.org")
        assert (delivery.id, delivery.state.value) == ("exec-1", "SENT")
        [campaign] = t.campaigns.list()
        assert [s.name for s in campaign.steps] == ["welcome", "nudge"]


def test_a_command_that_only_reads_does_not_migrate_an_older_database(
        db_url: str, tmp_path: Path) -> None:
    first_release(db_url, SystemClock().now_ms())
    cli = Cli(db_url, tmp_path)
    for command in (("queue", "list"), ("schedule", "list"), ("migrate", "--check")):
        r = cli.run(*command)
        assert r.returncode == 1, (command, r.stderr)
        assert f"is at schema {FIRST_RELEASE}; this is tidings {VERSION}" in r.stderr
        assert "tidings migrate" in r.stderr
    with pytest.raises(SchemaTooOld):
        Tidings(settings=Settings(db=db_url), create=Create.NOTHING)
    with raw(db_url) as db:
        assert db.one("SELECT max(version) FROM schema_migrations") == FIRST_RELEASE


# a database from a newer release --------------------------------------------------------------

def test_a_future_migration_is_refused_naming_both_versions(db_url: str,
                                                            tmp_path: Path) -> None:
    cli = Cli(db_url, tmp_path)
    cli.ok("migrate")
    with raw(db_url) as db:
        db.run("INSERT INTO schema_migrations VALUES (99, 'from_the_future', 0)")
    top, name = newest(db_url)
    (tmp_path / "noop.py").write_text("from tidings import App\napp = App(queue='jobs')\n")
    for command in (("serve", "--port", "0"), ("worker", "--app", "noop:app"),
                    ("queue", "list"), ("migrate",)):
        r = cli.run(*command)
        assert r.returncode == 3, (command, r.stdout, r.stderr)
        assert ("migration 99 (from_the_future), applied by a tidings release that did not "
                "record its version") in r.stderr
        assert f"this is tidings {VERSION}, which knows migrations up to {top} ({name})" \
            in r.stderr
        assert "Traceback" not in r.stderr
    with raw(db_url) as db:  # refused before anything was written
        assert db.one("SELECT count(*) FROM schema_migrations") == top + 1


def test_a_database_a_newer_release_migrated_names_that_release(db_url: str,
                                                               tmp_path: Path) -> None:
    cli = Cli(db_url, tmp_path)
    cli.ok("migrate")
    as_newer_release(db_url, "breaking", tmp_path)
    r = cli.run("queue", "list")
    assert r.returncode == 3
    assert "migration 99 (from_the_future), applied by tidings 9.9.0" in r.stderr


def test_a_newer_additive_migration_leaves_this_release_running_with_a_warning(
        db_url: str, tmp_path: Path) -> None:
    cli = Cli(db_url, tmp_path)
    cli.ok("migrate")
    as_newer_release(db_url, "additive", tmp_path)
    r = cli.run("queue", "list")
    assert r.returncode == 0, r.stderr
    assert ("migration 99 (from_the_future), applied by tidings 9.9.0; this is tidings "
            f"{VERSION}") in r.stderr
    assert "additive" in r.stderr


# a node whose database is migrated under it ------------------------------------------------------

def serve_log(tmp_path: Path) -> str:
    return (tmp_path / "serve.log").read_text(errors="replace")


def wait_for(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def started_node(db_url: str, tmp_path: Path) -> Serve:
    node = Serve(db_url, tmp_path)
    node.wait_ready()
    return node


@pytest.mark.parametrize("kind", ["breaking", "rename"])
def test_a_node_stops_cleanly_when_a_newer_node_migrates_under_it(
        db_url: str, tmp_path: Path, kind: str) -> None:
    """`breaking`: an unknown migration that changes nothing this node uses (the schema
    guard finds it); `rename`: one that renames the messages table, on which this node's
    loops fail first: either way the node stops with the reason, not a crash."""
    node = started_node(db_url, tmp_path)
    try:
        as_newer_release(db_url, kind, tmp_path)
        node.proc.wait(timeout=60)
    finally:
        node.kill()
    log = serve_log(tmp_path)
    assert node.proc.returncode == 3, log[-3000:]
    assert ("the database was migrated by a newer tidings: it has migration 99 "
            "(from_the_future), applied by tidings 9.9.0") in log
    assert "This node stops." in log
    assert "died; stopping the node" not in log and "CRITICAL" not in log


def test_a_node_keeps_running_when_a_newer_node_adds_an_additive_migration(
        db_url: str, tmp_path: Path) -> None:
    node = started_node(db_url, tmp_path)
    try:
        as_newer_release(db_url, "additive", tmp_path)
        wait_for(lambda: "so this node keeps running" in serve_log(tmp_path), 30,
                 "the schema guard's warning")
        assert node.alive() and node.healthy()
    finally:
        node.stop()
