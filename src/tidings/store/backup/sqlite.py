"""Backups of a SQLite file while nodes write it, and restores that replace it whole.

How a backup is taken: SQLite's online backup API, page by page (`PAGES_PER_STEP` at a
time, so a big file shows progress), inside one read transaction held on the source for
the whole copy. The read transaction is what makes it work under load: a backup step
that starts a read of its own sees the other processes' commits and starts the copy
over, and with a node writing a few hundred times a second it never finished (167
restarts in 10 s, on a 305 MB file); inside one snapshot it copied the same file in
1.3 s (230 MB/s) with nothing restarted. In WAL mode a reader neither waits for writers
nor holds them up, and the copy never takes tidings' writer lock (drivers/writer_lock.py)
or SQLite's: the node keeps committing throughout. What it costs them: the WAL cannot be
checkpointed past the snapshot until the copy ends, so the `-wal` file grows by what is
written meanwhile, and is cut back afterwards.

Why not `VACUUM INTO`: it is one statement, so it cannot say how far it has got, and it
rebuilds every table and index rather than copying pages (on this machine it was about
as fast, but its time grows with the rows, not the bytes). Why not `cp`: a copy of a live
file mixes pages from different instants; issue #30 measured 4 corrupt copies in 60,
and acknowledged messages missing from the others (docs/operations.md).

The copy is then made a self-contained file (rollback journal mode: no `-wal` beside
it), checked whole with `PRAGMA integrity_check`, synced and renamed into place.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from urllib.parse import quote

from tidings.clock import Clock
from tidings.errors import ConflictError, StoreCorrupt, StoreUnavailable, ValidationError
from tidings.model.nodes import NodeRecord
from tidings.store import sqlite_path
from tidings.store.backup.base import (
    BackupReport,
    InUse,
    Progress,
    RestoreReport,
    checked_destination,
    copy_owner,
    existing_file,
    exists,
    not_tidings,
    put_in_place,
    remove,
    temp_beside,
)
from tidings.store.drivers import sqlite_file
from tidings.store.sqlfiles import queries

#: Pages copied per step of the backup (4 MiB of 4 KiB pages): the progress shown moves
#: every few ms, and each step is a short call that lets go of the GIL in between.
PAGES_PER_STEP = 1024
COPY_CHUNK = 4 << 20


class SQLiteBackup:
    sees_users = True  # sqlite_file.unused

    def __init__(self, url: str, clock: Clock) -> None:
        path = sqlite_path(url)
        if path == ":memory:":
            raise ValidationError("db", "an in-memory database has no file to back up or "
                                  "restore")
        self.path = os.path.abspath(path)
        self.name = self.path
        self.clock = clock
        self.q = queries("sqlite")

    def backup(self, dest: str, *, replace: bool, progress: Progress | None = None,
               ) -> BackupReport:
        source = existing_file(self.path, "SQLite database")
        if not sqlite_file.is_sqlite_file(source):  # (read before SQLite opens it)
            raise ValidationError("db", f"{source!r} is not a SQLite database")
        path = checked_destination(dest, replace)
        if os.path.exists(path) and os.path.samefile(path, source):
            raise ValidationError("DEST", "is the database itself")
        temp = temp_beside(path, "partial")
        started = time.monotonic()
        try:
            open(temp, "xb").close()  # a folder that cannot be written fails here, named
            snapshot_at, version = self._copy(source, temp, progress)
            found = self._finish(temp)
            if found:
                raise StoreCorrupt(
                    f"SQLite database {source!r} is damaged (integrity_check: "
                    f"{sqlite_file.summary(found)}): no backup was written; restore an "
                    "earlier backup (docs/operations.md)")
            size = os.path.getsize(temp)
            copy_owner(source, temp)
            put_in_place(temp, path, replace)
        finally:
            remove(temp, f"{temp}-journal")
        return BackupReport(
            source=source, path=path, bytes=size, seconds=time.monotonic() - started,
            snapshot_at=snapshot_at, schema_version=version,
            method="SQLite online backup API, in one read snapshot",
            checked="integrity_check ok")

    def _copy(self, source: str, temp: str, progress: Progress | None) -> tuple[int, int]:
        """Copy `source` page by page into `temp` inside one read transaction; returns
        the instant read just before the snapshot was taken, and its schema version."""
        src = _connect(source)
        try:
            snapshot_at = self.clock.now_ms()
            src.execute("BEGIN")  # the first read below takes the snapshot the copy keeps
            version = _schema_version(src, self.q, "db", source)
            page = int(src.execute("PRAGMA page_size").fetchone()[0])

            def step(_status: int, remaining: int, total: int) -> None:
                if progress is not None:
                    progress((total - remaining) * page, total * page)

            dst = sqlite3.connect(temp, isolation_level=None)
            try:
                src.backup(dst, pages=PAGES_PER_STEP, progress=step)
            finally:
                dst.close()
            src.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            if sqlite_file.corruption(exc):
                raise StoreCorrupt(f"SQLite database {source!r} is damaged ({exc}): no "
                                   "backup was written") from exc
            raise StoreUnavailable(f"cannot back up SQLite database {source!r}: {exc}; no "
                                   "backup was written") from exc
        finally:
            src.close()
        return snapshot_at, version

    @staticmethod
    def _finish(temp: str) -> list[str]:
        """Make the copy one file (rollback journal mode) and check it whole."""
        conn = sqlite3.connect(temp, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=DELETE")
            return sqlite_file.problems(conn, full=True)
        except sqlite3.DatabaseError as exc:
            return [str(exc)]
        finally:
            conn.close()

    def restore(self, source: str, *, replace: bool, progress: Progress | None = None,
                ) -> RestoreReport:
        source = existing_file(source, "backup")
        target = self.path
        folder = os.path.dirname(target)
        if not os.path.isdir(folder):
            raise ValidationError("db", f"folder {folder!r} does not exist")
        had = os.path.exists(target)
        if had and os.path.samefile(source, target):
            raise ValidationError("SRC", "is the database itself")
        if had and not replace:
            raise exists(target)
        if not sqlite_file.is_sqlite_file(source):
            raise ValidationError("SRC", f"{source!r} is not a SQLite database")
        started = time.monotonic()
        temp = temp_beside(target, "restoring")
        try:
            self._hold_target()  # fail fast: before copying gigabytes
            size = self._copy_source(source, temp, progress)
            version = _check_backup(source, temp, self.q)
            try:
                with sqlite_file.unused(target):  # held until the new file is in place
                    if os.path.exists(target) and not replace:
                        raise exists(target)
                    copy_owner(target if os.path.exists(target) else source, temp)
                    sqlite_file.remove_companions(target)
                    put_in_place(temp, target, replace=True)
            except sqlite_file.InUse:
                raise self._in_use() from None
        finally:
            remove(temp, f"{temp}-wal", f"{temp}-shm", f"{temp}-journal")
        return RestoreReport(
            source=source, target=target, bytes=size, seconds=time.monotonic() - started,
            schema_version=version, replaced=had, method="copied, then renamed into place",
            checked="integrity_check ok")

    def _hold_target(self) -> None:
        try:
            with sqlite_file.unused(self.path):
                pass
        except sqlite_file.InUse:
            raise self._in_use() from None

    @staticmethod
    def _copy_source(source: str, temp: str, progress: Progress | None) -> int:
        """Copy the backup, and a `-wal` beside it (a file left by a stopped node holds
        its last commits there), refusing one that a process has open: its copy would
        mix instants, as `cp` of a live file does."""
        try:
            with sqlite_file.unused(source):
                size = _copy_file(source, temp, progress)
                wal = f"{source}-wal"
                if os.path.exists(wal) and os.path.getsize(wal) > 0:
                    shutil.copyfile(wal, f"{temp}-wal")
        except sqlite_file.InUse:
            raise ConflictError(f"{source!r} is open in another process: take a backup of "
                                "it with `tidings backup` and restore that") from None
        return size

    def _in_use(self) -> InUse:
        return InUse(f"{self.path!r} is open in another process")

    def nodes(self, since: int) -> list[NodeRecord]:
        try:
            conn = _connect(self.path)
            try:
                return [NodeRecord(*r) for r in conn.execute(self.q["list_nodes"], (since,))]
            finally:
                conn.close()
        except sqlite3.Error:
            return []


def _connect(path: str) -> sqlite3.Connection:
    """A connection that never creates the file (`mode=rw`), waiting out a busy file."""
    return sqlite3.connect(f"file:{quote(path)}?mode=rw", uri=True, isolation_level=None,
                           timeout=30.0)


def _schema_version(conn: sqlite3.Connection, q: dict[str, str], field: str,
                    path: str) -> int:
    try:
        versions = [int(r[0]) for r in conn.execute(q["applied_migrations"])]
    except sqlite3.OperationalError as exc:
        if "no such table" not in str(exc):
            raise
        versions = []
    if not versions:
        raise not_tidings(field, repr(path))
    return max(versions)


def _check_backup(source: str, temp: str, q: dict[str, str]) -> int:
    """Check the copy whole before it replaces anything; fold any WAL into it so it is
    one file. Returns its schema version."""
    try:
        conn = sqlite3.connect(temp, isolation_level=None)
    except sqlite3.Error as exc:
        raise ValidationError("SRC", f"{source!r} cannot be opened: {exc}") from exc
    try:
        found = sqlite_file.problems(conn, full=True)
        if found:
            raise ValidationError("SRC", f"{source!r} is damaged (integrity_check: "
                                  f"{sqlite_file.summary(found)}): nothing was restored")
        version = _schema_version(conn, q, "SRC", source)
        conn.execute("PRAGMA journal_mode=DELETE")
        return version
    except sqlite3.DatabaseError as exc:
        if sqlite_file.corruption(exc):
            raise ValidationError("SRC", f"{source!r} is damaged ({exc}): nothing was "
                                  "restored") from exc
        raise StoreUnavailable(f"cannot check the copy of {source!r} made beside the "
                               f"database: {exc}; nothing was restored") from exc
    finally:
        conn.close()


def _copy_file(source: str, dest: str, progress: Progress | None) -> int:
    total = os.path.getsize(source)
    done = 0
    with open(source, "rb") as src, open(dest, "xb") as dst:
        while chunk := src.read(COPY_CHUNK):
            dst.write(chunk)
            done += len(chunk)
            if progress is not None:
                progress(done, total)
    return done
