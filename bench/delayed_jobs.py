"""Delayed jobs, end to end: how late does a handler start after its job's due instant?

    python bench/delayed_jobs.py --n 100000 --spread 60 [--db URL]

Starts `tidings serve --app …` (a subprocess, as users run it), then creates N one-shot
self-deleting schedules, one Python API call each, in random order, due evenly over
`--spread` seconds at fractional instants (a window that opens once they are all
created). Each targets the app's queue; its handler records when it started. Lateness is
the handler's start minus the job's due instant, over every job.
Final line: {"create_per_s", "lateness_p50_ms", "lateness_p99_ms", "lateness_max_ms",
"executed", "duplicates", "early", "missing", "peak_rss_mb"}; peak_rss_mb is the server's,
its dispatcher process's included (each one's peak, summed).
`--timeline 2` also prints, per 2 s of due instants, that slice's lateness to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime

from _common import percentile, report, scratch_dir  # noqa: I001  (first: see _common)

from tidings.client import Tidings
from tidings.clock import from_ms
from tidings.model.schedules import ActionAfterCompletion, ScheduleSpec, Target, TargetKind
from tidings.settings import Settings

APP = '''
import os, threading, time
from tidings import App

app = App(queue="delayed")
app.declare_queue("delayed", visibility_timeout_s=120)
LOG = os.environ["DELAYED_LOG"]
_lines = []
_lock = threading.Lock()

def _flush():
    while True:
        time.sleep(0.2)
        with _lock:
            out, _lines[:] = "".join(_lines), []
        if out:
            with open(LOG, "a") as f:
                f.write(out)

threading.Thread(target=_flush, daemon=True).start()

@app.handler("due")
def due(job):
    started = time.time_ns() / 1e6
    with _lock:
        _lines.append(f"{job.id} {started - job.payload['due']:.3f}\\n")
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> float:
    """The peak RSS of `pid` plus those of its children (the dispatcher process)."""
    total = 0.0
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        children = [int(c) for c in f.read().split()]
    for p in (pid, *children):
        with open(f"/proc/{p}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1]) / 1024
    return round(total, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--spread", type=float, default=60.0, help="seconds")
    parser.add_argument("--db", default=None, help="default: a SQLite file in a temp dir")
    parser.add_argument("--create-rate-guess", type=float, default=None,
                        help="creations/s assumed when placing the window after them "
                        "(default: 5,000 on SQLite, 1,000 on PostgreSQL, where each "
                        "creation is a round trip and a commit's flush)")
    parser.add_argument("--timeline", type=float, default=0.0, metavar="SECONDS",
                        help="also print lateness p50/p99/max per slice of the window "
                        "(by due instant) to stderr: when the tail happened")
    args = parser.parse_args()
    tmp = scratch_dir()
    db = args.db or f"sqlite:///{tmp}/bench.db"
    if args.create_rate_guess is None:
        args.create_rate_guess = 1_000.0 if db.startswith("postgres") else 5_000.0
    log = os.path.join(tmp, "ran.log")
    with open(os.path.join(tmp, "delayedapp.py"), "w") as f:
        f.write(APP)
    port = free_port()
    env = {**os.environ, "DELAYED_LOG": log,
           "PYTHONPATH": tmp + os.pathsep + os.environ.get("PYTHONPATH", "")}
    server = subprocess.Popen(
        [sys.executable, "-m", "tidings", "serve", "--db", db, "--app", "delayedapp:app",
         "--port", str(port)], cwd=tmp, env=env, stdout=subprocess.DEVNULL,
        stderr=open(os.path.join(tmp, "serve.log"), "wb"))
    import httpx  # here, after _common: httpx imports the stdlib email package

    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("the server did not start; rerun with TIDINGS_BENCH_KEEP=1 "
                                 "and read serve.log in " + tmp)
            time.sleep(0.1)
        with Tidings(settings=Settings(db=db)) as t:
            start_ms = time.time_ns() // 1_000_000 + int(
                (3 + args.n / args.create_rate_guess) * 1000)
            step = args.spread * 1000 / args.n
            dues = [start_ms + i * step for i in range(args.n)]  # fractional milliseconds
            order = list(range(args.n))
            random.shuffle(order)
            target_once = ActionAfterCompletion.DELETE
            began = time.perf_counter()
            for i in order:
                due_ms = int(dues[i])
                when = from_ms(due_ms)
                body = json.dumps({"type": "due", "id": str(i), "due": due_ms})
                t.schedules.create(ScheduleSpec.once(
                    f"job-{i}", when, Target(TargetKind.QUEUE, "delayed", input=body),
                    action_after_completion=target_once))
            create_s = time.perf_counter() - began
            late = time.time_ns() // 1_000_000 > start_ms
            hint = " (after the window opened: lower --create-rate-guess)" if late else ""
            print(f"created {args.n} in {create_s:.1f} s{hint}", file=sys.stderr)
            end_wait = start_ms / 1000 + args.spread + 30
            ran = LineCount(log)
            while time.time() < end_wait:
                time.sleep(0.5)
                if ran.update() >= args.n:
                    break
            time.sleep(1.0)  # anything that ran twice would land now
        rss = rss_mb(server.pid)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(60)
    ids: Counter[str] = Counter()
    lateness: list[float] = []
    slices: dict[int, list[float]] = {}
    with open(log) as f:
        for line in f:
            job_id, late = line.split()
            ids[job_id] += 1
            lateness.append(float(late))
            if args.timeline > 0:  # job i is due i * spread / n seconds into the window
                at_s = int(job_id) * args.spread / args.n
                slices.setdefault(int(at_s // args.timeline), []).append(float(late))
    for k in sorted(slices):
        part = sorted(slices[k])
        print(f"due +{k * args.timeline:6.1f} s: {len(part):6d} jobs, lateness p50 "
              f"{percentile(part, 50):8.1f} p99 {percentile(part, 99):8.1f} max "
              f"{part[-1]:8.1f} ms", file=sys.stderr)
    lateness.sort()
    report({
        "n": args.n,
        "spread_s": args.spread,
        "db": db.split(":", 1)[0],
        "create_per_s": round(args.n / create_s),
        "lateness_p50_ms": round(percentile(lateness, 50), 1),
        "lateness_p99_ms": round(percentile(lateness, 99), 1),
        "lateness_max_ms": round(lateness[-1], 1) if lateness else None,
        "executed": len(ids),
        "duplicates": sum(c - 1 for c in ids.values()),
        "early": sum(1 for v in lateness if v < 0),
        "missing": args.n - len(ids),
        "peak_rss_mb": rss,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
    })


class LineCount:
    """The lines of a growing file, reading only what was added since the last look:
    re-reading the whole log every half second cost this process up to a fifth of a core
    at N = 1,000,000, taken from the 2 cores the server under measurement runs on."""

    def __init__(self, path: str) -> None:
        self.path, self.offset, self.lines = path, 0, 0

    def update(self) -> int:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:
            return self.lines
        end = chunk.rfind(b"\n") + 1  # a line being written is counted once it is whole
        self.lines += chunk.count(b"\n", 0, end)
        self.offset += end
        return self.lines


if __name__ == "__main__":
    main()
