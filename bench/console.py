"""The console on a big database: server time of every page, with 10,000,000 schedules
and 1,000,000 messages by default.

    python bench/console.py [--db sqlite:///big.db] [--schedules 10000000]
                            [--messages 1000000] [--requests 20]

The database is filled with SQL straight into the tables (creating ten million schedules
through the API would measure the API, and take an hour); a database already filled by an
earlier run (it has the queue `bench-big`) is reused as it is. Then a real `uvicorn` serves
the app on loopback and each page is fetched `--requests` times, after one warm-up:
deep keyset pages (page 1,000 of a group, of the whole list, of the next-fire walk), a
filter matching almost nothing (bounded by the scan budget), one schedule, the queue with a
million messages, the overview, campaigns and email. It also times the once-a-minute
count the overview shows (`counts_s`), which runs on a node, not in a page view.

Final line: {"pages": {page: {"p50_ms", "p95_ms"}}, "max_p95_ms", "counts_s", "schedules",
"messages", "db"}.
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import threading
import time
from typing import Any

from _common import percentile, report  # noqa: E402  (first: it moves bench/ off the path)

from tidings.client import Tidings  # noqa: E402
from tidings.model.schedules import Target, TargetKind, target_text  # noqa: E402
from tidings.ops.nodes import take_counts  # noqa: E402
from tidings.schedules.search import _token  # noqa: E402
from tidings.server.app import create_app  # noqa: E402
from tidings.settings import Settings  # noqa: E402

QUEUE = "bench-big"
GROUPS = 100
CHUNK = 1_000_000
DAY_MS = 86_400_000

# (the group count, 100, and a day in ms, 86400000, are written out: no SQL is built)
SQLITE_SCHEDULES = """
WITH RECURSIVE c(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM c WHERE i < ?)
INSERT INTO schedules (group_name, name, state, expression, timezone, target,
                       action_after_completion, next_fire_at, due_at, created_at, modified_at)
SELECT 'g' || printf('%02d', i % 100), 's' || printf('%08d', i),
       CASE WHEN i % 1000 = 0 THEN 'DISABLED' ELSE 'ENABLED' END, 'rate(1 day)', 'UTC', ?,
       'NONE', ? + (i * 8641) % 86400000,
       CASE WHEN i % 1000 = 0 THEN NULL ELSE ? + (i * 8641) % 86400000 END, ?, ?
FROM c"""
PG_SCHEDULES = """
INSERT INTO schedules (group_name, name, state, expression, timezone, target,
                       action_after_completion, next_fire_at, due_at, created_at, modified_at)
SELECT 'g' || lpad((i %% 100)::text, 2, '0'), 's' || lpad(i::text, 8, '0'),
       CASE WHEN i %% 1000 = 0 THEN 'DISABLED' ELSE 'ENABLED' END, 'rate(1 day)', 'UTC', %s,
       'NONE', %s + (i * 8641) %% 86400000,
       CASE WHEN i %% 1000 = 0 THEN NULL ELSE %s + (i * 8641) %% 86400000 END, %s, %s
