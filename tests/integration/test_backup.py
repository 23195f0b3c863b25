"""`tidings backup` and `tidings restore` (issue #30), with real processes: a `tidings
serve` node written to by a client thread (sends, receives, deletes) while the CLI takes a
backup, then the backup restored and read back row by row, on SQLite and PostgreSQL.

What a backup promises (docs/operations.md): one instant. Every message whose send was
acknowledged before the backup's `snapshot_at` is in it unless its delete was begun
before the backup returned; none whose delete was acknowledged before that instant is;
none whose send began after the backup returned is. Messages received and not deleted
are in it too, in flight: their leases run out after a restore and they come back.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
from cli_runner import Cli
from faults import Serve
from tests.conftest import module_pg_schema, pg_url

from tidings.client import Tidings
from tidings.settings import Settings

ACKED_BEFORE = 300  # sends acknowledged before the backup starts
ACKED_AFTER = 50  # and after it returned, to show that they are not in it


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Load:
    """A client of a live node: sends one message at a time and, every fourth send,
    receives one and deletes it, recording when each call began and returned."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.sent: dict[str, tuple[int, int]] = {}  # body -> (began, acknowledged)
        self.deleted: dict[str, tuple[int, int]] = {}
        self.stopping = threading.Event()
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            with httpx.Client(base_url=self.base, timeout=30) as http:
                i = 0
                while not self.stopping.is_set():
                    body, began = f"m{i:06d}", now_ms()
                    r = http.post("/v1/queues/jobs/messages", json={"body": body})
                    assert r.status_code == 201, r.text
                    self.sent[body] = (began, now_ms())
                    i += 1
                    if i % 4 == 0:
                        self._delete_one(http)
        except BaseException as exc:  # noqa: BLE001 - reported by wait_for
            self.failure = exc

    def _delete_one(self, http: httpx.Client) -> None:
        got = http.get("/v1/queues/jobs/messages", params={"max": 1, "wait": 0})
        assert got.status_code == 200, got.text
        for m in got.json()["messages"]:
            began = now_ms()
            r = http.delete(f"/v1/queues/jobs/messages/{m['receipt_handle']}")
            assert r.status_code == 204, r.text
            self.deleted[m["body"]] = (began, now_ms())

    def wait_for(self, acked: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while len(self.sent) < acked:
            assert self.failure is None, self.failure
            assert time.monotonic() < deadline, f"only {len(self.sent)} sends acknowledged"
            time.sleep(0.01)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(30)
        assert self.failure is None, self.failure


def bodies(url: str) -> set[str]:
    """The bodies of queue `jobs`'s messages, whatever their state, read from the table."""
    sql = ("SELECT m.body FROM messages m JOIN queues q ON q.id = m.queue_id "
           "WHERE q.name = 'jobs'")
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        try:
            return {r[0] for r in conn.execute(sql)}
        finally:
            conn.close()
    with psycopg.connect(url) as pg:
        return {r[0] for r in pg.execute(sql)}


def integrity(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [r[0] for r in conn.execute("PRAGMA integrity_check")]
    finally:
        conn.close()


def instant(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def test_a_backup_taken_under_load_restores_what_was_acknowledged(
        db_url: str, tmp_path: Path) -> None:
    node = Serve(db_url, tmp_path, env={"TIDINGS_LOG_LEVEL": "warning"})
    cli = Cli(db_url, tmp_path)
    dest = tmp_path / "backup.db"
    try:
        node.wait_ready()
        base = f"http://127.0.0.1:{node.port}"
        assert httpx.post(f"{base}/v1/queues", json={"name": "jobs"}).status_code == 201
        load = Load(base)
        load.thread.start()
        load.wait_for(ACKED_BEFORE)
        doc = cli.json("backup", str(dest))
        returned = now_ms()
        load.wait_for(len(load.sent) + ACKED_AFTER)
        load.stop()
        # While the node serves, a restore onto its database is refused, naming it.
        refused = cli.run("restore", str(dest), "--force")
        assert refused.returncode == 1, refused.stderr
        assert "node on" in refused.stderr and "stop" in refused.stderr, refused.stderr
    finally:
        node.stop()
    snapshot = instant(doc["snapshot_at"])
    assert doc["backup"] == str(dest) and doc["bytes"] == dest.stat().st_size > 0
    assert doc["schema_version"] >= 13 and doc["checked"]
    began = min(b for b, _ in load.sent.values())
    assert began < snapshot < returned

    if db_url.startswith("sqlite"):  # beside the original, which stays as it was
        target = f"sqlite:///{tmp_path}/restored.db"
        restored = Cli(target, tmp_path).json("restore", str(dest))
        assert restored["replaced"] is False
        assert integrity(tmp_path / "restored.db") == ["ok"]
    else:  # over the original: a schema keeps its name through pg_dump and pg_restore
        target = db_url
        restored = Cli(target, tmp_path).json("restore", str(dest), "--force")
        assert restored["replaced"] is True
    assert restored["schema_version"] == doc["schema_version"]

    found = bodies(target)
    must = {b for b, (_, acked) in load.sent.items()
            if acked < snapshot and (b not in load.deleted or load.deleted[b][0] > returned)}
    gone = {b for b, (_, acked) in load.deleted.items() if acked < snapshot}
    later = {b for b, (began_at, _) in load.sent.items() if began_at > returned}
    assert len(must) >= ACKED_BEFORE // 3 and gone and len(later) >= ACKED_AFTER // 2
    assert must - found == set(), "acknowledged before the backup, missing from it"
    assert found & gone == set(), "deleted before the backup, back after the restore"
    assert found & later == set(), "sent after the backup returned, in it"
    # The restored database is one a node opens and serves from.
    with Tidings(settings=Settings(db=target)) as t:
        counts = t.queues.describe("jobs").counts
        assert counts.visible + counts.in_flight + counts.delayed == len(found)


def test_backup_never_overwrites_and_restore_checks_what_it_is_given(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    cli = Cli(db, tmp_path)
    cli.ok("queue", "create", "jobs")
    cli.ok("queue", "send", "jobs", "kept")
    dest = tmp_path / "b.db"
    (tmp_path / "t.db").chmod(0o600)  # it holds the signing keys: so does its backup
    cli.json("backup", str(dest))
    assert dest.stat().st_mode & 0o777 == 0o600
    first = dest.read_bytes()
    again = cli.run("backup", str(dest))
    assert again.returncode == 1 and "already exists; --force" in again.stderr, again.stderr
    assert dest.read_bytes() == first
    cli.ok("queue", "send", "jobs", "newer")
    assert cli.json("backup", str(dest), "--force")["bytes"] == dest.stat().st_size
    missing_folder = cli.run("backup", str(tmp_path / "no" / "such" / "b.db"))
    assert missing_folder.returncode == 2 and "does not exist" in missing_folder.stderr

    # A damaged backup is refused with the reason, and nothing is created or left over.
    damaged = tmp_path / "damaged.db"
    shutil.copyfile(dest, damaged)
    with damaged.open("r+b") as f:
        f.seek(root_page(damaged, "messages") * 4096 - 4096)
        f.write(b"\xff" * 64)
    fresh = Cli(f"sqlite:///{tmp_path}/fresh.db", tmp_path)
    bad = fresh.run("restore", str(damaged))
    assert bad.returncode == 2 and "is damaged" in bad.stderr, bad.stderr
    assert "nothing was restored" in bad.stderr
    for name in ("not-sqlite", "not-tidings"):
        other = tmp_path / f"{name}.db"
        if name == "not-sqlite":
            other.write_text("hello")
        else:
            sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
        refused = fresh.run("restore", str(other))
        assert refused.returncode == 2, refused.stderr
        assert ("not a SQLite database" if name == "not-sqlite" else
                "holds no tidings database") in refused.stderr
    assert not (tmp_path / "fresh.db").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    gone = fresh.run("restore", str(tmp_path / "nope.db"))
    assert gone.returncode == 1 and "no backup at" in gone.stderr

    # Over an existing database: only with --force, and its stale WAL goes with it (were
    # it played into the restored file, the old pages would land on the new ones).
    existing = cli.run("restore", str(dest))
    assert existing.returncode == 1 and "--force" in existing.stderr
    wal = stale_wal(tmp_path / "t.db")
    (tmp_path / "t.db").chmod(0o640)
    cli.json("restore", str(dest), "--force")
    assert not wal.exists()
    assert (tmp_path / "t.db").stat().st_mode & 0o777 == 0o640  # the replaced file's
    assert integrity(tmp_path / "t.db") == ["ok"]
    assert bodies(db) == {"kept", "newer"}


def test_a_damaged_database_gives_no_backup(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    cli = Cli(f"sqlite:///{db}", tmp_path)
    cli.ok("queue", "create", "jobs")
    cli.ok("queue", "send", "jobs", "x")
    with db.open("r+b") as f:
        f.seek(root_page(db, "messages") * 4096 - 4096)
        f.write(b"\xff" * 64)
    done = cli.run("backup", str(tmp_path / "b.db"))
    assert done.returncode == 1 and "is damaged" in done.stderr, done.stderr
    assert not (tmp_path / "b.db").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_postgres_restore_is_one_transaction_into_its_own_schema(
        pg_schema: str, tmp_path: Path) -> None:
    url = pg_url(pg_schema)
    cli = Cli(url, tmp_path)
    cli.ok("queue", "create", "jobs")
    cli.ok("queue", "send", "jobs", "in-the-backup")
    dest = tmp_path / "b.dump"
    assert cli.json("backup", str(dest))["method"].startswith("pg_dump")
    cli.ok("queue", "send", "jobs", "after-the-backup")
    # A damaged archive: refused before anything is touched.
    damaged = tmp_path / "damaged.dump"
    damaged.write_bytes(dest.read_bytes()[: dest.stat().st_size // 2])
    bad = cli.run("restore", str(damaged), "--force")
    assert bad.returncode == 2 and "damaged" in bad.stderr, bad.stderr
    assert bodies(url) == {"in-the-backup", "after-the-backup"}
    # Another schema: pg_restore cannot rename one, so it is refused, saying so.
    with module_pg_schema() as other:
        elsewhere = Cli(pg_url(other), tmp_path).run("restore", str(dest))
        assert elsewhere.returncode == 2 and "cannot rename a schema" in elsewhere.stderr
    # Into a schema that is gone (a new cluster, a dropped schema): no --force needed.
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(f'DROP SCHEMA "{pg_schema}" CASCADE')
    assert cli.json("restore", str(dest))["replaced"] is False
    assert bodies(url) == {"in-the-backup"}


def test_postgres_backup_without_pg_dump_says_what_to_install(
        pg_schema: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    env.update(TIDINGS_DB=pg_url(pg_schema), PATH=str(tmp_path))  # no pg_dump there
    done = subprocess.run([sys.executable, "-m", "tidings", "backup", str(tmp_path / "b")],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 1, done.stderr
    assert "pg_dump is not installed" in done.stderr
    assert "postgresql-client" in done.stderr and "docs/operations.md" in done.stderr


def root_page(path: Path, table: str) -> int:
    conn = sqlite3.connect(path)
    try:
        row: Any = conn.execute("SELECT rootpage FROM sqlite_schema WHERE name = ?",
                                (table,)).fetchone()
        return int(row[0])
    finally:
        conn.close()


def stale_wal(path: Path) -> Path:
    """Leave a WAL beside `path` that belongs to an older state of it, as a node killed
    with -9 leaves one: commits kept in the WAL (no checkpoint), the WAL copied aside,
    the connection closed (which folds the WAL in and removes it), the copy put back."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA wal_autocheckpoint=0")
    for i in range(50):
        conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (f"stale-{i}", "x" * 500))
    wal = Path(f"{path}-wal")
    shutil.copyfile(wal, tmp := Path(f"{path}.wal-copy"))
    conn.close()
    tmp.rename(wal)
    assert wal.stat().st_size > 0
    return wal



def test_restore_sees_any_process_with_the_file_open_and_none_once_it_is_killed(
        tmp_path: Path) -> None:
    """Not a node: a plain connection in another process (an application, a CLI command)
    is seen too, and a process killed with -9 lets go at once (no heartbeat to outlive)."""
    db = tmp_path / "t.db"
    cli = Cli(f"sqlite:///{db}", tmp_path)
    cli.ok("queue", "create", "jobs")
    dest = tmp_path / "b.db"
    cli.json("backup", str(dest))
    with subprocess.Popen(
            [sys.executable, "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
             "c.execute('SELECT count(*) FROM queues').fetchone(); print('open', flush=True)"
             "; sys.stdin.read()", str(db)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "open\n"
            refused = cli.run("restore", str(dest), "--force")
            assert refused.returncode == 1, refused.stderr
            assert "is open in another process" in refused.stderr
            assert "your application" in refused.stderr  # no node heart-beats on it
        finally:
            holder.kill()
    assert cli.json("restore", str(dest), "--force")["replaced"] is True
