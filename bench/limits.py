"""Downstream limits across nodes: 3 `tidings worker` processes on one PostgreSQL database
and 3 on one SQLite file.

    python bench/limits.py [--pg postgresql://…] [--seconds 30] [--backends postgres,sqlite]

1. *Rate and concurrency*: a task limited to 200/s and concurrency 10 (each job sleeps
   `--job-ms`, 5 by default: a slot is held from its grant to its release, store round
   trips included, so with 20 ms jobs on a loaded machine the concurrency of 10 is what
   binds, below 200/s), a backlog larger than the run: the
   starts each worker logs give the achieved rate over `--seconds` (from 2 s after the
   first start), the most starts in any 1-second window (every window that begins at a
   start), and the most jobs running at once.
2. *Tenants*: a task limited to 5/s per tenant; a hot tenant has 10,000 jobs queued when
   the workers start; 5 s later, jobs of 100 other tenants are sent (one every 20 ms,
   each tenant under its 5/s): how long each waited from its send to its start.

Final line: {"<backend>": {"rate_per_s", "max_1s_window", "max_concurrency",
"tenant_start_p50_s", "tenant_start_p99_s", "tenant_start_max_s", ...}, ...}.
"""

from __future__ import annotations

# First, before anything imports the stdlib `email` (psycopg does): see _common.
from _common import percentile, report, scratch_database, scratch_dir

# isort: split

import argparse
import glob
import json
import os
import subprocess
import sys
import time

from tidings.client import Tidings
from tidings.model.messages import OutgoingMessage
from tidings.settings import Settings

JOB_S = 0.005
PG = os.environ.get("TIDINGS_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")

APP = '''
import os, threading, time, tidings

app = tidings.App(queue="rated")
app.declare_queue("rated", visibility_timeout_s=30)
app.declare_queue("tenants", visibility_timeout_s=30)
_lock = threading.Lock()
JOB_S = float(os.environ["LIMIT_BENCH_JOB_S"])
_out = open(os.path.join(os.environ["LIMIT_BENCH_DIR"], f"starts-{os.getpid()}.txt"), "a",
            buffering=1)

def note(line):
    with _lock:
        _out.write(line + "\\n")

@app.task(queue="rated", limit=tidings.Limit(name="rated", rate="200/s", concurrency=10))
def rated(n: int) -> None:
    start = time.time()
    time.sleep(JOB_S)
    note(f"rated {n} {start} {time.time()}")

@app.task(queue="tenants", limit=tidings.Limit(name="tenant", rate="5/s", key="tenant"))
def tenant(tenant: str, n: int, sent: float) -> None:
    note(f"tenant {tenant} {n} {sent} {time.time()}")
'''


