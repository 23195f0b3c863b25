"""Numbered schema migrations, applied on open and recorded in `schema_migrations`.

Each backend keeps its own `sql/<backend>/NNNN_name.sql` files, with the same numbers and
names (a test checks both give the same tables, columns, indexes and constraints). All
pending steps run in one transaction with their records, under the driver's lock (an
advisory lock on PostgreSQL; SQLite's `BEGIN IMMEDIATE` serialises by itself), so nodes
opening a new database together apply each step once.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from tidings.store.sqlfiles import migrations

if TYPE_CHECKING:
    from tidings.store.driver import Driver

MIGRATION_LOCK = 7133000


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


def migrate(driver: Driver, now: int) -> list[int]:
    """Apply pending migrations; return the versions applied by this call."""
    q = driver.queries
    done: list[int] = []
    with driver.tx() as conn:
        driver.lock(conn, MIGRATION_LOCK)
        conn.execute(q["create_migrations_table"])
        applied = {row[0] for row in conn.execute(q["applied_migrations"])}
        for version, name, script in migrations(driver.name):
            if version in applied:
                continue
            for statement in split_statements(script):
                conn.execute(statement)
            conn.execute(q["record_migration"], (version, name, now))
            done.append(version)
    return done
