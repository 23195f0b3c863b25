"""Opening a SQLite database file for the driver: what may be made where nothing is, the
connection and its pragmas, and the errors that say "not now" or "not writable here".

Durability: WAL with `synchronous=NORMAL`. A committed transaction survives the process
being killed (-9) at any point, because the WAL is in the OS page cache before COMMIT
returns; only a power loss or kernel crash can lose the last few commits. Users who need
that too set `TIDINGS_SQLITE_SYNCHRONOUS=FULL` (an fsync per commit).

Apart from the driver (`drivers/sqlite.py`) so that it holds the transactions and the
statements, and this the file and connection set-up it only runs once.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from tidings.errors import DatabaseNotFound, StoreUnavailable, ValidationError
from tidings.store.drivers.sqlite_checkpoint import (
    FOREGROUND_CHECKPOINT_PAGES,
    WAL_SIZE_LIMIT_BYTES,
)
from tidings.store.migrate import Create

SYNCHRONOUS = ("NORMAL", "FULL", "EXTRA")
#: What `check` may ask for at open (TIDINGS_SQLITE_CHECK).
CHECKS = ("quick", "full", "off")
#: Result codes (and their extended forms, e.g. SQLITE_IOERR_WRITE) that say "not now".
TRANSIENT = ("SQLITE_FULL", "SQLITE_IOERR", "SQLITE_BUSY", "SQLITE_LOCKED")
#: Result codes that say this process may not write the database, and how to say so.
_UNWRITABLE = (("SQLITE_READONLY", "it is read-only to this process"),
               ("SQLITE_CANTOPEN", "it cannot be opened"),
               ("SQLITE_PERM", "permission denied"))


def check_options(synchronous: str, check: str) -> None:
    if synchronous.upper() not in SYNCHRONOUS:
        raise ValidationError("TIDINGS_SQLITE_SYNCHRONOUS",
                              f"must be one of {', '.join(SYNCHRONOUS)}")
    if check not in CHECKS:
        raise ValidationError("TIDINGS_SQLITE_CHECK", f"must be one of {', '.join(CHECKS)}")


def connect(path: str, *, synchronous: str, cache_mb: int) -> sqlite3.Connection:
    """The driver's one connection, its pragmas set (closed again if one fails)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False,
                           timeout=30.0)
    try:
        for pragma in ("PRAGMA journal_mode=WAL",
                       f"PRAGMA synchronous={synchronous.upper()}",
                       "PRAGMA busy_timeout=30000",
                       # Bounded (32 MB by default), so the RSS does not follow
                       # the database's size. A pass firing thousands of schedules
                       # created in random order reads and writes a random page of
                       # the schedules table and of its name index per firing: with
                       # a million schedules (~400 MB) most missed this cache, and
                       # a firing cost ~72 us of the store thread instead of ~62
                       # (bench/delayed_jobs.py, TIDINGS_SQLITE_CACHE_MB).
                       f"PRAGMA cache_size=-{int(cache_mb) * 1024}",
                       "PRAGMA temp_store=MEMORY",
                       f"PRAGMA wal_autocheckpoint={FOREGROUND_CHECKPOINT_PAGES}",
                       f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT_BYTES}"):
            conn.execute(pragma)
    except BaseException:
        conn.close()
        raise
    return conn


def shown(path: str) -> str:
    """The path in messages: absolute, since the default is relative to the working
    directory, which a reader of the log may not know."""
    return path if path == ":memory:" else str(Path(path).absolute())


def prepare_file(path: str, create: Create) -> None:
    """Refuse what opening `path` must not do (`Create`), before SQLite would make an
    empty file there: a missing database where nothing may be created, a new one in a
    folder that does not exist (a mistyped path, unless `Create.FOLDERS`), a file or
    folder this user cannot write where the node is to write."""
    file = Path(path).absolute()
    folder = file.parent
    if not file.exists():
        if create is Create.NOTHING:
            raise DatabaseNotFound(str(file), f"there is no tidings database at {file}: "
                                   "check --db or TIDINGS_DB (`tidings migrate` or a node "
                                   "makes a new one; this command does not)")
        if not folder.is_dir():
            if create is not Create.FOLDERS:
                raise ValidationError("db", f"the folder {folder} does not exist, so {file} "
                                      "would be a new, empty database: check the path, or "
                                      "pass --create to make the folder (in Python: "
                                      "create=Create.FOLDERS)")
            folder.mkdir(parents=True, exist_ok=True)
    if create is Create.NOTHING:
        return  # reading a read-only file is fine; a write to it fails with its path
    for target, what in ((file, "file"), (folder, "folder")):
        if target.exists() and not os.access(target, os.W_OK):
            raise StoreUnavailable(f"cannot write the SQLite database {file}: its {what} "
                                   f"{target} is read-only to this user (SQLite writes the "
                                   "file, and its -wal and -shm files beside it)")


def raise_if_unwritable(path: str, exc: sqlite3.Error) -> None:
    """A read-only file or folder (or one that cannot be opened): one line naming
    them, instead of a traceback that ends in "attempt to write a readonly database"."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    why = next((text for prefix, text in _UNWRITABLE if name.startswith(prefix)), None)
    if why is not None:
        file = Path(path).absolute()
        raise StoreUnavailable(
            f"cannot write the SQLite database {file}: {why} ({name}); check that this "
            f"user may write the file and its folder {file.parent} (SQLite writes its "
            "-wal and -shm files beside it)") from exc