def start_workers(db: str, folder: str, n: int = 3) -> list[subprocess.Popen[bytes]]:
    env = {**os.environ, "LIMIT_BENCH_DIR": folder, "LIMIT_BENCH_JOB_S": str(JOB_S),
           "PYTHONPATH": folder + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return [subprocess.Popen([sys.executable, "-m", "tidings", "worker", "--app",
                              "limitapp:app", "--db", db], cwd=folder, env=env,
                             stdout=subprocess.DEVNULL,
                             stderr=open(os.path.join(folder, f"worker-{i}.log"), "wb"))
            for i in range(n)]


def stop(workers: list[subprocess.Popen[bytes]]) -> None:
    for w in workers:
        w.terminate()
    for w in workers:
        try:
            w.wait(60)
        except subprocess.TimeoutExpired:
            w.kill()


def lines(folder: str, kind: str) -> list[list[str]]:
    out = []
    for path in glob.glob(os.path.join(folder, "starts-*.txt")):
        with open(path) as f:
            out += [p for p in (line.split() for line in f) if p and p[0] == kind]
    return out


def fill(t: Tidings, queue: str, bodies: list[str]) -> None:
    for base in range(0, len(bodies), 10):
        t.queues.send_batch(queue, [OutgoingMessage(b, entry_id=str(i))
                                    for i, b in enumerate(bodies[base:base + 10])])


def most_in_a_second(starts: list[float]) -> int:
    """The most starts in [s, s + 1) over every start s (sorted)."""
    most, j = 0, 0
    for i, s in enumerate(starts):
        while j < len(starts) and starts[j] < s + 1.0:
            j += 1
        most = max(most, j - i)
    return most


def rate_part(db: str, folder: str, seconds: float) -> dict[str, float]:
    with Tidings(settings=Settings(db=db)) as t:
        t.queues.create_queue("rated", visibility_timeout_s=30)
        fill(t, "rated", [json.dumps({"type": "rated", "id": str(n), "args": {"n": n}})
                          for n in range(int(200 * (seconds + 8)))])
        workers = start_workers(db, folder)
        try:
            deadline = time.monotonic() + 120
            while not lines(folder, "rated"):
                if time.monotonic() > deadline:
                    raise SystemExit("no job started within 120 s")
                time.sleep(0.1)
            time.sleep(seconds + 3)
        finally:
            stop(workers)
        left = t.queues.purge_queue("rated")
    runs = sorted((float(p[2]), float(p[3])) for p in lines(folder, "rated"))
    first = runs[0][0] + 2.0
    starts = [s for s, _ in runs]
    in_run = [s for s in starts if first <= s < first + seconds]
    window = most_in_a_second(starts)
    events = sorted([(s, 1) for s, _ in runs] + [(e, -1) for _, e in runs])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return {"rate_per_s": round(len(in_run) / seconds, 1), "max_1s_window": window,
            "max_1s_window_in_run": most_in_a_second(in_run),
            "max_concurrency": peak, "rated_jobs_run": len(runs), "left_in_queue": left}


def tenant_part(db: str, folder: str) -> dict[str, float]:
    with Tidings(settings=Settings(db=db)) as t:
        t.queues.create_queue("tenants", visibility_timeout_s=30)
        fill(t, "tenants", [json.dumps({"type": "tenant", "id": f"hot-{n}", "args": {
            "tenant": "hot", "n": n, "sent": 0}}) for n in range(10_000)])
        workers = start_workers(db, folder)
        try:
            deadline = time.monotonic() + 120
            while not lines(folder, "tenant"):
                if time.monotonic() > deadline:
                    raise SystemExit("no job started within 120 s")
                time.sleep(0.1)
            time.sleep(5)
            sent = 0
            for n in range(3):  # each of 100 tenants 3 times, one send every 20 ms
                for k in range(100):
                    t.queues.send("tenants", json.dumps({
                        "type": "tenant", "id": f"t{k}-{n}",
                        "args": {"tenant": f"t{k}", "n": n, "sent": time.time()}}))
                    sent += 1
                    time.sleep(0.02)
            deadline = time.monotonic() + 60
            while len([p for p in lines(folder, "tenant") if p[1] != "hot"]) < sent:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            hot = len([p for p in lines(folder, "tenant") if p[1] == "hot"])
        finally:
            stop(workers)
    waits = sorted(float(p[4]) - float(p[3]) for p in lines(folder, "tenant") if p[1] != "hot")
    return {"tenant_jobs_started": len(waits), "tenant_jobs_sent": sent,
            "tenant_start_p50_s": round(percentile(waits, 50), 3),
            "tenant_start_p99_s": round(percentile(waits, 99), 3),
            "tenant_start_max_s": round(waits[-1], 3) if waits else None,
            "hot_jobs_run": hot}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pg", default=PG, help="PostgreSQL (a schema is made in it)")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--backends", default="postgres,sqlite")
    parser.add_argument("--job-ms", type=float, default=5.0,
                        help="how long each rated job sleeps")
    args = parser.parse_args()
    global JOB_S
    JOB_S = args.job_ms / 1000
    figures: dict[str, object] = {}
    for backend in args.backends.split(","):
        result: dict[str, object] = {}
        for part in ("rate", "tenants"):
            tmp = scratch_dir()
            with open(os.path.join(tmp, "limitapp.py"), "w") as f:
                f.write(APP)
            pg = None if backend == "sqlite" else args.pg
            with scratch_database(pg, f"{tmp}/limits.db") as db:
                print(f"{backend}: {part}…", file=sys.stderr)
                result |= (rate_part(db, tmp, args.seconds) if part == "rate"
                           else tenant_part(db, tmp))
        result["job_ms"] = args.job_ms
        result["load_1min"] = round(os.getloadavg()[0], 1)
        figures[backend] = result
    report(figures)


if __name__ == "__main__":
    main()
