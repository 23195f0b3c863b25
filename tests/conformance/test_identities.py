"""Identities derived from rows are never issued twice, on every backend.

A schedule that fired, was deleted, and was created again for the same instant used to get
the deleted row's id on SQLite, and with it the same execution id: the same delivery job
identity (already done, so acknowledged without running), the same FIFO deduplication id
(dropped as a copy) and the same email log row (already SENT). The tests below create,
fire, delete and re-create, with the clock frozen (the hardest case: every instant the
same) and in random orders, and check that no derived id repeats.
"""

from __future__ import annotations

import json
import sqlite3

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.model.firings import execution_id
from tidings.model.schedules import ActionAfterCompletion, ScheduleSpec, Target, TargetKind
from tidings.queues.internal import DELIVERY_QUEUE, ensure_internal_queues
from tidings.runtime.bridge import Bridge
from tidings.schedules.dispatcher import Dispatcher
from tidings.settings import Settings
from tidings.store import open_store, sqlite_path
from tidings.store.migrate import split_statements
from tidings.store.sqlfiles import migrations

PAST = "at(2020-01-01T00:00:00)"


def _dispatcher(t: Tidings) -> Dispatcher:
    ensure_internal_queues(t.queues)
    return Dispatcher(t.schedules, t.queues, t.store, t.clock, t.notifier, Bridge(1))


def _one_shot(name: str, target: Target) -> ScheduleSpec:
    return ScheduleSpec(name, PAST, target,
                        action_after_completion=ActionAfterCompletion.DELETE)


def _derived_ids(t: Tidings) -> list[str]:
    """Every execution id the firings so far wrote: the FIFO messages' deduplication ids
    and the delivery jobs' ids (nothing consumes them here, so all are still there)."""
    ids = []
    for queue, field in (("orders.fifo", "dedup"), (DELIVERY_QUEUE, "job")):
        token = None
        while True:
            views, token = t.queues.peek(queue, limit=1000, next_token=token)
            for v in views:
                if field == "dedup":
                    ids.append(v.message.deduplication_id)
                else:
                    doc = json.loads(v.message.body)
                    assert doc["id"] == doc["context"]["execution_id"]
                    ids.append(doc["id"])
            if token is None:
                break
    return ids


def test_recreated_one_shots_for_the_same_instant_fire_with_new_ids(
        t: Tidings, clock: FrozenClock) -> None:
    """The issue's sequence: six one-shots in the past, each fired and deleted before the
    next is created, on a frozen clock; every firing has an id of its own."""
    dispatcher = _dispatcher(t)
    t.queues.create_queue("orders.fifo")
    fifo = Target(TargetKind.QUEUE, "orders.fifo", message_group_id="g")
    hook = Target(TargetKind.WEBHOOK, "http://127.0.0.1:9/hook")
    seen_ids = []
    for i in range(6):
        s = t.schedules.create(_one_shot(f"fifo-{i}", fifo))
        w = t.schedules.create(_one_shot(f"hook-{i}", hook))
        seen_ids += [s.id, w.id]
        assert dispatcher.fire_due() == 2
    assert len(set(seen_ids)) == len(seen_ids), "a schedule id was issued twice"
    assert t.queues.describe("orders.fifo").counts.visible == 6  # none taken for a copy
    ids = _derived_ids(t)
    assert len(ids) == 12 and len(set(ids)) == 12


ops = st.lists(st.tuples(st.sampled_from(["create", "delete", "fire", "tick"]),
                         st.integers(0, 3), st.sampled_from(["fifo", "hook"])),
               min_size=1, max_size=25)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=ops)
