"""Email: templated mail fired by schedules, through a node, into a local SMTP sink.

    python bench/email.py --n 50000 [--limited-n 2000] [--rate 200] [--db URL]
                          [--sink fast|aiosmtpd] [--chunking on|off]

1. sent_per_s: N one-shot schedules, all due now, each with an email target rendering a
   stored template for its own recipient; a node (dispatcher + delivery consumers + SMTP
   pool, the dispatcher in a process of its own on SQLite, as `tidings serve` runs it)
   fires and sends them all to an SMTP sink running in another process. The figure is N
   over the time from the node's start to the last SENT in the delivery log.
2. limited_rate_per_s: the same with `smtp_max_rate` (default 200/s) for `--limited-n`
   messages; the figure is the rate achieved between the first and the last send.
The node runs with `--concurrency` deliveries at once (TIDINGS_CONCURRENCY, default 128
here) over `--connections` SMTP sessions (TIDINGS_SMTP_MAX_CONNECTIONS, default 16 here).
The sink is a minimal pipelining SMTP server (`--sink fast`, below; with CHUNKING unless
`--chunking off`), or aiosmtpd.
Final line: {"db", "sink", "chunking", "sent_per_s", "limited_rate_per_s", "node_cpu_ms_per_email"
(the node's CPU, dispatcher process included, over phase 1's N), "sink_cpu_ms_per_email",
"peak_rss_mb" (this process: the node and the schedules' creation)}.
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
import resource  # noqa: E402
import socket  # noqa: E402
import sqlite3  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from datetime import UTC, datetime  # noqa: E402

from tidings.client import Tidings  # noqa: E402
from tidings.dispatch_process import runs_apart  # noqa: E402
from tidings.email_process import sends_apart  # noqa: E402
from tidings.model.schedules import (  # noqa: E402
    ActionAfterCompletion,
    ScheduleSpec,
    Target,
    TargetKind,
)
from tidings.node import Node, freeze_startup_objects  # noqa: E402
from tidings.settings import Settings  # noqa: E402

_spec = importlib.util.spec_from_file_location("_common", os.path.join(HERE, "_common.py"))
assert _spec is not None and _spec.loader is not None
_common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_common)
peak_rss_mb, report = _common.peak_rss_mb, _common.report
scratch_database = _common.scratch_database

#: The sink a relay's front end would be: it speaks SMTP (EHLO with PIPELINING, 8BITMIME
#: and, unless `--chunking off`, CHUNKING as Postfix 3.4+ offers it; MAIL, RCPT, DATA with
#: dot-unstuffing's end marker, BDAT, RSET, NOOP, QUIT), answers every command of a
#: pipelined group in order in one write, and counts what it accepted.
#: It neither parses headers nor stores the message: what is measured is the node. An
#: aiosmtpd server cost 0.61 ms of CPU a message (3 Dec 2026, and it offers no PIPELINING),
#: more than half the node's own, so with it the bench measured the sink. `--sink aiosmtpd`
#: runs that one instead.
FAST_SINK = r"""
import asyncio, json, os, sys, time
CHUNKING = sys.argv[2] == "on"

