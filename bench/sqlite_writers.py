"""Two processes writing one SQLite file: how long does a send wait on the other writer?

    python bench/sqlite_writers.py [--seconds 15]

A web process sending jobs next to a busy `tidings serve` is this case. One process (the
busy one) sends batches of 10 messages back to back, as fast as it can; another sends one
message every 10 ms and times each send. Both are plain Python API clients of the same
file, in processes of their own.
Final line: {"sends", "send_p50_ms", "send_p99_ms", "send_max_ms", "busy_msgs_per_s"}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from _common import percentile, report, scratch_dir  # noqa: I001  (first: see _common)

from tidings.client import Tidings
from tidings.model.messages import OutgoingMessage
from tidings.settings import Settings


def busy(url: str, seconds: float) -> None:
    with Tidings(settings=Settings(db=url)) as t:
        batch = [OutgoingMessage("y" * 100, entry_id=str(i)) for i in range(10)]
        end, sent = time.monotonic() + seconds, 0
        while time.monotonic() < end:
            t.queues.send_batch("busy", batch)
            sent += len(batch)
        print(json.dumps({"busy_msgs_per_s": round(sent / seconds)}))


def timed(url: str, seconds: float) -> None:
    with Tidings(settings=Settings(db=url)) as t:
        waits = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            began = time.perf_counter()
            t.queues.send("timed", "x")
            waits.append((time.perf_counter() - began) * 1000)
            time.sleep(0.01)
        print(json.dumps(waits))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--role", choices=("busy", "timed"), help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        (busy if args.role == "busy" else timed)(args.db, args.seconds)
        return
    url = f"sqlite:///{scratch_dir()}/writers.db"
    with Tidings(settings=Settings(db=url)) as t:
        t.queues.create_queue("busy", retention_s=3600)
        t.queues.create_queue("timed", retention_s=3600)
    me = [sys.executable, os.path.abspath(__file__), "--db", url]
    loud = subprocess.Popen([*me, "--role", "busy", "--seconds", str(args.seconds + 2)],
                            stdout=subprocess.PIPE, text=True)
    time.sleep(1.0)  # the busy writer is under way before the timed one starts
    quiet = subprocess.run([*me, "--role", "timed", "--seconds", str(args.seconds)],
                           stdout=subprocess.PIPE, text=True, check=True)
    out, _ = loud.communicate(timeout=args.seconds + 60)
    waits = sorted(json.loads(quiet.stdout))
    report({
        "sends": len(waits),
        "send_p50_ms": round(percentile(waits, 50), 2),
        "send_p99_ms": round(percentile(waits, 99), 2),
        "send_max_ms": round(waits[-1], 2),
        **json.loads(out),
    })


if __name__ == "__main__":
    main()
