"""SQLite's WAL copied back into the database file off the committing thread.

Checkpoints (copying the WAL back into the database file, with its two fsyncs) run on a
thread of their own with its own connection, a few times a second: a commit that had to
run one itself waited on its copying and fsyncs (tens of ms, hundreds on a busy disk),
which showed as the long tail of a job's lateness and as a slower create call. A writer
still checkpoints by itself if the WAL ever reaches `FOREGROUND_CHECKPOINT_PAGES` (set as
a pragma when the driver opens the file, `sqlite_open.connect`).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time

#: How often the checkpointer thread copies WAL frames back while this process writes;
#: a quiet process's checkpointer sleeps until its next write (or WAL_CACHE_EVERY_S).
CHECKPOINT_EVERY_S = 0.1
#: WAL pages (4 KiB) at which a committing writer checkpoints by itself (SQLite's
#: wal_autocheckpoint): the fallback for when the checkpointer cannot keep up or is gone
#: (a forked child). Never reached while it keeps up.
FOREGROUND_CHECKPOINT_PAGES = 10_000
#: A WAL file that grew past this (a burst the checkpointer trailed) is cut back to it
#: when the log restarts, so the file on disk does not keep its peak size.
WAL_SIZE_LIMIT_BYTES = 16 * 1024 * 1024
#: How often the checkpointer asks the OS to keep the WAL's pages in memory (see
#: `Checkpointer.keep_wal_cached`), and checkpoints what other processes wrote, when this
#: one writes nothing.
WAL_CACHE_EVERY_S = 5.0
log = logging.getLogger("tidings.sqlite")


class Checkpointer:
    """Runs PASSIVE checkpoints on its own thread and connection. A passive checkpoint
    never waits for (nor blocks) readers and writers, and sqlite3 releases the GIL while
    it copies and syncs, so commits go on meanwhile. Durability is unchanged: what it
    copies is committed already, and it syncs as SQLite's own checkpoint would.
    https://www.sqlite.org/wal.html#application_initiated_checkpoints

    It runs when this process wrote (`wrote`, set after each write commit), at most every
    `every_s`, and else every WAL_CACHE_EVERY_S: an idle node's checkpointer does not wake
    ten times a second to find nothing to copy."""

    def __init__(self, path: str, every_s: float = CHECKPOINT_EVERY_S) -> None:
        self.every_s = every_s
        self.path = path
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._stop = threading.Event()
        self.wrote = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tidings-checkpoint",
                                        daemon=True)
        self._thread.start()

    def checkpoint(self) -> tuple[int, int, int]:
        """One pass: (busy, WAL frames, frames now in the database file)."""
        busy, frames, copied = self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return int(busy), int(frames), int(copied)

    def keep_wal_cached(self) -> int:
        """Ask the OS to read back any of the WAL's first pages that it dropped, without
        waiting for them: how many bytes were asked for. A write after a checkpoint
        overwrites the WAL from its start, and a frame (4 KiB + 24 bytes) only partly
        covers the pages it lands on, so each page it touches is read first if it is not
        in memory. After a quiet spell (the OS drops clean pages nobody touched; a VM's
        memory balloon within a minute or two) the first commits were 8x slower.

        Only the WAL: closing a descriptor drops every POSIX lock this process holds on
        that file, and SQLite keeps its locks on the database file and the `-shm` index
        (another process that saw them gone would reset the index under this one: a
        SIGBUS). It holds none on the WAL."""
        if not hasattr(os, "posix_fadvise"):  # not on macOS: nothing to do there
            return 0
        try:
            fd = os.open(self.path + "-wal", os.O_RDONLY)
        except FileNotFoundError:
            return 0  # not there yet
        try:
            size = min(os.fstat(fd).st_size, WAL_SIZE_LIMIT_BYTES)
            # One call per MiB: the kernel's readahead takes at most a few MiB per call.
            for offset in range(0, size, 1 << 20):
                os.posix_fadvise(fd, offset, 1 << 20, os.POSIX_FADV_WILLNEED)
            return size
        finally:
            os.close(fd)

    def _run(self) -> None:
        cached_at = 0.0
        while not self._stop.wait(self.every_s):  # (paces checkpoints while writes go on)
            self.wrote.wait(WAL_CACHE_EVERY_S)
            if self._stop.is_set():
                return
            self.wrote.clear()
            try:
                self.checkpoint()
            except sqlite3.Error as exc:  # disk full, I/O error: the next pass tries again
                log.debug("background checkpoint failed: %s", exc)
            if time.monotonic() - cached_at >= WAL_CACHE_EVERY_S:
                cached_at = time.monotonic()
                try:
                    self.keep_wal_cached()
                except OSError as exc:
                    log.debug("could not keep the WAL cached: %s", exc)

    def close(self) -> None:
        self._stop.set()
        self.wrote.set()
        self._thread.join()
        self._conn.close()
