"""Wake-ups: other nodes' (PostgreSQL's NOTIFY, sent inside the transaction it announces)
arrive with its commit and only a commit; a schedule wakes the dispatchers only when it is
due before their fallback poll would find it."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from tidings.client import Tidings
from tidings.clock import FrozenClock, from_ms
from tidings.model.schedules import ScheduleSpec, Target, TargetKind
from tidings.notify.base import SCHEDULES_CHANNEL, SCHEDULES_POLL_S, WAKE_HORIZON_MS
from tidings.notify.postgres import listen_channel


def test_a_wake_up_follows_a_commit_and_never_a_rollback(t: Tidings) -> None:
    url = t.settings.db
    if not url.startswith("postgres"):
        pytest.skip("NOTIFY inside the transaction is PostgreSQL's; SQLite's wake-ups go "
                    "after the commit (tests/unit/notify/test_sqlite_notifier.py)")
    driver = t.store.driver
    tag = uuid.uuid4().hex  # other tests' nodes notify on the same server
    with psycopg.connect(url, autocommit=True) as listener:
        listen_channel(listener)
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


def test_a_wake_up_reaches_the_nodes_of_its_own_schema_only(t: Tidings) -> None:
    """Two tidings databases in one PostgreSQL database (a schema each) do not wake each
    other's nodes: each schema has its own channel."""
    url = t.settings.db
    if not url.startswith("postgres"):
        pytest.skip("schemas and LISTEN/NOTIFY are PostgreSQL's")
    from tests.conftest import module_pg_schema, pg_url
    tag = uuid.uuid4().hex
    with module_pg_schema() as other, \
            psycopg.connect(url, autocommit=True) as mine, \
            psycopg.connect(pg_url(other), autocommit=True) as theirs:
        assert listen_channel(mine) != listen_channel(theirs)
        with t.store.driver.tx() as conn:
            t.store.driver.notify(conn, tag)
        assert [n.payload for n in mine.notifies(timeout=1) if n.payload == tag] == [tag]
        assert [n.payload for n in theirs.notifies(timeout=0.3) if n.payload == tag] == []


def test_only_a_schedule_due_soon_wakes_the_dispatchers(t: Tidings, clock: FrozenClock,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        ) -> None:
    """Created one at a time, in bulk or by an update, a schedule due beyond the horizon
    sends no wake-up (no NOTIFY, no local wake); one due within it wakes them at once."""
    assert WAKE_HORIZON_MS >= 2 * SCHEDULES_POLL_S * 1000  # a sleeper has looked again
    t.queues.create_queue("jobs")
    sent: list[str] = []
    driver = t.store.driver
    real: Callable[[Any, str], None] = driver.notify

    def spy(conn: Any, channel: str) -> None:  # records, then sends it for real
        sent.append(channel)
        real(conn, channel)

    monkeypatch.setattr(driver, "notify", spy)

    def woke(action: Callable[[], object]) -> tuple[bool, bool]:
        """(the store sent a wake-up, the local notifier moved) for `action`."""
        sent.clear()
        seen = t.notifier.version(SCHEDULES_CHANNEL)
        action()
        return SCHEDULES_CHANNEL in sent, t.notifier.version(SCHEDULES_CHANNEL) != seen

    def spec(name: str, ahead_ms: int) -> ScheduleSpec:
        return ScheduleSpec.once(name, from_ms(clock.now_ms() + ahead_ms),
                                 Target(TargetKind.QUEUE, "jobs"))

    later, soon = WAKE_HORIZON_MS + 1_000, WAKE_HORIZON_MS - 1_000
    assert woke(lambda: t.schedules.create(spec("later", later))) == (False, False)
    assert woke(lambda: list(t.schedules.create_many(
        [spec("bulk-a", later), spec("bulk-b", 3_600_000)]))) == (False, False)
    assert woke(lambda: t.schedules.update(spec("later", later + 5_000))) == (False, False)
    assert woke(lambda: t.schedules.create(spec("soon", soon))) == (True, True)
    assert woke(lambda: list(t.schedules.create_many(
        [spec("bulk-c", 3_600_000), spec("bulk-d", 0)]))) == (True, True)
    assert woke(lambda: t.schedules.update(spec("later", soon))) == (True, True)
