"""Transactional enqueue (the outbox problem) against the real PostgreSQL: a job sent on
the application's own connection commits with the application's row, or vanishes with
it on rollback; so does a job sent for much later (a one-shot schedule)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest
import sqlalchemy
from sqlalchemy.orm import Session
from tests.conftest import PG_BASE, pg_url

import tidings
from tidings.errors import ValidationError
from tidings.tasks.sending import JOBS_GROUP


@pytest.fixture
def app(pg_schema: str) -> Iterator[tidings.App]:
    a = tidings.App(queue="jobs", db=pg_url(pg_schema))
    yield a
    a.close()


@pytest.fixture
def orders(pg_schema: str) -> Iterator[psycopg.Connection]:
    """The application's own connection, its table in its own schema (`public` would be
    shared by parallel tests): tidings' tables are found whatever its search_path."""
    with psycopg.connect(PG_BASE) as conn:
        conn.execute(f'CREATE TABLE "{pg_schema}".app_orders (id int PRIMARY KEY)')
        conn.commit()
        yield conn


def count_jobs(app: tidings.App) -> int:
    info = app.client().queues.describe("jobs").counts
    return info.visible + info.delayed


def test_a_job_commits_and_rolls_back_with_the_callers_transaction(
        app: tidings.App, orders: psycopg.Connection, pg_schema: str) -> None:
    @app.task
    def confirm(order_id: int) -> None: ...

    app.declare(app.client())
    table = f'"{pg_schema}".app_orders'
    orders.execute(f"INSERT INTO {table} VALUES (1)")  # noqa: S608 - fixed test name
    confirm.send(order_id=1, connection=orders)
    confirm.send_in(timedelta(days=30), order_id=1, connection=orders)
    # not visible to anyone else before the commit
    assert count_jobs(app) == 0
    assert app.client().schedules.list(group=JOBS_GROUP)[0] == []
    orders.rollback()
    assert count_jobs(app) == 0 and app.client().schedules.list(group=JOBS_GROUP)[0] == []

    orders.execute(f"INSERT INTO {table} VALUES (2)")  # noqa: S608
    confirm.send(order_id=2, connection=orders)
    confirm.send_in(timedelta(days=30), order_id=2, connection=orders)
    # the caller's statements after the send still see their own search_path
    assert orders.execute("SHOW search_path").fetchone() == ('"$user", public',)
    orders.commit()
    assert count_jobs(app) == 1
    assert len(app.client().schedules.list(group=JOBS_GROUP)[0]) == 1
    assert orders.execute(f"SELECT id FROM {table}").fetchall() == [(2,)]  # noqa: S608


def test_a_sqlalchemy_session_works_too(app: tidings.App, orders: psycopg.Connection,
                                        pg_schema: str) -> None:
    @app.task
    def confirm(order_id: int) -> None: ...

    app.declare(app.client())
    engine = sqlalchemy.create_engine(PG_BASE.replace("postgresql://",
                                                      "postgresql+psycopg://"))
    try:
        with Session(engine) as session:
            session.execute(sqlalchemy.text(
                f'INSERT INTO "{pg_schema}".app_orders VALUES (7)'))  # noqa: S608  # noqa: S608
            confirm.send(order_id=7, connection=session)
            session.rollback()
        assert count_jobs(app) == 0
        with Session(engine) as session, session.begin():
            session.execute(sqlalchemy.text(
                f'INSERT INTO "{pg_schema}".app_orders VALUES (8)'))  # noqa: S608  # noqa: S608
            confirm.send(order_id=8, connection=session)
        assert count_jobs(app) == 1
    finally:
        engine.dispose()


def test_sqlite_and_foreign_connections_are_refused(tmp_path: object) -> None:
    app = tidings.App(queue="jobs", db=f"sqlite:///{tmp_path}/t.db")

    @app.task
    def confirm(order_id: int) -> None: ...

    try:
        with pytest.raises(ValidationError, match="connection.*PostgreSQL"):
            confirm.send(order_id=1, connection=object())
    finally:
        app.close()
