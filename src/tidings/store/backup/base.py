"""What a backend provides for backups and restores, and the file handling they share.

A backup is taken from a database that nodes may be writing at that moment, and holds
one instant of it; a restore replaces a database nothing uses, all at once or not at
all. Neither opens the database as tidings does: `open_store` migrates, and a backup
must hold what is there (the one taken before an upgrade above all), so each backend
reads its files or its server itself. The policy around them (when a node counts as
alive, what the caller is told) is `ops/backups.py`'s.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from tidings.errors import ConflictError, NotFoundError, TidingsError, ValidationError
from tidings.model.nodes import NodeRecord

#: (bytes done, bytes in all): called as a long copy goes on.
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class BackupReport:
    source: str  # the database, for people: a path, or a URL without its password
    path: str  # the backup file, absolute
    bytes: int
    seconds: float
    #: Epoch ms read just before the copy's snapshot was taken: the backup holds every
    #: write acknowledged before this instant, and nothing begun after the copy ended.
    snapshot_at: int
    schema_version: int  # the highest migration the database had
    method: str  # how it was taken
    checked: str  # how the written backup was verified


@dataclass(frozen=True)
class RestoreReport:
    source: str  # the backup file, absolute
    target: str  # the database, for people
    bytes: int
    seconds: float
    schema_version: int  # the highest migration of the restored database
    replaced: bool  # a database was there before, and is gone
    method: str
    checked: str  # how the backup was verified before anything was replaced


class InUse(ConflictError):
    """The database is open in another process: stop it, then restore."""


class BackupTool(Protocol):
    """One database, named by its URL, for backups and restores. Made with the caller's
    clock (`backup_tool`), read for the instant a backup's snapshot is taken."""

    #: The database for people: a path, or a URL without its password.
    name: str
    #: Whether `restore` itself sees every process that has the database open, and
    #: refuses with `InUse` (SQLite: its locks say so exactly). Where not (PostgreSQL),
    #: the caller judges by the nodes' heartbeats (`nodes`) before restoring.
    sees_users: bool

    def nodes(self, since: int) -> list[NodeRecord]:
        """The nodes whose last heartbeat is at or after `since` (epoch ms); none where
        the database has no such table, or cannot be read (a damaged file)."""
        ...

    def backup(self, dest: str, *, replace: bool, progress: Progress | None = None,
               ) -> BackupReport:
        """Write a consistent copy of the database to `dest` while it keeps serving.
        `dest` appears whole or not at all; an existing one is a `ConflictError` unless
        `replace`. A database that is damaged gives no backup (`StoreCorrupt`)."""
        ...

    def restore(self, source: str, *, replace: bool, progress: Progress | None = None,
                ) -> RestoreReport:
        """Replace the database with the backup at `source`, after checking it whole
        (a damaged or foreign file is a `ValidationError` and nothing changes). Refused
        with `ConflictError` when a database is there and not `replace`, and with `InUse`
        where `sees_users`."""
        ...


def checked_destination(dest: str, replace: bool) -> str:
    """`dest` made absolute, once its folder is known to exist and, without `replace`,
    nothing is there (checked again when the file is put in place: `put_in_place`)."""
    path = os.path.abspath(dest)
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        raise ValidationError("DEST", f"folder {folder!r} does not exist")
    if os.path.isdir(path):
        raise ValidationError("DEST", f"{path!r} is a folder; name the backup file")
    if os.path.lexists(path) and not replace:
        raise exists(path)
    return path


def exists(path: str) -> ConflictError:
    return ConflictError(f"{path!r} already exists; --force replaces it")


def not_tidings(field: str, what: str) -> TidingsError:
    """No migrations recorded: the database to back up is not there (1), a backup given
    to restore is not one (2, invalid input)."""
    message = f"{what} holds no tidings database (no migrations)"
    return NotFoundError(what, message) if field == "db" else ValidationError(field, message)


def copy_owner(source: str, path: str) -> None:
    """Give `path` the mode, and where allowed the owner, of `source`: a backup is no
    more readable than its database (it holds the signing keys), and a database that root
    restores stays writable by the user the nodes run as."""
    st = os.stat(source)
    os.chmod(path, st.st_mode & 0o7777)
    if hasattr(os, "chown"):
        try:
            os.chown(path, st.st_uid, st.st_gid)
        except PermissionError:  # not root: the file stays this user's
            pass


def existing_file(path: str, what: str) -> str:
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise NotFoundError(path, f"no {what} at {path!r}")
    return path


def temp_beside(path: str, purpose: str) -> str:
    """A new name in `path`'s folder (so a rename onto `path` is atomic), hidden, and
    saying what it is for whoever finds one left by a machine that crashed mid-copy."""
    folder, base = os.path.split(path)
    return os.path.join(folder, f".{base}.{purpose}-{secrets.token_hex(4)}")


def put_in_place(temp: str, path: str, replace: bool) -> None:
    """Move the finished `temp` onto `path` durably: its bytes on disk first, then the
    name. Without `replace` a hard link makes the name only if nothing took it since the
    check (`exists`), which a rename would overwrite."""
    sync_file(temp)
    if replace:
        os.replace(temp, path)
    else:
        try:
            os.link(temp, path)
        except FileExistsError:
            raise exists(path) from None
        except OSError:  # a filesystem without hard links: check, then rename
            if os.path.lexists(path):
                raise exists(path) from None
            os.replace(temp, path)
        else:
            os.unlink(temp)
    sync_folder(os.path.dirname(path))


def sync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_folder(folder: str) -> None:
    """Make a rename in `folder` survive a power cut (POSIX; nothing to do elsewhere)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def remove(*paths: str) -> None:
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

