"""Consumer throughput: a pre-filled queue drained by `tidings worker` with a no-op handler.

    python bench/consumers.py --n 200000 [--db URL] [--async] [--concurrency 8]

Fills a queue with N distinct jobs, then starts `tidings worker --app …` (a subprocess,
as users run it) whose handler does nothing, and times it from the worker's start until
the queue is empty (in flight included). Each job goes through the whole consumer path:
receive, job-key reservation, handler, acknowledgement with its done record.
Final line: {"jobs_per_s", "seconds", "worker_cpu_s", "jobs_per_worker_cpu_s", "peak_rss_mb",
...}; the last three are the worker's (CPU: user + system, all its threads).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import uuid

from _common import report, scratch_dir  # noqa: I001  (first: see _common)

from tidings.client import Tidings
from tidings.model.messages import OutgoingMessage
from tidings.settings import Settings

APP = '''
from tidings import App

app = App(queue="bench")

@app.handler("noop")
{kind}def noop(job):
    return None
'''


def worker_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def worker_cpu_s(pid: int) -> float:
    """User + system CPU the worker used: on a machine shared with other work, jobs per
    CPU-second says what the consumer path costs, whatever the wall clock says."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--db", default=None, help="default: a SQLite file in a temp dir")
    parser.add_argument("--async", dest="is_async", action="store_true",
                        help="an async handler instead of a sync one")
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    tmp = scratch_dir()
    db = args.db or f"sqlite:///{tmp}/bench.db"
    with open(os.path.join(tmp, "benchapp.py"), "w") as f:
        f.write(APP.format(kind="async " if args.is_async else ""))

    run = uuid.uuid4().hex[:8]
    with Tidings(settings=Settings(db=db)) as t:
        t.queues.create_queue("bench-dlq")
        t.queues.create_queue("bench", visibility_timeout_s=300)
        for base in range(0, args.n, 10):
            t.queues.send_batch("bench", [
                OutgoingMessage(f'{{"type": "noop", "id": "{run}-{base + i}"}}', entry_id=str(i))
                for i in range(min(10, args.n - base))])
        print(f"filled {args.n} jobs", file=sys.stderr)

        env = {**os.environ, "PYTHONPATH": tmp + os.pathsep + os.environ.get("PYTHONPATH", "")}
        start = time.perf_counter()
        worker = subprocess.Popen(
            [sys.executable, "-m", "tidings", "worker", "--app", "benchapp:app", "--db", db,
             "--concurrency", str(args.concurrency)],
            cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            while True:
                time.sleep(0.05)
                counts = t.queues.describe("bench").counts
                if counts.visible + counts.in_flight + counts.delayed == 0:
                    break
                if worker.poll() is not None:
                    raise SystemExit(f"the worker exited: {worker.stderr.read().decode()}")
            seconds = time.perf_counter() - start
            rss = worker_rss_mb(worker.pid)
            cpu = worker_cpu_s(worker.pid)
        finally:
            worker.terminate()
            worker.wait(60)
        dead = t.queues.describe("bench-dlq").counts.visible
    report({
        "n": args.n,
        "handler": "async" if args.is_async else "sync",
        "concurrency": args.concurrency,
        "db": db.split(":", 1)[0],
        "jobs_per_s": round(args.n / seconds),
        "seconds": round(seconds, 2),
        "worker_cpu_s": round(cpu, 2),
        "jobs_per_worker_cpu_s": round(args.n / cpu) if cpu else None,
        "dead_lettered": dead,
        "peak_rss_mb": rss,
    })


if __name__ == "__main__":
    main()
