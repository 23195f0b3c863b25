"""Wake-ups between the processes of one SQLite file (`tidings.notify.sqlite`): a write in
one process wakes the waiters of another at once, a process that never waits leaves no
trace, a socket left by a killed process is cleared, and a lost wake-up costs latency only.

Every wait here has a timeout far above what a wake-up takes (10 s against milliseconds),
so a broken wake-up fails the test instead of being hidden by a poll."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tidings.notify.sqlite import SqliteNotifier, notify_dir

LISTENER = """
import sys, time
from tidings.notify.sqlite import SqliteNotifier
n = SqliteNotifier(sys.argv[1])
seen = n.version("queue:7")
n._ensure_listening("queue:7")
print("listening", flush=True)
woken = n.wait_sync("queue:7", seen, 10)
print("woken" if woken else "timed out", flush=True)
if sys.argv[2] == "close":
    n.close()
else:
    time.sleep(60)
"""


def _listener(db: Path, end: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", LISTENER, str(db), end],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "listening"
    return proc


def test_a_notify_in_one_process_wakes_a_waiter_in_another(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    proc = _listener(db, "close")
    sender = SqliteNotifier(str(db))
    start = time.monotonic()
    sender.notify("queue:7")
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "woken"
    assert time.monotonic() - start < 5  # the wait's timeout is 10 s
    assert proc.wait(timeout=10) == 0
    proc.stdout.close()
    sender.close()
    assert list(notify_dir(str(db)).iterdir()) == []  # a clean close takes its socket


def test_waiters_in_one_process_are_woken_by_another_notifier_there(tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    a, b = SqliteNotifier(db), SqliteNotifier(db)
    try:
        seen = a.version("schedules")
        a._ensure_listening("schedules")
        b.notify("schedules")
        assert a.wait_sync("schedules", seen, 10)
    finally:
        a.close()
        b.close()


def test_a_send_goes_only_to_the_processes_waiting_on_its_channel(tmp_path: Path) -> None:
    """The node's dispatcher process waits on schedules only: the node's own sends to a
    queue must not cost it a datagram each."""
    db = str(tmp_path / "t.db")
    dispatcher, consumer, sender = (SqliteNotifier(db) for _ in range(3))
    try:
        dispatcher._ensure_listening("schedules")
        consumer._ensure_listening("queue:7")
        assert {c: len(p) for c, p in sender._current_peers().items()} == {
            "schedules": 1, "queue:7": 1}
        seen = consumer.version("queue:7")
        sender.notify("queue:7")
        assert consumer.wait_sync("queue:7", seen, 10)
    finally:
        for n in (dispatcher, consumer, sender):
            n.close()
    assert list(notify_dir(db).iterdir()) == []  # sockets and their links are gone


def test_a_process_that_never_waits_leaves_nothing(tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    n = SqliteNotifier(db)
    n.notify("queue:1")  # no listener: nothing to send to, nothing made
    n.close()
    assert not notify_dir(db).exists()


def test_a_killed_listeners_socket_is_cleared_by_the_next_sender(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    proc = _listener(db, "stay")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.stdout is not None
    proc.stdout.close()
    sockets = list(notify_dir(str(db)).iterdir())
    assert len(sockets) == 2  # its socket and its link for queue:7, left by the kill
    sender = SqliteNotifier(str(db))
    sender.notify("queue:7")  # refused: nobody reads it, so it goes
    sender.close()
    assert list(notify_dir(str(db)).iterdir()) == []


def test_a_long_path_uses_a_folder_named_after_it(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    db = str(deep / "t.db")
    folder = notify_dir(db)
    assert not str(folder).startswith(str(deep))
    assert notify_dir(db) == folder  # the same for every process of the file
    a, b = SqliteNotifier(db), SqliteNotifier(db)
    try:
        seen = a.version("queue:1")
        a._ensure_listening("queue:1")
        b.notify("queue:1")
        assert a.wait_sync("queue:1", seen, 10)
    finally:
        a.close()
        b.close()


def test_an_unwritable_folder_falls_back_to_polling(tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    if os.geteuid() == 0:
        # root writes anywhere: make the folder's place a file instead
        db = tmp_path / "t.db"
        blocker = notify_dir(str(db))
        blocker.write_text("not a folder")
    else:
        (tmp_path / "ro").mkdir(mode=0o500)
        db = tmp_path / "ro" / "t.db"
        blocker = None
    n = SqliteNotifier(str(db))
    caplog.set_level(logging.WARNING, logger="tidings.notify")
    try:
        seen = n.version("queue:1")
        assert not n.wait_sync("queue:1", seen, 0.05)  # a timeout, not an error
        assert "found by polling" in caplog.text
        n.notify("queue:1")  # its own notifications still wake it
        assert n.wait_sync("queue:1", seen, 1)
    finally:
        n.close()
        if blocker is not None:
            blocker.unlink()