class Sink(asyncio.Protocol):
    messages = 0
    recipients = 0
    octets = 0

    def connection_made(self, transport):
        self.t = transport
        self.buf = b""
        self.data = False
        self.mail = False
        self.rcpts = 0
        self.bdat = -1  # BDAT bytes still to read (-1: none)
        self.last = False
        transport.write(b"220 sink ESMTP\r\n")

    def data_received(self, chunk):
        buf = self.buf + chunk
        out = []
        while True:
            if self.bdat >= 0:
                if len(buf) < self.bdat:
                    break
                Sink.octets += self.bdat
                buf, self.bdat = buf[self.bdat:], -1
                if not self.last:
                    out.append(b"250 chunk OK\r\n")
                elif self.mail and self.rcpts:
                    Sink.messages += 1
                    Sink.recipients += self.rcpts
                    out.append(b"250 OK queued\r\n")
                else:
                    out.append(b"554 no valid recipients\r\n")
                if self.last:
                    self.mail, self.rcpts = False, 0
                continue
            if self.data:
                if buf.startswith(b".\r\n"):
                    end, size = 0, 3
                else:
                    end = buf.find(b"\r\n.\r\n")
                    if end < 0:
                        break
                    size = end + 5
                Sink.messages += 1
                Sink.recipients += self.rcpts
                Sink.octets += end
                buf = buf[size:]
                self.data = self.mail = False
                self.rcpts = 0
                out.append(b"250 OK queued\r\n")
                continue
            i = buf.find(b"\r\n")
            if i < 0:
                break
            line, buf = buf[:i], buf[i + 2:]
            verb = line[:4].upper()
            if verb == b"EHLO":
                out.append(b"250-sink\r\n250-PIPELINING\r\n250-8BITMIME\r\n"
                           + (b"250-CHUNKING\r\n" if CHUNKING else b"")
                           + b"250 SIZE 52428800\r\n")
            elif verb == b"BDAT" and CHUNKING:
                words = line.split()
                self.bdat = int(words[1])
                self.last = len(words) > 2 and words[2].upper() == b"LAST"
            elif verb == b"HELO" or verb == b"NOOP":
                out.append(b"250 OK\r\n")
            elif verb == b"MAIL":
                if self.mail:
                    out.append(b"503 nested MAIL\r\n")
                else:
                    self.mail = True
                    out.append(b"250 OK\r\n")
            elif verb == b"RCPT":
                if self.mail:
                    self.rcpts += 1
                    out.append(b"250 OK\r\n")
                else:
                    out.append(b"503 need MAIL\r\n")
            elif verb == b"DATA":
                if self.rcpts:
                    self.data = True
                    out.append(b"354 end with .\r\n")
                else:
                    out.append(b"503 need RCPT\r\n")
            elif verb == b"RSET":
                self.mail, self.rcpts = False, 0
                out.append(b"250 OK\r\n")
            elif verb == b"QUIT":
                out.append(b"221 bye\r\n")
                self.t.write(b"".join(out))
                self.t.close()
                return
            else:
                out.append(b"500 unknown\r\n")
        self.buf = buf
        if out:
            self.t.write(b"".join(out))

async def main():
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Sink, "127.0.0.1", int(sys.argv[1]))
    print("ready", flush=True)
    await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes stdin
    server.close()
    print(json.dumps({"messages": Sink.messages, "recipients": Sink.recipients,
                      "cpu_s": time.process_time()}), flush=True)

asyncio.run(main())
"""

AIOSMTPD_SINK = r"""
import asyncio, json, sys, time
from aiosmtpd.smtp import SMTP

class Count:
    n = 0
    r = 0
    async def handle_DATA(self, server, session, envelope):
        Count.n += 1
        Count.r += len(envelope.rcpt_tos)
        return "250 OK"

async def main():
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: SMTP(Count(), hostname="sink"), "127.0.0.1",
                                      int(sys.argv[1]))
    print("ready", flush=True)
    await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes stdin
    server.close()
    print(json.dumps({"messages": Count.n, "recipients": Count.r,
                      "cpu_s": time.process_time()}), flush=True)

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


class Log:
    """Reads the delivery log from outside the node (its own connection), as a user's
    dashboard would: SENT rows and their times."""

    def __init__(self, db: str) -> None:
        self.db = db

    def _query(self, sql: str) -> list[tuple[int, ...]]:
        if self.db.startswith("sqlite:"):
            conn = sqlite3.connect(f"file:{self.db.split(':///', 1)[1]}?mode=ro", uri=True,
                                   timeout=30)
            try:
                return conn.execute(sql).fetchall()
            finally:
                conn.close()
        import psycopg

        with psycopg.connect(self.db, autocommit=True) as conn:
            return conn.execute(sql).fetchall()  # type: ignore[return-value]

    def sent_count(self) -> int:
        return int(self._query("SELECT COUNT(*) FROM email_deliveries"
                               " WHERE state = 'SENT'")[0][0])

    def sent_times(self) -> list[int]:
        return [r[0] for r in self._query("SELECT updated_at FROM email_deliveries"
                                          " WHERE state = 'SENT' ORDER BY updated_at")]


