"""A lock file that hands SQLite's write lock from one process to the next at once.

SQLite lets one writer in at a time; a process that finds the file locked retries in its
busy handler, which sleeps between tries (1 ms at first, 100 ms once it has waited a
third of a second), so it often sleeps on past the instant the lock came free: one
send every 10 ms next to a process writing back to back measured p99 130 ms, worst
330-630 ms (bench/sqlite_writers.py). Every tidings process first takes an exclusive
`flock` on `<database>-writer`: the kernel wakes a waiter the moment the holder lets go,
and the same sends took p99 22-23 ms, worst 31-32 ms (p50 1.5 -> 0.4 ms).

The lock only orders tidings' own processes; SQLite's locking still guards the file
(another program writing it, or a system without `flock`, falls back to busy_timeout).
A process killed with -9 lets go with its last descriptor, so a kill never leaves the
file held. A forked child shares the parent's open file, and a flock belongs to the open
file, so through it the child would hold whatever the parent holds: it opens its own on
first use.
"""

from __future__ import annotations

import logging
import os

try:
    import fcntl
except ImportError:  # Windows: SQLite's busy handler alone
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("tidings.sqlite")


class _Pid:
    """This process's id, read again only in a forked child: `os.getpid()` is a system
    call, and asking it twice per write transaction was ~4 % of a one-call-at-a-time
    schedule creation (bench/delayed_jobs.py, py-spy --native)."""

    value = os.getpid()

    @classmethod
    def refresh(cls) -> None:
        cls.value = os.getpid()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_Pid.refresh)


class WriterLock:
    """Reentrant within its process: only the outermost `acquire` takes the file lock.
    Callers hold the driver's thread lock around both calls, so the depth needs no lock
    of its own."""

    def __init__(self, db_path: str) -> None:
        self.path = f"{db_path}-writer"
        self._fd = -1
        self._pid = 0
        self._depth = 0
        self._locked = False  # this process holds the flock (its outermost acquire)
        # (an in-memory database: no other process can open it)
        self._usable = fcntl is not None and db_path != ":memory:"

    def acquire(self) -> None:
        self._depth += 1
        if self._depth == 1 and self._usable:
            fd = self._fd if self._pid == _Pid.value else self._open()
            if fd < 0:
                return
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # releases the GIL while it waits
                self._locked = True
            except OSError as exc:  # a filesystem without flock (some network ones)
                self._give_up(exc)

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0 and self._locked and self._pid == _Pid.value:
            self._locked = False
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _open(self) -> int:
        # (a forked child's inherited descriptor is left open: closing it would not
        # release the parent's lock, and the parent still uses it)
        self._locked = False
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            self._fd = -1
            self._give_up(exc)
            return -1
        self._pid = _Pid.value
        return self._fd

    def _give_up(self, exc: OSError) -> None:
        log.warning("no writer lock on %s (%s): waiting on SQLite's busy handler",
                    self.path, exc)
        self._usable = False

    def close(self) -> None:
        if self._fd >= 0 and self._pid == _Pid.value:
            os.close(self._fd)  # (lets go of the lock too, were it held)
        self._fd = -1
        self._pid = 0
        self._locked = False
