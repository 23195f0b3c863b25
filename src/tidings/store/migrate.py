"""Numbered schema migrations, applied on open and recorded in `schema_migrations`.

Each backend keeps its own `sql/<backend>/NNNN_name.sql` files, with the same numbers and
names (a test checks both give the same tables, columns, indexes and constraints). All
pending steps run in one transaction with their records, under the driver's lock (an
advisory lock on PostgreSQL; SQLite's `BEGIN IMMEDIATE` serialises by itself), so nodes
opening a new database together apply each step once. Each step is logged with its
duration.

A database is read before anything is applied: one that holds migrations this release
does not know was migrated by a newer tidings, and is refused (`SchemaTooNew`, naming
both sides), since this release's SQL may no longer match its tables. The exception is
a migration marked additive (its file starts with `-- additive:` and says why): it only
adds what older code does not look at (a table, a nullable column, an index), so nodes
that predate it keep running on it. The release that migrates records, in the `meta`
row `schema`, which release it is, the schema it left and the oldest schema whose nodes
may still run on it (`compatible_from`: its last migration that is not additive). A
record that does not describe the database's last migration (a row added by hand) proves
nothing, so such a database is refused. docs/upgrading.md gives the rules to operators.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from tidings.errors import DatabaseNotFound, SchemaTooNew, SchemaTooOld
from tidings.store.sqlfiles import migrations
from tidings.version import VERSION

if TYPE_CHECKING:
    from tidings.store.driver import Conn, Driver

MIGRATION_LOCK = 7133000
SCHEMA_KEY = "schema"  # the meta row the migrating release writes
_ADDITIVE = re.compile(r"^--\s*additive:", re.IGNORECASE | re.MULTILINE)
log = logging.getLogger("tidings.migrate")


class Create(StrEnum):
    """What opening a database may do when it is not (all) there."""

    #: Nothing: the database must exist, at this release's schema (read-only commands,
    #: and a process beside a node that opened it first). Opening then writes nothing.
    NOTHING = "nothing"
    #: Make a new database, or migrate an older one; a new SQLite file only in a folder
    #: that exists, so a mistyped path is refused instead of becoming an empty database.
    DATABASE = "database"
    #: The same, and make the file's missing folders (`--create`).
    FOLDERS = "folders"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    script: str

    @property
    def additive(self) -> bool:
        """Marked as safe for nodes that predate it (see the module's docstring)."""
        return _ADDITIVE.search(self.script) is not None

    @property
    def label(self) -> str:
        return f"{self.version:04d} {self.name}"


def known(backend: str) -> list[Migration]:
    """This release's migrations for `backend`, in order."""
    return [Migration(v, n, s) for v, n, s in migrations(backend)]


@dataclass(frozen=True)
class SchemaRecord:
    """The `meta` row the release that last migrated a database wrote."""

    version: int  # the last migration it applied
    compatible_from: int  # nodes knowing at least this migration may run on it
    migrated_by: str  # that release's version
    migrated_at: int  # epoch ms

    def to_json(self) -> bytes:
        return json.dumps({"version": self.version, "compatible_from": self.compatible_from,
                           "migrated_by": self.migrated_by,
                           "migrated_at": self.migrated_at}).encode()

    @classmethod
    def from_json(cls, raw: Any) -> SchemaRecord | None:
        try:
            doc = json.loads(bytes(raw))
            return cls(int(doc["version"]), int(doc["compatible_from"]),
                       str(doc["migrated_by"]), int(doc["migrated_at"]))
        except (ValueError, KeyError, TypeError):
            return None  # not ours to read: treated as no record


@dataclass(frozen=True)
class SchemaStatus:
    """A database's migrations compared with this release's."""

    applied: dict[int, str]  # version -> name, as recorded in the database
    known: list[Migration]
    record: SchemaRecord | None

    @property
    def database(self) -> int:
        """The database's last migration (0: none)."""
        return max(self.applied, default=0)

    @property
    def newest_known(self) -> Migration | None:
        return self.known[-1] if self.known else None

    @property
    def unknown(self) -> list[int]:
        """Migrations of a newer release."""
        mine = {m.version for m in self.known}
        return sorted(v for v in self.applied if v not in mine)

    @property
    def pending(self) -> list[Migration]:
        return [m for m in self.known if m.version not in self.applied]

    @property
    def migrated_by(self) -> str | None:
        """The release that applied the database's last migration, when it said so."""
        record = self.record
        return record.migrated_by if record and record.version == self.database else None

    @property
    def usable(self) -> bool:
        """Whether this release may run on the database: it knows every migration, or
        the newer ones are all additive (so said a record of the database's last one)."""
        if not self.unknown:
            return True
        record, mine = self.record, self.newest_known
        return (record is not None and record.version == self.database and mine is not None
                and record.compatible_from <= mine.version and not self.pending)

    def newer(self) -> str:
        """The database's side, for a message: `migration 15 (name), applied by …`."""
        top = self.database
        by = self.migrated_by
        return (f"migration {top} ({self.applied.get(top, '?')}), applied by "
                + (f"tidings {by}" if by else "a tidings release that did not record its "
                   "version"))

    def ours(self) -> str:
        mine = self.newest_known
        return (f"tidings {VERSION}, which knows migrations up to "
                + (f"{mine.version} ({mine.name})" if mine else "none"))

    def too_new(self) -> SchemaTooNew:
        return SchemaTooNew(
            f"the database was migrated by a newer tidings: it has {self.newer()}; this is "
            f"{self.ours()}. Upgrade this node to the release that migrated the database "
            "(or a later one); see docs/upgrading.md")


def split_statements(script: str) -> list[str]:
    """Split a SQL script into statements (comments and semicolons in strings respected)."""
    statements, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            statements.append(buf)
            buf = ""
    statements.append(buf)
    return [s.strip() for s in statements if not _only_comments(s)]


def _only_comments(text: str) -> bool:
    return all(not ln.strip() or ln.strip().startswith("--") for ln in text.splitlines())


def read_status(driver: Driver, conn: Conn) -> SchemaStatus | None:
    """The database's schema against this release's; None when it has no migrations
    table (not a tidings database, or a new one)."""
    q = driver.queries
    if not conn.execute(q["table_exists"], ("schema_migrations",)).fetchone()[0]:
        return None
    applied = {int(v): str(n) for v, n in conn.execute(q["applied_migrations"])}
    record = None
    if applied and conn.execute(q["table_exists"], ("meta",)).fetchone()[0]:
        row = conn.execute(q["get_meta"], (SCHEMA_KEY,)).fetchone()
        record = SchemaRecord.from_json(row[0]) if row else None
    return SchemaStatus(applied, known(driver.name), record)


def schema_status(driver: Driver) -> SchemaStatus | None:
    """`read_status` now, without taking the writer (the running node's schema check)."""
    with driver.read() as conn:
        return read_status(driver, conn)


def migrate(driver: Driver, now: int, *, where: str,
            create: Create = Create.DATABASE) -> list[int]:
    """Check the database against this release, then apply what is pending unless
    `create` is NOTHING; return the versions applied by this call. `where` names the
    database in messages (a path, or a URL without its password)."""
    if create is Create.NOTHING:
        with driver.read() as conn:
            status = read_status(driver, conn)
        if status is None:
            raise DatabaseNotFound(where, f"there is no tidings database in {where} (no "
                                   "schema_migrations table): check --db or TIDINGS_DB "
                                   "(`tidings migrate` or a node makes a new one; this "
                                   "command does not)")
        _check(status)
        if status.pending:
            first, last = status.pending[0], status.pending[-1]
            raise SchemaTooOld(
                f"{where} is at schema {status.database}; this is tidings {VERSION}, which "
                f"needs migrations {first.version}-{last.version} ({last.name}) and does not "
                "apply them for a command that only reads: run `tidings migrate` (after a "
                "backup, docs/upgrading.md) or start a node")
        return []
    done: list[tuple[Migration, float]] = []
    started = time.perf_counter()
    with driver.tx() as conn:
        driver.lock(conn, MIGRATION_LOCK)
        status = read_status(driver, conn)
        if status is None:
            log.warning("creating a new tidings database in %s", where)
            conn.execute(driver.queries["create_migrations_table"])
            status = SchemaStatus({}, known(driver.name), None)
        _check(status)
        pending = status.pending
        if pending and status.applied:
            log.info("migrating %s from schema %d to %d (tidings %s)", where,
                     status.database, pending[-1].version, VERSION)
        for migration in pending:
            began = time.perf_counter()
            for statement in split_statements(migration.script):
                conn.execute(statement)
            conn.execute(driver.queries["record_migration"],
                         (migration.version, migration.name, now))
            took = (time.perf_counter() - began) * 1000
            done.append((migration, took))
            log.info("applied migration %s in %.0f ms", migration.label, took)
        if pending:
            conn.execute(driver.queries["put_meta"], (SCHEMA_KEY, _record(status, now)))
    if done:
        log.info("%s is at schema %d: %d migration(s) applied in %.0f ms", where,
                 done[-1][0].version, len(done), (time.perf_counter() - started) * 1000)
    return [m.version for m, _ in done]


def _record(status: SchemaStatus, now: int) -> bytes:
    newest = status.known[-1].version
    breaking = [m.version for m in status.known if not m.additive]
    return SchemaRecord(newest, max(breaking, default=0), VERSION, now).to_json()


def _check(status: SchemaStatus) -> None:
    if not status.unknown:
        return
    if not status.usable:
        raise status.too_new()
    log.warning("the database was migrated by a newer tidings: it has %s; this is %s. The "
                "newer migrations are additive, so this node runs on it; upgrade it "
                "(docs/upgrading.md)", status.newer(), status.ours())

