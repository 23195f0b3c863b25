"""Schema migrations: numbered files per backend, applied once, recorded, safe to race."""

from __future__ import annotations

import subprocess
import sys

import psycopg

from tidings.store import open_store
from tidings.store.sqlfiles import migrations


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
