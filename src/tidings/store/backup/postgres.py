"""Backups of a PostgreSQL database with `pg_dump`, restores with `pg_restore`.

What is backed up: the schema tidings' tables are in (the first of the URL's search path:
`public` unless `options=-csearch_path%3D…` names another), all of it, in pg_dump's
custom format (compressed; `pg_restore` reads it). pg_dump reads in one repeatable-read
transaction, so the backup is one instant while nodes go on writing: its locks (ACCESS
SHARE) hold up no insert, update or delete, only a schema change (a migration waits for
the dump to end). Any instant rather than the backup's (point-in-time recovery) is
PostgreSQL's own WAL archiving, below tidings: docs/operations.md has the recipe.

A restore is one transaction (`--single-transaction`): all of the backup or nothing. It
drops what the backup holds before recreating it (`--clean --if-exists`), so a schema
holding other objects too is refused by PostgreSQL, undoing everything; objects are
owned by the URL's user (`--no-owner --no-acl`: a new cluster need not have the old
roles). pg_restore cannot rename a schema, so a backup goes back to a schema of its name.

The programs come from PATH, of the server's major version or newer (pg_dump refuses an
older one). The password never goes on their command line, which `ps` shows anyone on
the machine: it goes into a passfile only this user can read, removed afterwards.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tidings.clock import Clock
from tidings.errors import ConflictError, StoreUnavailable, TidingsError, ValidationError
from tidings.model.nodes import NodeRecord
from tidings.store.backup.base import (
    BackupReport,
    Progress,
    RestoreReport,
    checked_destination,
    existing_file,
    not_tidings,
    put_in_place,
    remove,
    temp_beside,
)
from tidings.store.drivers.postgres import safe_url
from tidings.store.sqlfiles import queries

#: A schema's line in `pg_restore --list`: "14; 2615 55723 SCHEMA - name owner".
_SCHEMA_ENTRY = re.compile(r"^\d+; \d+ \d+ SCHEMA - (.+) \S+$", re.MULTILINE)
#: Lines of a failing program's error output kept in the message.
ERROR_LINES = 5
INSTALL = ("install PostgreSQL's client programs (Debian and Ubuntu: apt-get install "
           "postgresql-client) of the server's major version or newer, or follow the "
           "steps in docs/operations.md")


class PostgresBackup:
    sees_users = False  # a session does not say whose it is: heartbeats do

    def __init__(self, url: str, clock: Clock) -> None:
        self.url = url
        self.name = safe_url(url)
        self.clock = clock
        self.q = queries("postgres")

    def backup(self, dest: str, *, replace: bool, progress: Progress | None = None,
               ) -> BackupReport:
        pg_dump, pg_restore = _program("pg_dump"), _program("pg_restore")
        path = checked_destination(dest, replace)
        with self._connect() as conn:
            schema = _schema(conn, self.q)
            version = self._version(conn, "db", f"schema {schema!r} of {self.name}")
        temp = temp_beside(path, "partial")
        started = time.monotonic()
        try:
            with self._conninfo() as conninfo:
                snapshot_at = self.clock.now_ms()
                _run([pg_dump, "--format=custom", f"--schema={_literal(schema)}",
                      f"--file={temp}", "--no-password", f"--dbname={conninfo}"],
                     "pg_dump failed; no backup was written")
            _run([pg_restore, f"--file={os.devnull}", temp],  # every block read back
                 "the backup pg_dump wrote cannot be read back; it was removed")
            size = os.path.getsize(temp)
            put_in_place(temp, path, replace)
        finally:
            remove(temp)
        return BackupReport(
            source=f"{self.name} (schema {schema})", path=path, bytes=size,
            seconds=time.monotonic() - started, snapshot_at=snapshot_at,
            schema_version=version, method="pg_dump, custom format",
            checked="read back whole with pg_restore")

    def restore(self, source: str, *, replace: bool, progress: Progress | None = None,
                ) -> RestoreReport:
        pg_restore = _program("pg_restore")
        source = existing_file(source, "backup")
        listing = _run([pg_restore, "--list", source],
                       f"{source!r} is not a backup pg_dump wrote (custom format)",
                       invalid="SRC")
        _run([pg_restore, f"--file={os.devnull}", source],
             f"{source!r} is damaged; nothing was restored", invalid="SRC")
        dumped = _SCHEMA_ENTRY.findall(listing)
        with self._connect() as conn:
            schema = _schema(conn, self.q)
            if dumped and schema not in dumped:
                raise ValidationError("SRC", f"holds schema {dumped[0]!r}, and --db uses "
                                      f"{schema!r}: pg_restore cannot rename a schema, so "
                                      "restore it with a URL whose search_path is "
                                      f"{dumped[0]!r}")
            target = f"schema {schema!r} of {self.name}"
            had = self._holds_tidings(conn)
            if had and not replace:
                raise ConflictError(f"{target} already holds a tidings database; --force "
                                    "replaces it")
        started = time.monotonic()
        with self._conninfo() as conninfo:
            _run([pg_restore, "--single-transaction", "--clean", "--if-exists",
                  "--no-owner", "--no-acl", "--no-password", f"--dbname={conninfo}", source],
                 "pg_restore failed, in one transaction: nothing was restored")
        with self._connect() as conn:
            version = self._version(conn, "SRC", source)
        return RestoreReport(
            source=source, target=target, bytes=os.path.getsize(source),
            seconds=time.monotonic() - started, schema_version=version, replaced=had,
            method="pg_restore, one transaction", checked="read whole with pg_restore")

    @contextmanager
    def _connect(self) -> Iterator[psycopg.Connection[Any]]:
        try:
            with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as conn:
                yield conn
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"cannot use PostgreSQL at {self.name}: {exc}") from exc

    @contextmanager
    def _conninfo(self) -> Iterator[str]:
        """The URL as the programs take it, its password moved into a passfile."""
        params = conninfo_to_dict(self.url)
        password = params.pop("password", None)
        if password is None:
            yield make_conninfo("", **params)
            return
        fd, passfile = tempfile.mkstemp(prefix="tidings-pgpass-")  # mode 0600
        try:
            with os.fdopen(fd, "w") as f:
                escaped = str(password).replace("\\", "\\\\").replace(":", "\\:")
                f.write(f"*:*:*:*:{escaped}\n")
            yield make_conninfo("", **params, passfile=passfile)
        finally:
            remove(passfile)

    def _holds_tidings(self, conn: psycopg.Connection[Any]) -> bool:
        try:
            with conn.transaction():
                conn.execute(self.q["applied_migrations"])
        except psycopg.errors.UndefinedTable:
            return False
        return True

    def _version(self, conn: psycopg.Connection[Any], field: str, what: str) -> int:
        try:
            versions = [int(r[0]) for r in conn.execute(self.q["applied_migrations"])]
        except psycopg.errors.UndefinedTable:
            versions = []
        if not versions:
            raise not_tidings(field, what)
        return max(versions)

    def nodes(self, since: int) -> list[NodeRecord]:
        with self._connect() as conn:
            try:
                return [NodeRecord(*r) for r in conn.execute(self.q["list_nodes"], (since,))]
            except psycopg.errors.UndefinedTable:
                return []


def _program(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise TidingsError(f"{name} is not installed: {INSTALL}")
    return found


def _schema(conn: psycopg.Connection[Any], q: dict[str, str]) -> str:
    """Where the URL puts tidings' tables: the first schema of its search path (one that
    does not exist yet too: a restore creates it)."""
    row = conn.execute(q["current_schema"]).fetchone()
    assert row is not None
    if row[0]:
        return str(row[0])
    for item in str(row[2]).split(","):
        name = item.strip()
        if name.startswith('"') and name.endswith('"'):
            name = name[1:-1].replace('""', '"')
        if name and name != "$user":
            return name
    raise ValidationError("db", "the URL's search_path names no schema")


def _literal(schema: str) -> str:
    """A schema name as pg_dump's `--schema` pattern matching that name only."""
    return '"' + schema.replace('"', '""') + '"'


def _run(args: Sequence[str], failed: str, *, invalid: str | None = None) -> str:
    """Run a program; its output, or an error with the end of what it said. `invalid`:
    the failure is the input's fault (a `ValidationError` of that field)."""
    done = subprocess.run(list(args), capture_output=True, text=True, check=False)
    if done.returncode == 0:
        return done.stdout
    said = " / ".join(done.stderr.strip().splitlines()[-ERROR_LINES:]) or \
        f"exit code {done.returncode}"
    if invalid is not None:
        raise ValidationError(invalid, f"{failed}: {said}")
    raise TidingsError(f"{failed}: {said}")
