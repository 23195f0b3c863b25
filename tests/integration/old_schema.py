"""Databases as other releases left them, for the upgrade tests.

`first_release(url)` builds what the first release made: its migrations (1-4) applied
and recorded as it recorded them (no `schema` row in `meta`: that release wrote none),
then rows of every kind written with SQL in that schema's columns: queues, messages (one
leased, one delayed, one dead-lettered, one FIFO), a FIFO deduplication record, a done
job, message move tasks, schedule groups and schedules, a template, a suppression, a
delivery and its recipient, a campaign. `NEWER` is a script that opens a database as a
newer release would: one more migration (99) and another version number.
"""

from __future__ import annotations

import json
import sqlite3
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from tidings.model.campaigns import Step
from tidings.model.queues import QueueAttributes, RedrivePolicy
from tidings.model.schedules import Target, TargetKind
from tidings.store import sqlite_path
from tidings.store.migrate import split_statements
from tidings.store.sqlfiles import migrations, queries

FIRST_RELEASE = 4  # its last migration
SECRET = bytes(range(32))  # the receipt-signing key that release kept in `meta`
DAY_MS = 86_400_000

#: The tables of the first schema and their columns, in the order compared: every column
#: but `schedules.claim_token` (a firing pass's transient claim, which migration 15 drops:
#: the pass now holds its claim itself and compares a row `version`).
TABLES: dict[str, tuple[str, ...]] = {
    "meta": ("key", "value"),
    "queues": ("id", "name", "fifo", "attributes", "created_at", "modified_at", "purged_at"),
    "messages": ("id", "queue_id", "message_id", "body", "md5_body", "attributes",
                 "md5_attributes", "visible_at", "lease_token", "receive_count",
                 "first_received_at", "sent_at", "expires_at", "group_id", "deduplication_id",
                 "source_queue_id", "last_error"),
    "fifo_dedup": ("queue_id", "deduplication_id", "message_id", "sequence_number",
                   "expires_at"),
    "schedule_groups": ("name", "created_at", "modified_at", "tags"),
    "schedules": ("id", "group_name", "name", "state", "expression", "timezone", "start_at",
                  "end_at", "flex_minutes", "target", "action_after_completion",
                  "description", "client_token", "next_fire_at", "due_at", "last_fired_at",
                  "created_at", "modified_at"),
    "email_templates": ("name", "subject", "html", "text", "created_at", "modified_at"),
    "suppressions": ("address", "reason", "created_at"),
    "email_deliveries": ("seq", "id", "message_id", "execution_id", "schedule", "template",
                         "sender", "recipients", "state", "detail", "attempts", "created_at",
                         "updated_at"),
    "email_delivery_recipients": ("address", "delivery_seq"),
    "campaigns": ("name", "steps", "template", "status", "rows_read", "schedules_created",
                  "row_errors", "cancelled", "created_at", "modified_at"),
}
KEYS = {"meta": "key", "fifo_dedup": "deduplication_id", "schedule_groups": "name",
        "email_templates": "name", "suppressions": "address", "email_deliveries": "seq",
        "email_delivery_recipients": "address", "campaigns": "name"}


def backend_of(url: str) -> str:
    return "sqlite" if url.startswith("sqlite") else "postgres"


