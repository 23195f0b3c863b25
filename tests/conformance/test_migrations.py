"""Schema migrations: numbered files per backend, applied once, recorded, safe to race."""

from __future__ import annotations

import logging
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tidings.errors import DatabaseNotFound, SchemaTooNew, ValidationError
from tidings.store import Create, migrate, open_store, sqlite_path
from tidings.store.migrate import SchemaRecord, known
from tidings.store.sqlfiles import migrations
from tidings.version import VERSION


def applied_versions(db_url: str) -> list[int]:
    if db_url.startswith("sqlite"):
        import sqlite3

        from tidings.store import sqlite_path

        with sqlite3.connect(sqlite_path(db_url)) as conn:
            return [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY 1")]
    with psycopg.connect(db_url) as conn:
        return [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY 1")]


def test_every_migration_is_applied_once_and_recorded(db_url: str) -> None:
    backend = "sqlite" if db_url.startswith("sqlite") else "postgres"
    files = [v for v, _, _ in migrations(backend)]
    assert files == list(range(1, len(files) + 1)), "migrations are numbered without gaps"
    open_store(db_url, now=1).close()
    open_store(db_url, now=2).close()  # a second open applies nothing again
    assert applied_versions(db_url) == files


def test_both_backends_have_the_same_migrations() -> None:
    sqlite = [(v, n) for v, n, _ in migrations("sqlite")]
    postgres = [(v, n) for v, n, _ in migrations("postgres")]
    assert sqlite == postgres


def test_nodes_opening_a_new_database_together_apply_each_step_once(db_url: str) -> None:
    code = ("import sys; from tidings.store import open_store; "
            "open_store(sys.argv[1], now=1).close()")
    procs = [subprocess.Popen([sys.executable, "-c", code, db_url]) for _ in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    backend = "sqlite" if db_url.startswith("sqlite") else "postgres"
    assert applied_versions(db_url) == [v for v, _, _ in migrations(backend)]


def test_each_migration_applied_is_logged_with_its_duration(
        db_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tidings.migrate")
    open_store(db_url, now=1).close()
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("creating a new tidings database in ")
    assert caplog.records[0].levelno == logging.WARNING
    for version, name, _ in migrations(backend_of(db_url)):
        assert any(re.fullmatch(rf"applied migration {version:04d} {name} in \d+ ms", line)
                   for line in lines), (version, lines)
    caplog.clear()
    open_store(db_url, now=2).close()
    assert caplog.records == []  # nothing to say when there is nothing to do


def test_the_release_that_migrated_is_recorded(db_url: str) -> None:
    open_store(db_url, now=1234).close()
    store = open_store(db_url, now=2)
    try:
        status = store.schema_status()
    finally:
        store.close()
    top = migrations(backend_of(db_url))[-1][0]
    # the last migration an older node cannot run beside (the newer ones are additive)
    breaking = max(m.version for m in known(backend_of(db_url)) if not m.additive)
    assert status.record == SchemaRecord(top, breaking, VERSION, 1234)
    assert (status.database, status.migrated_by, status.unknown, status.usable) == (
        top, VERSION, [], True)


def test_a_migration_this_release_does_not_know_is_refused(db_url: str) -> None:
    open_store(db_url, now=1).close()
    with raw(db_url) as db:
        db.run("INSERT INTO schema_migrations VALUES (99, 'from_the_future', 0)")
    top, name, _ = migrations(backend_of(db_url))[-1]
    with pytest.raises(SchemaTooNew) as refused:
        open_store(db_url, now=2)
    assert "it has migration 99 (from_the_future), applied by a tidings release that did " \
        "not record its version" in refused.value.message
    assert f"this is tidings {VERSION}, which knows migrations up to {top} ({name})" \
        in refused.value.message
    with pytest.raises(SchemaTooNew):
        open_store(db_url, now=2, create=Create.NOTHING)


def test_newer_additive_migrations_are_run_on_with_a_warning(
        db_url: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """A newer release's additive migration (recorded by that release) leaves this one
    running; one more that is not additive refuses it."""
    open_store(db_url, now=1).close()
    ours = migrate.known
    with monkeypatch.context() as newer:
        extra = migrate.Migration(99, "later", "-- additive: a new table\n"
                                  "CREATE TABLE later (id INTEGER PRIMARY KEY);")
        newer.setattr(migrate, "known", lambda backend: [*ours(backend), extra])
        newer.setattr(migrate, "VERSION", "9.9.0")
        open_store(db_url, now=2).close()
    caplog.set_level(logging.WARNING, logger="tidings.migrate")
    open_store(db_url, now=3).close()
    assert "it has migration 99 (later), applied by tidings 9.9.0" in caplog.text
    assert "additive, so this node runs on it" in caplog.text
    with monkeypatch.context() as newer:
        breaking = migrate.Migration(100, "breaking", "DROP TABLE later;")
        newer.setattr(migrate, "known", lambda backend: [*ours(backend), extra, breaking])
        newer.setattr(migrate, "VERSION", "9.10.0")
        open_store(db_url, now=4).close()
    with pytest.raises(SchemaTooNew, match=r"migration 100 \(breaking\), applied by tidings "
                       r"9\.10\.0"):
        open_store(db_url, now=5)


def test_opening_with_create_nothing_creates_nothing(db_url: str, tmp_path: Path) -> None:
    with pytest.raises(DatabaseNotFound) as missing:
        open_store(db_url, now=1, create=Create.NOTHING)
    assert "there is no tidings database" in missing.value.message
    if db_url.startswith("sqlite"):
        assert str(Path(sqlite_path(db_url)).absolute()) in missing.value.message
        assert list(tmp_path.iterdir()) == []
    else:
        with raw(db_url) as db:
            assert db.one("SELECT count(*) FROM information_schema.tables "
                          "WHERE table_schema = current_schema()") == 0


def test_a_new_database_file_needs_its_folder_unless_told_to_make_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/tidngs/data.db"
    with pytest.raises(ValidationError) as refused:
        open_store(url, now=1)
    assert f"the folder {tmp_path}/tidngs does not exist" in refused.value.message
    assert list(tmp_path.iterdir()) == []
    open_store(url, now=1, create=Create.FOLDERS).close()
    assert (tmp_path / "tidngs" / "data.db").is_file()


def backend_of(url: str) -> str:
    return "sqlite" if url.startswith("sqlite") else "postgres"


class raw:  # noqa: N801 - a context manager, used as `with raw(url) as db`
    """A plain autocommit connection to the database under test, `?` placeholders."""

    def __init__(self, url: str) -> None:
        self.url = url

    def __enter__(self) -> raw:
        if self.url.startswith("sqlite"):
            self.conn: Any = sqlite3.connect(sqlite_path(self.url), isolation_level=None)
        else:
            self.conn = psycopg.connect(self.url, autocommit=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()

    def run(self, sql: str) -> None:
        self.conn.execute(sql)

    def one(self, sql: str) -> Any:
        return self.conn.execute(sql).fetchone()[0]
