"""A damaged SQLite file never hides behind "ready" (issue #30).

`cp` of a live database gave corrupt copies (4 in 60 under ~700 writes/s), and
`tidings serve` started on them, said ready, and answered 500 to the first write that met
the damage. Here, with real `tidings serve` processes:
- a `cp` copy taken under load, then damaged for certain (which pages a racing copy
  tears is luck, so the test tears one itself), is refused at start: exit code 1 and one
  line naming the file and what is wrong, before anything listens;
- a node told not to check at start (`TIDINGS_SQLITE_CHECK=off`) answers 503 naming the
  damage to the write that meets it, reports not-ready with that reason from then on,
  refuses every later call without touching the file, and stays alive to say so.
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from faults import Serve

from tidings.client import Tidings
from tidings.settings import Settings

START_TIMEOUT_S = 60


def page_size(path: Path) -> int:
    """From the file's header (bytes 16-17, big-endian; 1 means 65536), so a torn copy
    need not be opened to be damaged."""
    with path.open("rb") as f:
        f.seek(16)
        size = int.from_bytes(f.read(2), "big")
    return 65536 if size == 1 else size


def tear_page(path: Path, page: int) -> None:
    """Overwrite the start of a b-tree page (its header: type, cell count, pointers)."""
    size = page_size(path)
    with path.open("r+b") as f:
        f.seek((page - 1) * size)
        f.write(b"\xff" * 64)


def root_page(path: Path, table: str) -> int:
    conn = sqlite3.connect(path)
    try:
        row = conn.execute("SELECT rootpage FROM sqlite_schema WHERE name = ?",
                           (table,)).fetchone()
    finally:
        conn.close()
    assert row is not None, table
    return int(row[0])


def exited(node: Serve) -> int:
    """The exit code of a node expected to stop by itself."""
    try:
        return node.proc.wait(timeout=START_TIMEOUT_S)
    finally:
        node.kill()


def test_a_cp_copy_of_a_live_file_is_refused_at_start(tmp_path: Path) -> None:
    live = tmp_path / "live.db"
    node = Serve(f"sqlite:///{live}", tmp_path, env={"TIDINGS_LOG_LEVEL": "warning"})
    acked = 0
    stop = threading.Event()

    def load(base: str) -> None:
        nonlocal acked
        with httpx.Client(base_url=base, timeout=30) as http:
            i = 0
            while not stop.is_set():
                r = http.post("/v1/queues/jobs/messages", json={"body": f"m{i}"})
                assert r.status_code == 201, r.text
                acked, i = acked + 1, i + 1
                if i % 3 == 0:  # deletes too, as an application does
                    for m in http.get("/v1/queues/jobs/messages?max=2").json()["messages"]:
                        http.delete(f"/v1/queues/jobs/messages/{m['receipt_handle']}")

    try:
        node.wait_ready()
        base = f"http://127.0.0.1:{node.port}"
        assert httpx.post(f"{base}/v1/queues", json={"name": "jobs"}).status_code == 201
        writer = threading.Thread(target=load, args=(base,), daemon=True)
        writer.start()
        deadline = time.monotonic() + 30
        while acked < 300:
            assert writer.is_alive() and time.monotonic() < deadline, acked
            time.sleep(0.01)
        copy = tmp_path / "copy.db"
        shutil.copyfile(live, copy)  # what the operator did: cp of a live file
        stop.set()
        writer.join(30)
    finally:
        node.stop()
    # Whatever the copy caught, it is now damaged for certain, in a table that opening the
    # database does not read (the messages'; its page number is the live file's, as the
    # copy is a byte copy): only the check at start can find it there.
    tear_page(copy, root_page(live, "messages"))

    started = Serve(f"sqlite:///{copy}", tmp_path, env={"TIDINGS_LOG_LEVEL": "warning"},
                    log_name="copy.log")
    assert exited(started) == 1
    said = (tmp_path / "copy.log").read_text().strip().splitlines()
    assert said[-1].startswith(f"error: SQLite database '{copy}' is damaged ("), said
    assert "restore a backup" in said[-1]
    assert not any("Traceback" in line for line in said), said
    assert not started.healthy()


def test_damage_met_while_serving_is_503_and_not_ready_never_500(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with Tidings(settings=Settings(db=f"sqlite:///{db}")) as t:
        t.queues.create_queue("jobs")
        for i in range(20):
            t.queues.send("jobs", f"before-{i}")
    tear_page(db, root_page(db, "messages"))

    # The check at start finds it ...
    refused = Serve(f"sqlite:///{db}", tmp_path, log_name="refused.log")
    assert exited(refused) == 1
    last = (tmp_path / "refused.log").read_text().strip().splitlines()[-1]
    assert last.startswith(f"error: SQLite database '{db}' is damaged"), last

    # ... and without it, the first call that meets the damage says so.
    node = Serve(f"sqlite:///{db}", tmp_path, env={"TIDINGS_SQLITE_CHECK": "off"})
    try:
        node.wait_ready(START_TIMEOUT_S)
        with httpx.Client(base_url=f"http://127.0.0.1:{node.port}", timeout=30) as http:
            meets_the_damage(http, db)
        assert node.alive()
    finally:
        node.stop()
    log = (tmp_path / "serve.log").read_text()
    assert "refuses every call on it from now on" in log, log


def meets_the_damage(http: httpx.Client, db: Path) -> None:
    sent = http.post("/v1/queues/jobs/messages", json={"body": "after"})
    assert sent.status_code == 503, sent.text
    error = sent.json()["error"]
    assert error["code"] == "ServiceUnavailable"
    assert str(db) in error["message"] and "SQLITE_CORRUPT" in error["message"]
    ready = http.get("/health/ready")
    assert ready.status_code == 503, ready.text
    database = ready.json()["checks"]["database"]
    assert not database["ok"] and "damaged" in database["reason"], database
    # Every later call is refused, reads too: nothing more is read from or written into
    # a file whose b-trees are not trusted. The process lives to say why.
    listed = http.get("/v1/queues")
    assert listed.status_code == 503 and "damaged" in listed.text, listed.text
    assert http.get("/health").status_code == 200
    # The engine's loops back off with the reason rather than dying.
    deadline = time.monotonic() + 30
    while not damaged_loops(http.get("/health/ready").json()):
        assert time.monotonic() < deadline, http.get("/health/ready").text
        time.sleep(0.1)


def damaged_loops(ready: dict[str, Any]) -> set[str]:
    """The components other than the database check that report the damage."""
    return {name for name, check in ready["checks"].items()
            if name != "database" and not check["ok"] and "damaged" in check["reason"]}