FROM generate_series(%s::bigint, %s::bigint) AS i"""
SQLITE_MESSAGES = """
WITH RECURSIVE c(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM c WHERE i < ?)
INSERT INTO messages (queue_id, message_id, body, md5_body, visible_at, sent_at, expires_at)
SELECT ?, 'm' || i, '{"n": ' || i || '}', '', ? + i, ? + i, ? FROM c"""
PG_MESSAGES = """
INSERT INTO messages (queue_id, message_id, body, md5_body, visible_at, sent_at, expires_at)
SELECT %s, 'm' || i, '{"n": ' || i || '}', '', %s + i, %s + i, %s
FROM generate_series(%s::bigint, %s::bigint) AS i"""


def fill(t: Tidings, schedules: int, messages: int) -> None:
    pg = t.database_url.startswith("postgres")
    driver = t.store.driver  # type: ignore[attr-defined]
    t.queues.create_queue(QUEUE, retention_s=14 * 86400)
    queue_id = t.queues.get_queue(QUEUE).id
    target = target_text(Target(TargetKind.QUEUE, QUEUE, input='{"bench": true}'))
    now = t.clock.now_ms()
    for group in range(GROUPS):
        t.schedules.create_group(f"g{group:02d}")
    started = time.perf_counter()
    for low in range(0, schedules, CHUNK):
        high = min(low + CHUNK, schedules) - 1
        with driver.tx() as conn:
            if pg:
                conn.execute(PG_SCHEDULES, (target, now, now, now, now, low, high))
            else:
                conn.execute(SQLITE_SCHEDULES, (low, high, target, now, now, now, now))
        print(f"  {high + 1:,} schedules ({time.perf_counter() - started:.0f} s)",
              file=sys.stderr)
    for low in range(0, messages, CHUNK):
        high = min(low + CHUNK, messages) - 1
        expires = now + 14 * DAY_MS
        with driver.tx() as conn:
            if pg:
                conn.execute(PG_MESSAGES, (queue_id, now - DAY_MS, now - DAY_MS, expires,
                                           low, high))
            else:
                conn.execute(SQLITE_MESSAGES, (low, high, queue_id, now - DAY_MS,
                                               now - DAY_MS, expires))
            conn.execute(driver.queries["add_count"], (queue_id, 0, high - low + 1))
        print(f"  {high + 1:,} messages ({time.perf_counter() - started:.0f} s)",
              file=sys.stderr)
    if pg:
        with driver.auto() as conn:
            conn.execute("ANALYZE")
    else:
        with driver.auto() as conn:
            conn.execute("ANALYZE")


def serve(app: object) -> tuple[Any, str]:
    import uvicorn  # (after _common: see there)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))  # type: ignore[arg-type]
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return server, f"http://127.0.0.1:{port}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", default=None)
    parser.add_argument("--schedules", type=int, default=10_000_000)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args()
    db = args.db or f"sqlite:///{tempfile.mkdtemp(prefix='tidings-bench-')}/console.db"
    t = Tidings(settings=Settings(db=db))
    try:
        t.queues.get_queue(QUEUE)
        print("reusing the filled database", file=sys.stderr)
    except Exception:
        fill(t, args.schedules, args.messages)
    counted = time.perf_counter()
    take_counts(t.store, t.clock.now_ms())  # what a node does once a minute
    counts_s = time.perf_counter() - counted

    n = args.schedules
    deep = 50 * 1000  # the first row of page 1,001 at 50 a page
    now = t.clock.now_ms()
    pages = {
        "overview": "/ui/",
        "queues": "/ui/queues",
        "queue_1m_messages": f"/ui/queues/{QUEUE}",
        "schedules_page_1": "/ui/schedules",
        "schedules_page_1000": "/ui/schedules?after=" + _token(["n", "g00",
                                                                f"s{deep * GROUPS:08d}"]),
        "group_page_1": "/ui/schedules?group=g07",
        "group_page_1000": "/ui/schedules?group=g07&after=" + _token(
            ["n", "g07", f"s{min(deep * GROUPS + 7, n - 1):08d}"]),
        "disabled_filter": "/ui/schedules?state=DISABLED",
        "target_filter_no_match": "/ui/schedules?target=nothing-matches",
        "next_fire_window": "/ui/schedules?from=2000-01-01T00:00",
        "next_fire_page_1000": "/ui/schedules?from=2000-01-01T00:00&after=" + _token(
            ["d", now + DAY_MS // 2, 0]),
        "schedule": "/ui/schedules/g01/s00000001",
        "campaigns": "/ui/campaigns",
        "email": "/ui/email",
    }
    import httpx

    server, base = serve(create_app(t))
    figures: dict[str, dict[str, float]] = {}
    try:
        with httpx.Client(base_url=base, timeout=60) as client:
            client.get("/ui/")  # the session cookie
            for name, path in pages.items():
                r = client.get(path)
                assert r.status_code == 200, (name, r.status_code, r.text[:500])
                times = []
                for _ in range(args.requests):
                    start = time.perf_counter()
                    client.get(path).raise_for_status()
                    times.append((time.perf_counter() - start) * 1000)
                times.sort()
                figures[name] = {"p50_ms": round(percentile(times, 50), 1),
                                 "p95_ms": round(percentile(times, 95), 1)}
                print(f"  {name:>24}: {figures[name]}", file=sys.stderr)
    finally:
        server.should_exit = True
        t.close()
    report({"pages": figures, "max_p95_ms": max(f["p95_ms"] for f in figures.values()),
            "counts_s": round(counts_s, 2), "schedules": n, "messages": args.messages,
            "db": db.split(":", 1)[0]})


if __name__ == "__main__":
    main()
