"""Both backends' migrated schemas say the same thing: the same tables, the same columns
(by meaning: an integer is an integer whatever its width), the same keys, unique
constraints, indexes and CHECK constraints. `SqlStore` runs the same logic over both, so
a table or a rule that exists on one backend only would be a bug waiting for its turn."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import psycopg

from conftest import pg_url
from tidings.store import open_store

Schema = dict[str, dict[str, Any]]

_SQLITE_TYPES = {"INTEGER": "int", "TEXT": "text", "BLOB": "bytes"}
_PG_TYPES = {"bigint": "int", "integer": "int", "smallint": "int", "text": "text",
             "bytea": "bytes", "boolean": "bool"}
# SQLite has no boolean: a CHECK (x IN (0, 1)) column is one.
_BOOLEAN_CHECK = re.compile(r"^(\w+)\s+IN\s*\(\s*0\s*,\s*1\s*\)$", re.IGNORECASE)


def _checks(create_sql: str) -> list[str]:
    """The expressions of a CREATE TABLE's CHECK constraints (balanced parentheses)."""
    out = []
    for m in re.finditer(r"\bCHECK\s*\(", create_sql, re.IGNORECASE):
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(create_sql[i], 0)
            i += 1
        out.append(create_sql[m.end():i - 1].strip())
    return out


def _mentions(expression: str, columns: set[str]) -> frozenset[str]:
    return frozenset(w for w in re.findall(r"[a-z_]+", expression) if w in columns)


def sqlite_schema(path: Path) -> Schema:
    schema: Schema = {}
    with sqlite3.connect(path) as conn:
        tables = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' "
                              "AND name NOT LIKE 'sqlite_%'").fetchall()
        for table, create in tables:
            info = conn.execute(f"PRAGMA table_info({table})").fetchall()
            names = {r[1] for r in info}
            checks, booleans = [], set()
            for expr in _checks(create):
                found = _BOOLEAN_CHECK.match(expr)
                if found:
                    booleans.add(found.group(1))
                else:
                    checks.append(_mentions(expr, names))
            columns = {name: ("bool" if name in booleans else _SQLITE_TYPES[kind.upper()],
                              bool(notnull or pk)) for _, name, kind, notnull, _, pk in info}
            pk = [name for _, name, _, _, _, key in sorted(info, key=lambda r: r[5]) if key]
            unique, indexes = set(), {}
            for _, index, is_unique, origin, partial in conn.execute(
                    f"PRAGMA index_list({table})").fetchall():
                cols = tuple(r[2] for r in conn.execute(f"PRAGMA index_info({index})"))
                if origin == "u":
                    unique.add(cols)
                elif origin == "c":
                    indexes[index] = (cols, bool(is_unique), bool(partial))
            schema[table] = {"columns": columns, "pk": pk, "unique": unique,
                             "indexes": indexes, "checks": sorted(checks, key=sorted)}
    return schema


def postgres_schema(url: str) -> Schema:
    schema: Schema = {}
    with psycopg.connect(url) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema ="
            " current_schema() AND table_type = 'BASE TABLE'")]
        for table in tables:
            columns = {name: (_PG_TYPES[kind], nullable == "NO") for name, kind, nullable in
                       conn.execute("SELECT column_name, data_type, is_nullable FROM"
                                    " information_schema.columns WHERE table_schema ="
                                    " current_schema() AND table_name = %s", (table,))}
            constraints = conn.execute(
                "SELECT c.contype, array(SELECT a.attname FROM unnest(c.conkey)"
                " WITH ORDINALITY AS k(n, i) JOIN pg_attribute a ON a.attrelid = c.conrelid"
                " AND a.attnum = k.n ORDER BY k.i) FROM pg_constraint c"
                " WHERE c.conrelid = %s::regclass", (table,)).fetchall()
            pk = next((list(cols) for kind, cols in constraints if kind == "p"), [])
            unique = {tuple(cols) for kind, cols in constraints if kind == "u"}
            checks = [frozenset(cols) for kind, cols in constraints if kind == "c"]
            indexes = {}
            for index, is_unique, partial, cols in conn.execute(
                    "SELECT i.relname, x.indisunique, x.indpred IS NOT NULL,"
                    " array(SELECT a.attname FROM unnest(x.indkey) WITH ORDINALITY AS k(n, o)"
                    " JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.n"
                    " ORDER BY k.o) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid"
                    " WHERE x.indrelid = %s::regclass AND NOT EXISTS (SELECT 1 FROM"
                    " pg_constraint c WHERE c.conindid = x.indexrelid)", (table,)):
                indexes[index] = (tuple(cols), is_unique, partial)
            schema[table] = {"columns": columns, "pk": pk, "unique": unique,
                             "indexes": indexes, "checks": sorted(checks, key=sorted)}
    return schema


def test_both_backends_migrate_to_the_same_schema(tmp_path: Path, pg_schema: str) -> None:
    open_store(f"sqlite:///{tmp_path}/parity.db", now=1).close()
    open_store(pg_url(pg_schema), now=1).close()
    lite = sqlite_schema(tmp_path / "parity.db")
    pg = postgres_schema(pg_url(pg_schema))
    assert sorted(lite) == sorted(pg)
    for table in lite:
        for aspect in ("columns", "pk", "unique", "indexes", "checks"):
            assert lite[table][aspect] == pg[table][aspect], (table, aspect)
