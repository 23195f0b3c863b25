"""Fan-out: a recipient CSV into 3 drip steps of per-recipient local-time email schedules.

    python bench/fanout.py --n 1000000 [--db sqlite:///bench.db] [--csv rows.csv]

Generates a CSV of N rows (id, email, timezone drawn from the real IANA list, first name,
plan) unless `--csv` names an existing one, then runs the fan-out (3 steps: day 0 at 09:00,
day 2 at 10:00, day 7 at 09:00 local, a 30-minute flexible window) into an empty database.
Final line: {"rows_per_s", "schedules_per_s", "seconds", "peak_rss_mb"}.
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import sys
import tempfile
import time
import zoneinfo
from datetime import date, timedelta

# After the standard library: bench/email.py must not shadow the stdlib `email` package.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != HERE] + [HERE]
from _common import peak_rss_mb, report  # noqa: E402

from tidings.campaigns.fanout import FanoutOptions, run_fanout  # noqa: E402
from tidings.client import Tidings  # noqa: E402
from tidings.model.campaigns import Step  # noqa: E402
from tidings.settings import Settings  # noqa: E402

NAMES = ["Ana", "Bo", "Chen", "Dara", "Eli", "Femi", "Gus", "Hana", "Ivo", "Jun"]


def generate(path: str, n: int) -> None:
    rng = random.Random(7)
    zones = sorted(z for z in zoneinfo.available_timezones() if "/" in z)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "email", "timezone", "first_name", "plan"])
        for i in range(n):
            w.writerow([f"u{i:08d}", f"user{i}@example.com", rng.choice(zones),
                        rng.choice(NAMES), rng.choice(("free", "pro", "team"))])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--db", default=None)
    parser.add_argument("--csv", default=None)
    parser.add_argument("--chunk", type=int, default=20_000)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="tidings-bench-")
    path = args.csv or f"{tmp}/recipients.csv"
    if not args.csv:
        began = time.perf_counter()
        generate(path, args.n)
        print(f"generated {args.n} rows in {time.perf_counter() - began:.1f}s",
              file=sys.stderr)
    t = Tidings(settings=Settings(db=args.db or f"sqlite:///{tmp}/bench.db"))
    t.email.create_template("welcome", "Welcome {{first_name}}", text="Hi {{first_name}}")
    t.email.create_template("nudge", "Still there, {{first_name}}?", text="Plan: {{plan}}")
    on = date.today() + timedelta(days=30)
    opts = FanoutOptions(
        campaign=f"bench-{os.getpid()}", template="welcome", sender="news@example.com",
        steps=(Step("welcome", 0, "09:00"), Step("nudge", 2, "10:00", "nudge"),
               Step("last", 7, "09:00")),
        on=on, local_time="09:00", flexible_window_minutes=30, chunk=args.chunk)
    began = time.perf_counter()
    with open(path, "rb") as source:
        summary = run_fanout(t.schedules, t.store, source, opts, bytes_total=os.path.getsize(path))
    seconds = time.perf_counter() - began
    assert summary.errors == 0, summary.error_sample
    created = summary.schedules_created
    assert created == 3 * summary.rows_read, (created, summary.rows_read)
    t.close()
    report({
        "n": summary.rows_read,
        "schedules": created,
        "rows_per_s": round(summary.rows_read / seconds),
        "schedules_per_s": round(created / seconds),
        "seconds": round(seconds, 1),
        "peak_rss_mb": peak_rss_mb(),
    })


if __name__ == "__main__":
    main()
