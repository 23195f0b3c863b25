"""Shared fixtures. Storage tests run against every backend in BACKENDS.

The store is always real: SQLite files under `tmp_path` (PostgreSQL joins with its backend
issue). Time is a `FrozenClock` wherever a test can step it instead of sleeping.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.settings import Settings

BACKENDS = ["sqlite", "postgres"]

#: The PostgreSQL the tests use (scripts/test makes sure it is up). Each test gets its own
#: schema in it, dropped afterwards, so tests never see each other's rows.
PG_BASE = os.environ.get("TIDINGS_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


def pg_url(schema: str) -> str:
    sep = "&" if "?" in PG_BASE else "?"
    return f"{PG_BASE}{sep}options=-csearch_path%3D{schema}"


@contextmanager
def module_pg_schema() -> Iterator[str]:
    """A schema of its own in the test database, dropped afterwards."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_BASE, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield schema
    finally:
        with psycopg.connect(PG_BASE, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def pg_schema() -> Iterator[str]:
    with module_pg_schema() as schema:
        yield schema


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: object) -> str:
    """A fresh database on each backend: a SQLite file, or a PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/tidings.db"
    schema: str = request.getfixturevalue("pg_schema")
    return pg_url(schema)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def t(db_url: str, clock: FrozenClock) -> Iterator[Tidings]:
    client = Tidings(settings=Settings(db=db_url), clock=clock)
    yield client
    client.close()