def cpu_s() -> float:
    """This process's CPU seconds, every thread."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def children_cpu_s() -> float:
    """CPU seconds of the children waited for (the dispatcher process, once it ended)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_phase(db: str, name: str, n: int, relay: str,
              **settings: object) -> tuple[list[int], float]:
    """Returns [node start, each SENT's time] in ms, and the CPU seconds the node used
    (this process while the node ran, and its dispatcher process if it had one)."""
    config = Settings(db=db, smtp_url=relay, public_url="https://x.test",
                      **settings)  # type: ignore[arg-type]
    t = Tidings(settings=config)
    t.email.create_template("bench", "Hello {{name}}, issue {{n}}",
                            html="<h1>Hello {{name}}</h1><p>This is issue {{n}}.</p>",
                            text="Hello {{name}}\nThis is issue {{n}}.")
    t0 = time.perf_counter()
    create(t, name, n)
    print(f"  {name}: created {n} schedules in {time.perf_counter() - t0:.1f} s",
          file=sys.stderr)
    node = Node(t, config, dispatcher_process=runs_apart(config),
                email_process=sends_apart(config))
    deliveries = Log(db)

    async def main() -> float:
        start = time.time()
        task = asyncio.create_task(node.run())
        deadline = time.monotonic() + max(120.0, n / 50)
        while time.monotonic() < deadline and not task.done():
            await asyncio.sleep(0.2)
            if await asyncio.to_thread(deliveries.sent_count) >= n:
                break
        node.stop()
        await task
        return start

    freeze_startup_objects()  # as `tidings serve` does before serving
    cpu0, children0 = cpu_s(), children_cpu_s()
    start = asyncio.run(main())
    cpu = cpu_s() - cpu0 + children_cpu_s() - children0
    node.bridge.close()
    t.close()
    times = deliveries.sent_times()
    if len(times) < n:
        raise SystemExit(f"{name}: only {len(times)} of {n} sent")
    return [int(start * 1000), *times], cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--limited-n", type=int, default=2_000)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--db", default=None,
                        help="postgresql://… (a schema of its own per phase, dropped "
                        "after); default: a SQLite file in a temporary folder")
    parser.add_argument("--sink", choices=("fast", "aiosmtpd"), default="fast")
    parser.add_argument("--chunking", choices=("on", "off"), default="on",
                        help="whether the fast sink offers CHUNKING (BDAT); aiosmtpd never")
    args = parser.parse_args()
    port = free_port()
    sink = subprocess.Popen([sys.executable, "-c",
                             FAST_SINK if args.sink == "fast" else AIOSMTPD_SINK, str(port),
                             args.chunking],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout is not None
        assert sink.stdout.readline().strip() == "ready"
        relay = f"smtp://127.0.0.1:{port}"
        with tempfile.TemporaryDirectory() as workdir:
            common = {"concurrency": args.concurrency, "smtp_max_connections": args.connections}
            with scratch_database(args.db, os.path.join(workdir, "unlimited.db")) as db:
                times, node_cpu = run_phase(db, "unlimited", args.n, relay, **common)
            sent_per_s = args.n / ((times[-1] - times[0]) / 1000)
            with scratch_database(args.db, os.path.join(workdir, "limited.db")) as db:
                limited = run_phase(db, "limited", args.limited_n, relay,
                                    smtp_max_rate=args.rate, **common)[0][1:]
            limited_rate = (len(limited) - 1) / ((limited[-1] - limited[0]) / 1000)
    finally:
        if sink.stdin:
            sink.stdin.close()
        sink.wait(10)
    assert sink.stdout is not None
    received = json.loads(sink.stdout.readline())
    if received["messages"] < args.n + args.limited_n:
        raise SystemExit(f"the sink received {received['messages']} messages of "
                         f"{args.n + args.limited_n}")
    report({"db": (args.db or "sqlite:").split(":", 1)[0], "sink": args.sink,
            "chunking": args.sink == "fast" and args.chunking == "on",
            "sent_per_s": round(sent_per_s, 1), "limited_rate_per_s": round(limited_rate, 1),
            "node_cpu_ms_per_email": round(node_cpu * 1000 / args.n, 3),
            "sink_cpu_ms_per_email": round(received["cpu_s"] * 1000
                                           / received["messages"], 3),
            "peak_rss_mb": peak_rss_mb()})


if __name__ == "__main__":
    main()
