"""Two processes writing one SQLite file: the waiting one gets the write lock as soon as the
other lets go, not when SQLite's busy handler next wakes (it sleeps 100 ms at a time once
it has waited a third of a second). A web process sending jobs next to a busy `tidings
serve` is this case. SQLite only (PostgreSQL has no file lock)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tidings.client import Tidings
from tidings.settings import Settings
from tidings.store.drivers import writer_lock

#: How long the other process holds each transaction: a busy handler that started waiting
#: with it slept through 328 ms in steps and is in a 100 ms sleep when it ends, so it
#: would wake ~78 ms after the release.
HOLD_S = 0.35
ROUNDS = 5

HOLDER = textwrap.dedent("""
    import sys, time
    from tidings.client import Tidings
    from tidings.settings import Settings

    with Tidings(settings=Settings(db=sys.argv[1])) as t:
        for _ in range(int(sys.argv[2])):
            with t.store.driver.tx() as conn:
                conn.execute("UPDATE queues SET modified_at = modified_at")
                print("holding", flush=True)
                time.sleep(float(sys.argv[3]))
                released = time.time()  # then COMMIT (well under a millisecond) and let go
            print("released", released, flush=True)
            sys.stdin.readline()  # the next round once the other side has written
""")


def test_a_writer_waiting_on_another_process_goes_on_when_it_commits(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/shared.db"
    with Tidings(settings=Settings(db=url)) as t:
        t.queues.create_queue("jobs")
        delays = []
        with subprocess.Popen([sys.executable, "-c", HOLDER, url, str(ROUNDS), str(HOLD_S)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True) as holder:
            assert holder.stdin is not None and holder.stdout is not None
            for _ in range(ROUNDS):
                assert holder.stdout.readline().strip() == "holding"
                t.queues.send("jobs", "waited for the other process")  # blocks meanwhile
                done = time.time()
                word, released = holder.stdout.readline().split()
                assert word == "released"
                delays.append(done - float(released))
                holder.stdin.write("\n")
                holder.stdin.flush()
            assert holder.wait(30) == 0
        assert t.queues.describe("jobs").counts.visible == ROUNDS  # every send went in
    # Each send waited for the commit (it cannot be written before it), and went on
    # within a few milliseconds of it: one slow round is allowed for a busy machine.
    assert min(delays) > -0.005, delays
    assert sorted(delays)[-2] < 0.025, delays


KILLED = textwrap.dedent("""
    import sys, time
    from tidings.client import Tidings
    from tidings.settings import Settings

    with Tidings(settings=Settings(db=sys.argv[1])) as t:
        with t.store.driver.tx() as conn:
            conn.execute("UPDATE queues SET modified_at = -1")
            print("holding", flush=True)
            time.sleep(60)  # killed here, the transaction and both locks held
""")


@contextmanager
def another_process_writing(url: str) -> Iterator[None]:
    """Another process holding a write transaction (and both locks) on `url` for the
    block; killed -9 at its end."""
    with subprocess.Popen([sys.executable, "-c", KILLED, url], stdout=subprocess.PIPE,
                          text=True) as holder:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "holding"
        try:
            yield
        finally:
            holder.kill()
            holder.wait(10)


def test_a_writer_killed_holding_the_lock_leaves_the_file_writable(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/shared.db"
    with Tidings(settings=Settings(db=url)) as t:
        t.queues.create_queue("jobs")
        with another_process_writing(url):
            pass
        began = time.monotonic()
        t.queues.send("jobs", "after the kill")
        assert time.monotonic() - began < 1.0  # not a busy_timeout (30 s) of waiting
        assert t.queues.describe("jobs").counts.visible == 1
        assert t.queues.get_queue("jobs").modified_at != -1  # its transaction rolled back


def test_reads_go_on_while_another_process_holds_the_writer_lock(tmp_path: Path) -> None:
    # WAL readers never wait for a writer: the next due instant, a queue's counts and a
    # firing pass's claim read answer at once, from the last commit, while the other
    # process's transaction is open (the node's consumers beside a dispatcher process).
    url = f"sqlite:///{tmp_path}/shared.db"
    with Tidings(settings=Settings(db=url)) as t:
        t.queues.create_queue("jobs")
        with another_process_writing(url):
            began = time.monotonic()
            assert t.store.next_due_at() is None
            assert t.queues.get_queue("jobs").modified_at != -1  # not its uncommitted
            assert t.queues.describe("jobs").counts.visible == 0
            with t.store.firing_pass(t.clock.now_ms(), 10, 10_000) as p:
                assert p.schedules == []
            assert time.monotonic() - began < 1.0  # not after the holder's 60 s


def test_a_filesystem_without_flock_leaves_the_busy_handler(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             caplog: pytest.LogCaptureFixture,
                                                             ) -> None:
    def refused(fd: int, op: int) -> None:
        raise OSError(95, "Operation not supported")

    monkeypatch.setattr(writer_lock.fcntl, "flock", refused)
    with Tidings(settings=Settings(db=f"sqlite:///{tmp_path}/nfs.db")) as t:
        t.queues.create_queue("jobs")
        t.queues.send("jobs", "written all the same")
        assert t.queues.describe("jobs").counts.visible == 1
    assert [r.message for r in caplog.records if "no writer lock" in r.message] == [
        f"no writer lock on {tmp_path}/nfs.db-writer ([Errno 95] Operation not supported): "
        "waiting on SQLite's busy handler"]  # once, not per transaction


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork: POSIX only")
def test_a_forked_child_takes_the_lock_on_its_own_file(tmp_path: Path) -> None:
    """A forked child inherits its parent's open lock file, and a flock belongs to the open
    file: through it the child would get the lock while the parent holds it. It must open
    its own and wait. The process id the lock compares is cached, so the cache must follow
    the fork."""
    lock = writer_lock.WriterLock(str(tmp_path / "forked.db"))
    lock.acquire()  # the parent's descriptor is open from here on
    lock.release()
    held_r, held_w = os.pipe()
    report_r, report_w = os.pipe()
    with warnings.catch_warnings():  # 3.12+ warns of fork with threads; the child only
        warnings.simplefilter("ignore", DeprecationWarning)  # makes system calls
        child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        try:
            os.read(held_r, 1)  # the parent holds the lock now
            began = time.monotonic()
            lock.acquire()
            os.write(report_w, f"{time.monotonic() - began:.3f}".encode())
            lock.release()
        finally:
            os._exit(0)
    os.close(held_r)
    os.close(report_w)  # so a child that died without a word reads as an empty answer
    lock.acquire()
    os.write(held_w, b"x")
    time.sleep(0.3)
    lock.release()
    answer = os.read(report_r, 64)
    os.waitpid(child, 0)
    os.close(held_w)
    os.close(report_r)
    assert answer, "the child died before it took the lock"
    waited = float(answer)
    lock.close()
    assert waited >= 0.25  # it waited for the parent's release
