"""Work created by another process: how soon does the node start it?

    python bench/cross_process.py [--db URL] [--n 2000] [--rate 200] [--idle 60]

The pattern of the articles: "the API enqueues and returns; a consumer does the work". A
`tidings serve --app xpapp:app` node runs the handlers; this script is the API process,
another process, sending through the app's tasks as a web process would:

1. `--n` jobs one by one at `--rate` a second (`task.send`): the start latency of each
   (the handler's start minus the instant `send` returned);
2. `--n` jobs due at fractional instants 2-5 s ahead (`task.send_at`), sent at the same
   pace: the lateness of each (the handler's start minus its due instant; never early);
3. then `--idle` seconds with nothing to do: the node's CPU time over them (its
   dispatcher process's included), which a tight polling loop would show.

Final line: {"send_start_p50_ms", "send_start_p99_ms", "send_start_max_ms",
"due_lateness_p50_ms", "due_lateness_p99_ms", "due_lateness_max_ms", "early", "missing",
"duplicates", "idle_cpu_s", "peak_rss_mb"}.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime

from _common import percentile, scratch_dir  # noqa: I001  (first: see _common)

APP = '''
import os, threading, time
import tidings

app = tidings.App(queue="xp", db=os.environ["XP_DB"])
LOG = os.environ["XP_LOG"]
_lines = []
_lock = threading.Condition()

def _flush():
    # Writes in batches while jobs run, and sleeps while none do (it is part of the
    # node's process: a timer here would count in the node's idle CPU).
    while True:
        with _lock:
            _lock.wait_for(lambda: _lines)
            out, _lines[:] = "".join(_lines), []
        with open(LOG, "a") as f:
            f.write(out)
        time.sleep(0.2)

threading.Thread(target=_flush, daemon=True).start()

@app.task
def hit(kind: str, i: int, at: float) -> None:
    started = time.time_ns() / 1e6
    with _lock:
        _lines.append(f"{kind} {i} {started - at:.3f}\\n")
        _lock.notify()
'''


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of `pid` and its children (the dispatcher process)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        pids = [pid, *(int(c) for c in f.read().split())]
    for p in pids:
        with open(f"/proc/{p}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return total


def _rss_mb(pid: int) -> float:
    total = 0.0
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        pids = [pid, *(int(c) for c in f.read().split())]
    for p in pids:
        with open(f"/proc/{p}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1]) / 1024
    return round(total, 1)


def _read(log: str) -> list[tuple[str, int, float]]:
    if not os.path.exists(log):
        return []
    with open(log) as f:
        return [(k, int(i), float(v)) for k, i, v in (line.split() for line in f if line.strip())]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", default=None, help="default: a SQLite file in a temp dir")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=200.0, help="sends a second")
    parser.add_argument("--idle", type=float, default=60.0, help="seconds of idle CPU")
    args = parser.parse_args()
    tmp = scratch_dir()
    db = args.db or f"sqlite:///{tmp}/bench.db"
    log = os.path.join(tmp, "ran.log")
    with open(os.path.join(tmp, "xpapp.py"), "w") as f:
        f.write(APP)
    env = {**os.environ, "XP_DB": db, "XP_LOG": log,
           "PYTHONPATH": tmp + os.pathsep + os.environ.get("PYTHONPATH", "")}
    os.environ.update(XP_DB=db, XP_LOG=log)
    sys.path.insert(0, tmp)
    import httpx  # here, after _common: httpx imports the stdlib email package

    port = 0
    with open(os.path.join(tmp, "serve.log"), "wb") as serve_log:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = subprocess.Popen(
            [sys.executable, "-m", "tidings", "serve", "--db", db, "--app", "xpapp:app",
             "--port", str(port)], cwd=tmp, env=env, stdout=subprocess.DEVNULL,
            stderr=serve_log)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health/ready", timeout=1
                             ).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit(f"the server did not start; see serve.log in {tmp}")
            time.sleep(0.1)
        xp = importlib.import_module("xpapp")  # the API process: its own connection
        hit = xp.hit
        hit.send(kind="warm", i=0, at=time.time_ns() / 1e6)  # opens the sender's database
        gap = 1.0 / args.rate
        # 1. sends, one by one at the rate
        nxt = time.monotonic()
        for i in range(args.n):
            hit.send(kind="send", i=i, at=time.time_ns() / 1e6)
            nxt += gap
            time.sleep(max(nxt - time.monotonic(), 0))
        # 2. jobs due 2-5 s ahead at fractional instants, sent at the same pace
        for i in range(args.n):
            due_ms = time.time_ns() / 1e6 + random.uniform(2000, 5000)
            due_ms = int(due_ms)  # the job's instant, to the millisecond
            hit.send_at(datetime.fromtimestamp(due_ms / 1000, UTC), kind="due", i=i,
                        at=float(due_ms))
            nxt += gap
            time.sleep(max(nxt - time.monotonic(), 0))
        wait_until = time.monotonic() + 30
        while time.monotonic() < wait_until:
            got = Counter(k for k, _, _ in _read(log))
            if got["send"] >= args.n and got["due"] >= args.n:
                break
            time.sleep(0.25)
        time.sleep(1.0)  # the handlers' log is flushed every 0.2 s
        # 3. idle: nothing to do for a while
        before = _cpu_s(server.pid)
        time.sleep(args.idle)
        idle_cpu = _cpu_s(server.pid) - before
        rss = _rss_mb(server.pid)
        xp.app.close()
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    rows = _read(log)
    sends = sorted(v for k, _, v in rows if k == "send")
    dues = sorted(v for k, _, v in rows if k == "due")
    runs = Counter((k, i) for k, i, _ in rows if k != "warm")
    missing = 2 * args.n - len(runs)
    out = {
        "db": "postgresql" if db.startswith("postgres") else "sqlite", "n": args.n,
        "rate": args.rate,
        "send_start_p50_ms": round(percentile(sends, 50), 1) if sends else None,
        "send_start_p99_ms": round(percentile(sends, 99), 1) if sends else None,
        "send_start_max_ms": round(sends[-1], 1) if sends else None,
        "due_lateness_p50_ms": round(percentile(dues, 50), 1) if dues else None,
        "due_lateness_p99_ms": round(percentile(dues, 99), 1) if dues else None,
        "due_lateness_max_ms": round(dues[-1], 1) if dues else None,
        "early": sum(1 for v in dues if v < 0), "missing": missing,
        "duplicates": sum(c - 1 for c in runs.values() if c > 1),
        "idle_s": args.idle, "idle_cpu_s": round(idle_cpu, 3), "peak_rss_mb": rss,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