class Raw:
    """A plain connection, autocommit, `?` placeholders on both backends."""

    def __init__(self, url: str) -> None:
        self.backend = backend_of(url)
        self.conn: Any = (sqlite3.connect(sqlite_path(url), isolation_level=None)
                          if self.backend == "sqlite" else psycopg.connect(url, autocommit=True))

    def run(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if self.backend == "postgres":
            sql = sql.replace("?", "%s")
        cur = self.conn.execute(sql, params)
        return [tuple(r) for r in cur.fetchall()] if cur.description else []

    def one(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        return self.run(sql, params)[0][0]

    def close(self) -> None:
        self.conn.close()


@contextmanager
def raw(url: str) -> Iterator[Raw]:
    r = Raw(url)
    try:
        yield r
    finally:
        r.close()


def dump(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the first schema's tables, in those columns, by key."""
    with raw(url) as db:
        out = {}
        for table, columns in TABLES.items():
            order = KEYS.get(table, "id")
            rows = db.run(f"SELECT {', '.join(columns)} FROM {table} ORDER BY {order}")  # noqa: S608
            out[table] = [tuple(bytes(v) if isinstance(v, memoryview) else
                                bool(v) if c == "fifo" else v for v, c in zip(r, columns,
                                                                            strict=True))
                          for r in rows]
        return out


def first_release(url: str, now: int) -> dict[str, Any]:
    """Build the first release's database at `url` (empty), its rows timed around `now`;
    returns the ids the rows got."""
    backend = backend_of(url)
    with raw(url) as db:
        db.run(queries(backend)["create_migrations_table"])
        for version, name, script in migrations(backend)[:FIRST_RELEASE]:
            for statement in split_statements(script):
                db.conn.execute(statement)
            db.run("INSERT INTO schema_migrations VALUES (?, ?, ?)", (version, name, now))
        return _fill(db, now)


def _fill(db: Raw, t: int) -> dict[str, Any]:
    db.run("INSERT INTO meta (key, value) VALUES (?, ?)", ("receipt-secret", SECRET))
    ids = {}
    queues = {
        "jobs-dlq": QueueAttributes(),
        "jobs": QueueAttributes(redrive_policy=RedrivePolicy("jobs-dlq", 3)),
        "orders.fifo": QueueAttributes(fifo=True, content_based_deduplication=True),
    }
    for name, attrs in queues.items():
        ids[name] = db.one(
            "INSERT INTO queues (name, fifo, attributes, created_at, modified_at) "
            "VALUES (?, ?, ?, ?, ?) RETURNING id",
            (name, attrs.fifo, json.dumps(attrs.to_json(), sort_keys=True), t - DAY_MS,
             t - DAY_MS))
    expires = t + 4 * DAY_MS
    messages = [  # (name, queue, body, visible_at, lease, receives, group, dedup, source, error)
        ("visible", "jobs", '{"type": "invoice", "id": 1}', t - 1000, None, 0, None, None,
         None, None),
        ("leased", "jobs", '{"type": "invoice", "id": 2}', t + 3_600_000, 7_777, 1, None,
         None, None, None),
        ("delayed", "jobs", '{"type": "invoice", "id": 3}', t + DAY_MS, None, 0, None, None,
         None, None),
        ("dead", "jobs-dlq", '{"type": "invoice", "id": 4}', t - 5000, 55, 3, None, None,
         ids["jobs"], "handler raised: ValueError"),
        ("fifo", "orders.fifo", '{"order": 9}', t - 1000, None, 0, "customer-9", "dedup-9",
         None, None),
    ]
    for name, queue, body, visible, lease, receives, group, dedup, source, error in messages:
        ids[name] = db.one(
            "INSERT INTO messages (queue_id, message_id, body, md5_body, attributes, "
            "md5_attributes, visible_at, lease_token, receive_count, first_received_at, "
            "sent_at, expires_at, group_id, deduplication_id, source_queue_id, last_error) "
            "VALUES (?, ?, ?, ?, NULL, NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (ids[queue], f"m-{name}", body, f"md5-{name}", visible, lease, receives,
             t - 60_000 if receives else None, t - 120_000, expires, group, dedup, source,
             error))
    db.run("INSERT INTO fifo_dedup VALUES (?, ?, ?, ?, ?)",
           (ids["orders.fifo"], "dedup-9", "m-fifo", ids["fifo"], t + 300_000))
    counts = {"jobs": 3, "jobs-dlq": 1, "orders.fifo": 1}
    for name, n in counts.items():
        if db.backend == "sqlite":  # the first SQLite schema kept the count on the queue
            db.run("UPDATE queues SET message_count = ? WHERE id = ?", (n, ids[name]))
        else:
            db.run("INSERT INTO queue_counts VALUES (?, 0, ?)", (ids[name], n))
    db.run("INSERT INTO job_results VALUES (?, ?, ?)", (ids["jobs"], "invoice:0", t - 5000))
    db.run("INSERT INTO move_tasks (handle, source_queue_id, destination_queue_id, "
           "max_per_second, status, moved, to_move, started_at, failure_reason) "
           "VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL), (?, ?, ?, ?, ?, ?, ?, ?, NULL)",
           ("move-1", ids["jobs-dlq"], ids["jobs"], 10, "COMPLETED", 2, 2, t - 9000,
            "move-2", ids["jobs-dlq"], ids["jobs"], 5, "CANCELLING", 0, 1, t - 4000))
    db.run("INSERT INTO schedule_groups (name, created_at, modified_at, tags) "
           "VALUES (?, ?, ?, ?)", ("spring", t - DAY_MS, t - DAY_MS, '{"team": "growth"}'))
    queue_target = Target(TargetKind.QUEUE, "jobs", input='{"type": "reconcile", "id": "n"}')
    email_target = Target.email({"FromEmailAddress": "news@example.com",
                                 "Destination": {"ToAddresses": ["alice@example.org"]},
                                 "Content": {"Template": {"TemplateName": "welcome",
                                                          "TemplateData": "{}"}}})
    schedules = [  # (group, name, state, expression, zone, target, after, next, due)
        ("default", "nightly", "ENABLED", "cron(0 2 * * ? *)", "Europe/Paris", queue_target,
         "NONE", t + 3_600_000, t + 3_600_000),
        ("spring", "alice-welcome", "ENABLED", "at(2099-03-01T09:00:00)", "America/New_York",
         email_target, "DELETE", 4_076_060_400_000, 4_076_060_400_000),
        ("default", "paused", "DISABLED", "rate(5 minutes)", "UTC", queue_target, "NONE",
         t + 300_000, None),
    ]
    for group, name, state, expression, zone, target, after, nxt, due in schedules:
        ids[name] = db.one(
            "INSERT INTO schedules (group_name, name, state, expression, timezone, target, "
            "action_after_completion, description, next_fire_at, due_at, created_at, "
            "modified_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (group, name, state, expression, zone, json.dumps(target.to_json()), after,
             f"the {name} schedule", nxt, due, t - DAY_MS, t - DAY_MS))
    db.run("INSERT INTO email_templates VALUES (?, ?, ?, ?, ?, ?)",
           ("welcome", "Welcome {{name}}", "<p>Hi {{name}}</p>", "Hi {{name}}", t - DAY_MS,
            t - DAY_MS))
    db.run("INSERT INTO suppressions VALUES (?, ?, ?)", ("bounced@example.org", "BOUNCE",
                                                        t - 7000))
    ids["delivery"] = db.one(
        "INSERT INTO email_deliveries (id, message_id, execution_id, schedule, template, "
        "sender, recipients, state, detail, attempts, created_at, updated_at) VALUES "
        "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq",
        ("exec-1", "<exec-1@tidings>", "exec-1", "spring/bob-welcome", "welcome",
         "news@example.com", '["bob@example.org"]', "SENT", "250 2.0.0 OK", 1, t - 8000,
         t - 7900))
    db.run("INSERT INTO email_delivery_recipients VALUES (?, ?)",
           ("bob@example.org", ids["delivery"]))
    steps = [Step("welcome", 0, "09:00"), Step("nudge", 2, "10:00", "welcome")]
    db.run("INSERT INTO campaigns (name, steps, template, status, rows_read, "
           "schedules_created, row_errors, cancelled, created_at, modified_at) "
           "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
           ("spring", json.dumps([s.to_json() for s in steps]), "welcome", "ACTIVE", 2, 4, 0,
            0, t - DAY_MS, t - DAY_MS))
    return ids


#: `python - URL additive|breaking|rename`: open the database at URL as a newer release
#: (tidings 9.9.0, whose migration 99 is additive, or not, or renames the messages table)
#: would: through the same code path, with one more migration.
NEWER = textwrap.dedent("""
    import sys

    import tidings.store.migrate as m
    from tidings.store import open_store

    url, kind = sys.argv[1], sys.argv[2]
    script = {
        "additive": "-- additive: a table older nodes never read\\n"
                    "CREATE TABLE from_the_future (id INTEGER PRIMARY KEY);",
        "breaking": "CREATE TABLE from_the_future (id INTEGER PRIMARY KEY);",
        "rename": "ALTER TABLE messages RENAME TO messages_v2;",
    }[kind]
    ours = m.known
    m.known = lambda backend: [*ours(backend), m.Migration(99, "from_the_future", script)]
    m.VERSION = "9.9.0"
    open_store(url, now=1).close()
""")
