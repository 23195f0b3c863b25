"""Numbered schema migrations, applied on open and recorded in `schema_migrations`.

Each backend keeps its own `sql/<backend>/NNNN_name.sql` files. A migration runs in one
transaction with its record, and the check of what is applied happens inside that
transaction, so two processes opening a new database at once apply each step once.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from tidings.store.sqlfiles import migrations

CREATE_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)"
)


def split_statements(script: str) -> list[str]:
    """Split a SQL script into statements (comments and semicolons in strings respected)."""
    statements, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip(" \n;") and not all(
                ln.strip().startswith("--") or not ln.strip() for ln in buf.splitlines()
            ):
                statements.append(buf.strip())
            buf = ""
    if buf.strip() and not all(
        ln.strip().startswith("--") or not ln.strip() for ln in buf.splitlines()
    ):
        statements.append(buf.strip())
    return statements


def migrate_sqlite(conn: sqlite3.Connection, now: int) -> list[int]:
    """Apply pending SQLite migrations; return the versions applied by this call."""
    conn.execute(CREATE_TABLE)
    done: list[int] = []
    for version, name, script in migrations("sqlite"):
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute(
                "SELECT 1 FROM schema_migrations WHERE version = ?", (version,)
            ).fetchone()
            if row is None:
                for statement in split_statements(script):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                    (version, name, now),
                )
                done.append(version)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return done


def migrate_postgres(conn: Any, now: int) -> list[int]:
    """Apply pending PostgreSQL migrations, all in one transaction under an advisory lock,
    so nodes starting together apply each step once."""
    done: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(7133000)")
        conn.execute(CREATE_TABLE.replace("INTEGER", "BIGINT"))
        applied = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
        for version, name, script in migrations("postgres"):
            if version in applied:
                continue
            for statement in split_statements(script):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (%s, %s, %s)",
                (version, name, now),
            )
            done.append(version)
    return done
