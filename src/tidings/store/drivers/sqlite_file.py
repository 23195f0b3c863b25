"""A SQLite database as a file: its header, its integrity, its read-ahead, and whether
another process has it open. Shared by the driver (drivers/sqlite.py: the check at a
node's start, the damage met later) and the backups (store/backup/sqlite.py).

One rule runs through this module: closing a descriptor drops every POSIX lock this
process holds on that file, SQLite's included. So nothing here opens a database file, or
its `-shm`, while this process has it open through SQLite (the same rule as
`Checkpointer.keep_wal_cached`); each function says when it may be called.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

HEADER = b"SQLite format 3\x00"
#: Result codes (and their extended forms, e.g. SQLITE_CORRUPT_INDEX) that say the file is
#: damaged: unlike a full disk or a lock they do not pass by themselves.
CORRUPTION = ("SQLITE_CORRUPT", "SQLITE_NOTADB")
#: Problems a check collects (and a one-line message names): SQLite stops there. Not
#: more: the further a check goes into a damaged file, the likelier it meets a page it
#: cannot read at all, and it then fails with only "database disk image is malformed"
#: (on one damaged file: 5 problems listed, and that error from 10 on).
MAX_PROBLEMS = 3
#: The byte of the `-shm` file every connection in WAL mode holds a shared POSIX lock on
#: while it has the database open: SQLite's "dead man switch" (UNIX_SHM_DMS in os_unix.c,
#: 120 + 8). A process finding it locked exclusively waits in its busy handler.
SHM_DMS_BYTE = 128
READ_AHEAD_CHUNK = 8 << 20


def corruption(exc: BaseException) -> str | None:
    """The SQLite error name when `exc` says the file is damaged, else None."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name if name.startswith(CORRUPTION) else None


def is_sqlite_file(path: str) -> bool:
    """Whether the file starts with SQLite's header. Reads the file, so not while this
    process has it open through SQLite (the module's rule)."""
    with open(path, "rb") as f:
        return f.read(len(HEADER)) == HEADER


def problems(conn: sqlite3.Connection, *, full: bool) -> list[str]:
    """What SQLite's check reports; [] when it says ok.

    `full` is `PRAGMA integrity_check`: also that every index holds exactly its table's
    rows (what a copy taken mid-write gets wrong: "row missing from index"). Without it,
    `quick_check`: every page's structure, which is what fails when a torn copy is read
    ("invalid page number", "malformed"), in ~40 % of the time (1.3 s against 3.3 s on
    a 305 MB file, on a loaded 2-core machine).
    A check that meets a page it cannot read reports SQLite's error as the problem."""
    pragma = "integrity_check" if full else "quick_check"
    try:
        found = [str(row[0]) for row in conn.execute(f"PRAGMA {pragma}({MAX_PROBLEMS})")]
    except sqlite3.DatabaseError as exc:
        if not corruption(exc):
            raise
        return [f"{corruption(exc)}: {exc}"]
    if found == ["ok"]:
        return []
    # One row may hold several problems, a line each, under "*** in database main ***".
    lines = (line.strip() for text in found for line in text.splitlines())
    return [line for line in lines if line and not line.startswith("***")]


def summary(found: list[str]) -> str:
    """Problems on one line."""
    return "; ".join(" ".join(p.split()) for p in found)


def read_ahead(path: str) -> None:
    """Ask the OS to read the whole file into its page cache, without waiting for it.

    A check walks the b-trees, page by page in tree order: on a cold cache that is one
    random read per page. `quick_check` of a 305 MB file (1,000,000 schedules and as
    many messages) took 5.4-6.6 s cold and 1.2-1.4 s after this call (0.67 s warm), on
    a VM disk: the kernel reads ahead in big sequential requests while the check runs.
    Call it before this process opens the file through SQLite (the module's rule)."""
    if not hasattr(os, "posix_fadvise"):  # not on macOS: the check reads as it goes
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        for offset in range(0, size, READ_AHEAD_CHUNK):
            os.posix_fadvise(fd, offset, READ_AHEAD_CHUNK, os.POSIX_FADV_WILLNEED)
    finally:
        os.close(fd)


class InUse(Exception):
    """Another process has the database open."""


@contextmanager
def unused(path: str) -> Iterator[None]:
    """Hold the database so that no other process uses it, for the block: raises `InUse`
    at once if one has it open now.

    Every connection in WAL mode (tidings' only mode) holds a shared lock on one byte of
    the `-shm` file for as long as it has the database open, whatever it is doing: this
    takes that byte exclusively, which no holder allows, and which makes a process that
    opens the database meanwhile wait in its busy handler. Exact where heartbeats are
    not: it sees any process (a node, a CLI command, your application), and a node killed
    with -9 lets go of it at once. A `-shm` this makes is removed again (a file with
    none has no process using it).
    Not while this process has the database open through SQLite (the module's rule)."""
    try:
        import fcntl
    except ImportError:  # Windows: no POSIX locks to ask, so nothing is known
        yield
        return
    shm = f"{path}-shm"
    made = False
    try:
        fd = os.open(shm, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        made = True
    except FileExistsError:
        fd = os.open(shm, os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EROFS):  # a read-only folder: no WAL user
            yield
            return
        raise
    locked = False
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, SHM_DMS_BYTE, os.SEEK_SET)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EAGAIN):
                raise InUse(path) from None
            raise
        locked = True
        yield
    finally:
        if made and locked:  # (while held: nobody else can have started using it)
            try:
                os.unlink(shm)
            except FileNotFoundError:
                pass
        os.close(fd)  # (lets go of the lock)


def remove_companions(path: str) -> None:
    """Delete the `-wal`, `-shm` and `-journal` files of a database that is being
    replaced: SQLite would play a stale WAL or roll back a stale journal into the new
    file (they hold no mark of the file they belong to), corrupting it."""
    for suffix in ("-wal", "-journal", "-shm"):
        try:
            os.unlink(path + suffix)
        except FileNotFoundError:
            pass
