"""Wake-ups of other nodes (PostgreSQL's NOTIFY) follow the commit of what they announce,
and only a commit: tidings sends them just after its transactions commit, not inside them
(inside, every commit would queue for the server-wide lock NOTIFY takes until its WAL
flush)."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from tidings.client import Tidings


def test_a_wake_up_follows_a_commit_and_never_a_rollback(t: Tidings) -> None:
    url = t.settings.db
    if not url.startswith("postgres"):
        pytest.skip("one node per SQLite file: its wake-ups stay in its process")
    driver = t.store.driver
    tag = uuid.uuid4().hex  # other tests' nodes notify on the same server
    with psycopg.connect(url, autocommit=True) as listener:
        listener.execute("LISTEN tidings")
        with pytest.raises(RuntimeError), driver.tx() as conn:
            driver.notify(conn, f"{tag}-rolled-back")
            raise RuntimeError("the transaction fails")
        with driver.tx() as conn:
            conn.execute("CREATE TABLE wake_probe (n int)")
            driver.notify(conn, f"{tag}-a")
            driver.notify(conn, f"{tag}-a")
            driver.notify(conn, f"{tag}-b")
            # not before the commit: a woken node must find the rows
            assert not [n for n in listener.notifies(timeout=0.3) if tag in n.payload]
        got = [n.payload for n in listener.notifies(timeout=1) if tag in n.payload]
        assert sorted(got) == [f"{tag}-a", f"{tag}-b"]
        with driver.auto() as conn:  # a statement that committed on its own, then its wake
            conn.execute("DROP TABLE wake_probe")
            driver.notify(conn, f"{tag}-c")
        got = [n.payload for n in listener.notifies(timeout=1) if tag in n.payload]
        assert got == [f"{tag}-c"]
