"""Deleted rows' space is made reusable: by the database itself where it does (SQLite's
free list, PostgreSQL's autovacuum), by tidings where it does not (autovacuum off)."""

from __future__ import annotations

import time

import psycopg

from tidings.client import Tidings


def test_reclaim_space_vacuums_only_where_the_database_would_not(t: Tidings) -> None:
    t.queues.create_queue("churn")
    for _ in range(5):
        t.queues.send("churn", "x")
    t.queues.purge_queue("churn")
    url = t.settings.db
    if url.startswith("sqlite"):
        assert t.store.reclaim_space() is False  # the free list is reused by itself
        return
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT current_setting('autovacuum')").fetchone()
        assert row is not None
        autovacuum_on = row[0] == "on"
        assert t.store.reclaim_space() is (not autovacuum_on)
        if autovacuum_on:
            return
        # the VACUUM ran: PostgreSQL records it (its statistics arrive within moments)
        deadline = time.monotonic() + 10
        while True:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            found = conn.execute(
                "SELECT last_vacuum FROM pg_stat_user_tables WHERE relname = 'messages' "
                "AND schemaname = current_schema()").fetchone()
            if found and found[0] is not None:
                break
            assert time.monotonic() < deadline, "messages was not vacuumed"
            time.sleep(0.2)