def test_no_derived_id_ever_repeats(t: Tidings, clock: FrozenClock,
                                    steps: list[tuple[str, int, str]]) -> None:
    """Random creates (recurring and one-shot), deletes, firings and clock steps (often
    none: the instants collide), over one database for every example: the schedule ids and
    the execution ids written by all the firings never repeat, and every firing wrote one
    (a FIFO queue would drop a repeated one as a copy, hiding it)."""
    dispatcher = _dispatcher(t)
    if "orders.fifo" not in {r.name for r in t.queues.list_queues()[0]}:
        t.queues.create_queue("orders.fifo")
    fired = len(_derived_ids(t))  # what earlier examples left in this database
    targets = {"fifo": Target(TargetKind.QUEUE, "orders.fifo", message_group_id="g"),
               "hook": Target(TargetKind.WEBHOOK, "http://127.0.0.1:9/hook")}
    live = {s.name for s in t.schedules.list()[0]}
    for op, n, kind in steps:
        name = f"s{n}"
        if op == "create" and name not in live:
            expression = PAST if n % 2 else "rate(1 minute)"
            t.schedules.create(ScheduleSpec(
                name, expression, targets[kind], action_after_completion=(
                    ActionAfterCompletion.DELETE if n % 2 else ActionAfterCompletion.NONE)))
            live.add(name)
        elif op == "delete" and name in live:
            t.schedules.delete(name)
            live.discard(name)
        elif op == "fire":
            fired += dispatcher.fire_due()
            live = {s.name for s in t.schedules.list()[0]}
        elif op == "tick":
            clock.advance(60_000)
    ids = _derived_ids(t)
    assert len(set(ids)) == len(ids), "an execution id was issued twice"
    assert len(ids) == fired, "a firing's message was dropped as a copy of another"


def test_execution_ids_name_the_schedules_incarnation() -> None:
    """The id of an occurrence depends on the schedule's row id and creation instant: a
    schedule made after a restore took the id sequence back differs from the one before."""
    assert execution_id(7, 1000, 5000) == execution_id(7, 1000, 5000)
    assert len({execution_id(7, 1000, 5000), execution_id(7, 1001, 5000),
                execution_id(8, 1000, 5000), execution_id(7, 1000, 5001)}) == 4


def test_an_upgraded_sqlite_database_issues_no_id_again(tmp_path: object) -> None:
    """A database made before ids were AUTOINCREMENT, whose newest schedule and queue were
    deleted (and whose firing history and dead letters still name them): after the
    upgrade no id any row names, or the deleted newest one had, is issued again."""
    from pathlib import Path

    assert isinstance(tmp_path, Path)
    url = f"sqlite:///{tmp_path / 'old.db'}"
    conn = sqlite3.connect(sqlite_path(url))
    conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, "
                 "name TEXT NOT NULL, applied_at INTEGER NOT NULL)")
    for version, name, script in migrations("sqlite"):
        if version >= 14:
            break
        for statement in split_statements(script):
            conn.execute(statement)
        conn.execute("INSERT INTO schema_migrations VALUES (?, ?, 0)", (version, name))
    for i in range(1, 4):
        conn.execute("INSERT INTO schedules (group_name, name, state, expression, timezone, "
                     "target, action_after_completion, created_at, modified_at) VALUES "
                     "('default', ?, 'DISABLED', ?, 'UTC', '{}', 'NONE', 0, 0)", (f"s{i}", PAST))
        conn.execute("INSERT INTO queues (name, fifo, attributes, created_at, modified_at) "
                     "VALUES (?, 0, '{}', 0, 0)", (f"q{i}",))
    conn.execute("DELETE FROM schedules WHERE id = 3")
    conn.execute("DELETE FROM queues WHERE id = 3")
    # what still names ids beyond the rows: a firing of schedule 5 (deleted long ago) and
    # a dead letter whose source queue 6 is gone
    conn.execute("INSERT INTO firings (schedule_id, occurrence, at, outcome, attempts) "
                 "VALUES (5, 0, 0, 'delivered', 1)")
    conn.execute("INSERT INTO messages (queue_id, message_id, body, md5_body, visible_at, "
                 "sent_at, expires_at, source_queue_id) VALUES (1, 'm', 'b', 'x', 0, 0, 1, 6)")
    conn.commit()
    conn.close()
    open_store(url, now=1).close()  # migrates
    with Tidings(settings=Settings(db=url), clock=FrozenClock()) as t:
        t.queues.create_queue("jobs")
        s = t.schedules.create(ScheduleSpec("new", "rate(1 hour)", Target(
            TargetKind.QUEUE, "jobs")))
        assert t.queues.get_queue("jobs").id == 7
        assert s.id == 6
