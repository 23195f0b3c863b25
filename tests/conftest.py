"""Shared fixtures. Storage tests run against every backend in BACKENDS.

The store is always real: SQLite files under `tmp_path` (PostgreSQL joins with its backend
issue). Time is a `FrozenClock` wherever a test can step it instead of sleeping.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest

from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.settings import Settings

T = TypeVar("T")

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


def module_backend(backend: str, tmp: Path, serve: Callable[[str], Iterator[T]],
                   *endpoint_vars: str) -> Iterator[T]:
    """What `serve(db_url)` yields for a module's tests: over a SQLite file in `tmp` or a
    PostgreSQL schema of its own, with the machine's AWS configuration (files, profile,
    endpoint variables such as `endpoint_vars`) kept away from the boto3 clients."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_CONFIG_FILE", str(tmp / "no-config"))
        mp.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp / "no-credentials"))
        for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", *endpoint_vars):
            mp.delenv(var, raising=False)
        if backend == "sqlite":
            yield from serve(f"sqlite:///{tmp}/t.db")
        else:
            with module_pg_schema() as schema:
                yield from serve(pg_url(schema))


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


@pytest.fixture(autouse=True)
def _every_tidings_is_closed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A test closes every `Tidings` it opens (`with`, or a fixture that does): an open one
    keeps a database connection, maybe a LISTEN thread, and on SQLite a file handle that
    outlives the test's temporary directory. Module-scoped servers open theirs before this
    runs and are not counted."""
    opened: list[Tidings] = []
    closed: set[int] = set()
    init, close = Tidings.__init__, Tidings.close

    def tracked_init(self: Tidings, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        opened.append(self)

    def tracked_close(self: Tidings) -> None:
        closed.add(id(self))
        close(self)

    monkeypatch.setattr(Tidings, "__init__", tracked_init)
    monkeypatch.setattr(Tidings, "close", tracked_close)
    yield
    left = [t.settings.db for t in opened if id(t) not in closed]
    assert left == [], "the test left these Tidings open"
