"""Firings per second with 1 node and with 3 nodes on one PostgreSQL database.

    python bench/multinode.py [--n 200000] [--db postgresql://…] [--nodes 1,3]

For each node count: a fresh schema, N one-shot schedules all due now into one queue,
then that many `tidings serve` processes fire them; the figure is N over the time from
the nodes' start to the last schedule gone. On 2 cores the gain is bounded (the database,
the nodes and this script share them); what it shows is that nodes do not slow each other
down through lock contention (SKIP LOCKED claims take disjoint rows).
Final line: {"firings_per_s_1_node", "firings_per_s_3_nodes", ...}.
"""

from __future__ import annotations

# First, before anything imports the stdlib `email` (psycopg does): see _common.
from _common import peak_rss_mb, report

# isort: split
import argparse
import os
import socket
import subprocess
import sys
import time
import uuid

import psycopg

from tidings.client import Tidings
from tidings.model.schedules import ActionAfterCompletion, ScheduleSpec, Target, TargetKind
from tidings.settings import Settings

BASE = "postgresql://postgres@127.0.0.1:5432/test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(base: str, nodes: int, n: int) -> float:
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in base else "?"
    url = f"{base}{sep}options=-csearch_path%3D{schema}"
    try:
        due = time.strftime("at(%Y-%m-%dT%H:%M:%S)", time.gmtime(time.time() - 60))
        with Tidings(settings=Settings(db=url)) as t:
            t.queues.create_queue("jobs", retention_s=86400)
            target = Target(TargetKind.QUEUE, "jobs", input='{"type": "reminder"}')
            made = sum(r.created for r in t.schedules.create_many(
                (ScheduleSpec(f"s{i}", due, target,
                              action_after_completion=ActionAfterCompletion.DELETE)
                 for i in range(n)), chunk=10_000))
            assert made == n
        env = {**os.environ, "TIDINGS_LOG_LEVEL": "warning"}
        start = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-m", "tidings", "serve", "--db", url,
                                   "--port", str(free_port())], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for _ in range(nodes)]
        try:
            with Tidings(settings=Settings(db=url)) as t:
                while t.store.count_schedules() > 0:
                    if any(p.poll() is not None for p in procs):
                        raise SystemExit("a node died")
                    time.sleep(0.1)
                elapsed = time.perf_counter() - start
                queued = t.queues.describe("jobs").counts.visible
            assert queued == n, f"{queued} messages for {n} schedules"
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(timeout=60)
        return n / elapsed
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--db", default=BASE, help="a PostgreSQL URL (a schema is made in it)")
    parser.add_argument("--nodes", default="1,3")
    args = parser.parse_args()
    figures: dict[str, float] = {"n": args.n}
    for k in (int(x) for x in args.nodes.split(",")):
        rate = run(args.db, k, args.n)
        print(f"{k} node(s): {rate:,.0f} firings/s", file=sys.stderr)
        figures[f"firings_per_s_{k}_node{'s' if k > 1 else ''}"] = round(rate)
    figures["peak_rss_mb"] = peak_rss_mb()
    report(figures)


if __name__ == "__main__":
    main()
