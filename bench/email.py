"""Email: templated mail fired by schedules, through a node, into a local SMTP sink.

    python bench/email.py --n 20000 [--limited-n 2000] [--rate 200]

1. sent_per_s: N one-shot schedules, all due now, each with an email target rendering a
   stored template for its own recipient; a node (dispatcher + delivery consumers + SMTP
   pool) fires and sends them all to an aiosmtpd sink running in another process. The
   figure is N over the time from the node's start to the last SENT in the log.
2. limited_rate_per_s: the same with `smtp_max_rate` (default 200/s) for `--limited-n`
   messages; the figure is the rate achieved between the first and the last send.
The node runs with `--concurrency` deliveries at once (TIDINGS_CONCURRENCY, default 128
here) over `--connections` SMTP sessions (TIDINGS_SMTP_MAX_CONNECTIONS, default 16 here).
Final line: {"sent_per_s", "limited_rate_per_s", "peak_rss_mb"}.
"""

from __future__ import annotations

import os
import sys

# This file is named email.py: its folder must not shadow the stdlib `email` package.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]

import argparse  # noqa: E402
import asyncio  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import socket  # noqa: E402
import sqlite3  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from datetime import UTC, datetime  # noqa: E402

from tidings.client import Tidings  # noqa: E402
from tidings.model.schedules import (  # noqa: E402
    ActionAfterCompletion,
    ScheduleSpec,
    Target,
    TargetKind,
)
from tidings.node import Node  # noqa: E402
from tidings.settings import Settings  # noqa: E402

_spec = importlib.util.spec_from_file_location("_common", os.path.join(HERE, "_common.py"))
assert _spec is not None and _spec.loader is not None
_common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_common)
peak_rss_mb, report = _common.peak_rss_mb, _common.report

SINK = """
import asyncio, sys
from aiosmtpd.smtp import SMTP

class Count:
    n = 0
    async def handle_DATA(self, server, session, envelope):
        Count.n += 1
        return "250 OK"

async def main():
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: SMTP(Count(), hostname="sink"), "127.0.0.1",
                                      int(sys.argv[1]))
    print("ready", flush=True)
    await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes stdin
    server.close()

asyncio.run(main())
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def at_expr(ms: int) -> str:
    return "at(" + datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S") + ")"


def create(t: Tidings, prefix: str, n: int) -> None:
    when = at_expr(int(time.time() * 1000) - 1000)  # due already: fires at once

    def specs():  # type: ignore[no-untyped-def]
        for i in range(n):
            doc = {"FromEmailAddress": "News <news@example.com>",
                   "Destination": {"ToAddresses": [f"user{i}@example.org"]},
                   "Content": {"Template": {"TemplateName": "bench", "TemplateData":
                                           json.dumps({"name": f"User {i}", "n": i})}}}
            yield ScheduleSpec(f"{prefix}-{i}", when,
                               Target(TargetKind.EMAIL, "", input=json.dumps(doc)),
                               action_after_completion=ActionAfterCompletion.DELETE)

    for r in t.schedules.create_many(specs()):
        if r.error is not None:
            raise SystemExit(f"create failed: {r.error}")


def sent_times(path: str) -> list[int]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        rows = conn.execute("SELECT updated_at FROM email_deliveries WHERE state = 'SENT'"
                            " ORDER BY updated_at").fetchall()
    finally:
        conn.close()
    return [r[0] for r in rows]


def sent_count(path: str) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM email_deliveries"
                                " WHERE state = 'SENT'").fetchone()[0])
    finally:
        conn.close()


def run_phase(workdir: str, name: str, n: int, relay: str, **settings: object) -> list[int]:
    path = os.path.join(workdir, f"{name}.db")
    config = Settings(db=f"sqlite:///{path}", smtp_url=relay, public_url="https://x.test",
                      **settings)  # type: ignore[arg-type]
    t = Tidings(settings=config)
    t.email.create_template("bench", "Hello {{name}}, issue {{n}}",
                            html="<h1>Hello {{name}}</h1><p>This is issue {{n}}.</p>",
                            text="Hello {{name}}\nThis is issue {{n}}.")
    t0 = time.perf_counter()
    create(t, name, n)
    print(f"  {name}: created {n} schedules in {time.perf_counter() - t0:.1f} s",
          file=sys.stderr)
    node = Node(t, config)

    async def main() -> float:
        start = time.time()
        task = asyncio.create_task(node.run())
        deadline = time.monotonic() + max(120.0, n / 50)
        while sent_count(path) < n and time.monotonic() < deadline and not task.done():
            await asyncio.sleep(0.2)
        node.stop()
        await task
        return start

    start = asyncio.run(main())
    node.bridge.close()
    t.close()
    times = sent_times(path)
    if len(times) < n:
        raise SystemExit(f"{name}: only {len(times)} of {n} sent")
    return [int(start * 1000), *times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--limited-n", type=int, default=2_000)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    port = free_port()
    sink = subprocess.Popen([sys.executable, "-c", SINK, str(port)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout is not None
        assert sink.stdout.readline().strip() == "ready"
        relay = f"smtp://127.0.0.1:{port}"
        with tempfile.TemporaryDirectory() as workdir:
            common = {"concurrency": args.concurrency, "smtp_max_connections": args.connections}
            times = run_phase(workdir, "unlimited", args.n, relay, **common)
            sent_per_s = args.n / ((times[-1] - times[0]) / 1000)
            limited = run_phase(workdir, "limited", args.limited_n, relay,
                                smtp_max_rate=args.rate, **common)[1:]
            limited_rate = (len(limited) - 1) / ((limited[-1] - limited[0]) / 1000)
    finally:
        if sink.stdin:
            sink.stdin.close()
        sink.wait(10)
    report({"sent_per_s": round(sent_per_s, 1), "limited_rate_per_s": round(limited_rate, 1),
            "peak_rss_mb": peak_rss_mb()})


if __name__ == "__main__":
    main()
