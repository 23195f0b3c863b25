"""SQLite's WAL is copied back into the database file by a thread of the driver's own,
so a commit does not wait on a checkpoint; a writer only checkpoints by itself past a
large fallback size."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tidings.store.drivers.sqlite import SQLiteDriver
from tidings.store.drivers.sqlite_checkpoint import (
    FOREGROUND_CHECKPOINT_PAGES,
    WAL_SIZE_LIMIT_BYTES,
    Checkpointer,
)


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


def _locks_of_this_process() -> list[str]:
    """This process's POSIX locks (/proc/locks lines without their ordinal)."""
    with open("/proc/locks") as f:
        return sorted(line.split(":", 1)[1].strip() for line in f
                      if line.split()[4] == str(os.getpid()))


def _resident_bytes(path: str) -> int:
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", path],
                         check=True, capture_output=True, text=True).stdout
    return int(out.strip())


@pytest.mark.skipif(not hasattr(os, "posix_fadvise") or not os.path.exists("/proc/locks"),
                    reason="posix_fadvise and /proc/locks are Linux's")
def test_keeping_the_wal_cached_leaves_sqlites_locks_alone(tmp_path: Path) -> None:
    """Closing a descriptor drops every POSIX lock the process holds on that file: opening
    and closing the `-shm` index (where SQLite keeps its locks) let another process reset
    it under this one, which died of SIGBUS."""
    path = str(tmp_path / "t.db")
    driver = SQLiteDriver(path, now=0)
    try:
        _write(driver, 20)
        assert driver._checkpointer is not None
        with driver.read() as conn:
            conn.execute("BEGIN")
            conn.execute("SELECT COUNT(*) FROM filler").fetchone()  # holds a read lock
            held = _locks_of_this_process()
            assert held  # SQLite's own, on the database file and its -shm
            asked = driver._checkpointer.keep_wal_cached()
            assert _locks_of_this_process() == held
            conn.execute("COMMIT")
        assert asked == min(os.path.getsize(path + "-wal"), WAL_SIZE_LIMIT_BYTES) > 0
    finally:
        driver.close()


@pytest.mark.skipif(shutil.which("fincore") is None or not hasattr(os, "posix_fadvise"),
                    reason="needs posix_fadvise and util-linux's fincore")
def test_wal_pages_the_os_dropped_are_read_back(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # The driver's own thread must not read the WAL back before the test looks.
    monkeypatch.setattr("tidings.store.drivers.sqlite_checkpoint.WAL_CACHE_EVERY_S", 1e12)
    path = str(tmp_path / "t.db")
    driver = SQLiteDriver(path, now=0)
    try:
        _write(driver, 300)  # ~1,000 pages of WAL
        checkpointer = driver._checkpointer
        assert checkpointer is not None
        # Once every frame is copied back, no checkpoint reads the WAL again.
        deadline = time.monotonic() + 10
        while (state := checkpointer.checkpoint())[1] != state[2]:
            assert time.monotonic() < deadline, f"checkpoint stuck at {state}"
            time.sleep(0.02)
        wal = path + "-wal"
        fd = os.open(wal, os.O_RDONLY)
        try:
            os.fsync(fd)  # only clean pages can be dropped
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        wanted = min(os.path.getsize(wal), WAL_SIZE_LIMIT_BYTES)
        assert _resident_bytes(wal) < wanted // 2  # the OS dropped them (as it does when idle)
        assert checkpointer.keep_wal_cached() == wanted
        deadline = time.monotonic() + 10
        while _resident_bytes(wal) < wanted - 4096:
            assert time.monotonic() < deadline, "the WAL was not read back within 10 s"
            time.sleep(0.05)
    finally:
        driver.close()


def test_no_wal_yet_is_nothing_to_keep_cached(tmp_path: Path) -> None:
    checkpointer = Checkpointer(str(tmp_path / "absent.db"), every_s=60)
    try:
        assert checkpointer.keep_wal_cached() == 0
    finally:
        checkpointer.close()
