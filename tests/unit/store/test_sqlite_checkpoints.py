"""SQLite's WAL is copied back into the database file by a thread of the driver's own,
so a commit does not wait on a checkpoint; a writer only checkpoints by itself past a
large fallback size."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tidings.store.drivers.sqlite import FOREGROUND_CHECKPOINT_PAGES, SQLiteDriver


def _write(driver: SQLiteDriver, commits: int) -> None:
    with driver.tx() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS filler (id INTEGER PRIMARY KEY, body TEXT)")
    for i in range(commits):
        with driver.tx() as conn:
            conn.execute("INSERT INTO filler (body) VALUES (?)", (f"{i:08d}" * 500,))


def test_the_wal_is_checkpointed_in_the_background(tmp_path: Path) -> None:
    path = str(tmp_path / "t.db")
    driver = SQLiteDriver(path, now=0)
    try:
        (autocheckpoint,) = driver._conn.execute("PRAGMA wal_autocheckpoint").fetchone()
        assert autocheckpoint == FOREGROUND_CHECKPOINT_PAGES
        before = os.path.getsize(path)
        _write(driver, 400)  # ~1,200 WAL pages: far below the writer's own threshold
        # Only a checkpoint grows the database file itself; no writer ran one.
        deadline = time.monotonic() + 10
        while os.path.getsize(path) < before + 1_000_000:
            assert time.monotonic() < deadline, "no background checkpoint within 10 s"
            time.sleep(0.02)
    finally:
        driver.close()


def test_closing_the_store_ends_its_checkpointer(tmp_path: Path) -> None:
    driver = SQLiteDriver(str(tmp_path / "t.db"), now=0)
    checkpointer = driver._checkpointer
    assert checkpointer is not None
    thread = checkpointer._thread
    assert thread.is_alive()
    driver.close()
    assert not thread.is_alive()


def test_an_in_memory_store_has_no_checkpointer() -> None:
    driver = SQLiteDriver(":memory:", now=0)
    try:
        assert driver._checkpointer is None
    finally:
        driver.close()
