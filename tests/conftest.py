"""Shared fixtures. Storage tests run against every backend in BACKENDS.

The store is always real: SQLite files under `tmp_path` (PostgreSQL joins with its backend
issue). Time is a `FrozenClock` wherever a test can step it instead of sleeping.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.settings import Settings

BACKENDS = ["sqlite"]


def backend_url(backend: str, tmp_path: object) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path}/tidings.db"
    raise AssertionError(backend)


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: object) -> str:
    return backend_url(request.param, tmp_path)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def t(db_url: str, clock: FrozenClock) -> Iterator[Tidings]:
    client = Tidings(settings=Settings(db=db_url), clock=clock)
    yield client
    client.close()
