"""Push subscriptions: one node pushing a queue to a local HTTP receiver.

Three figures, each from where the user stands (the receiver is another process, a small
uvicorn app answering at once; the steady sends come from a third, as an API would send):
1. throughput: `--messages` (100,000) sent first, then pushed at concurrency 64: pushed/s,
   and the node's CPU per push;
2. latency: a steady `--rate` (1,000) messages/s for `--steady-s` seconds; the time from
   each send to the receiver having it (p50 / p99);
3. a receiver failing 20 % of requests at random: every message is delivered (lost 0), and
   no message is answered 2xx more than once (duplicates: a failure's retry is not one).

The pushers run on uvloop, as a node's do (`tidings serve` runs under uvicorn's loop).

    python bench/push.py [--pg [postgresql://…]] [--messages 100000]
    python bench/push.py --loop [--rate 1000] [--steady-s 60]   # only the steady run
"""

from __future__ import annotations

# First, before anything imports the stdlib `email` (psycopg does): see _common.
from _common import percentile, report, scratch_database, scratch_dir

# isort: split

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time

import uvloop

from tidings.client import Tidings
from tidings.model.messages import OutgoingMessage
from tidings.push.pusher import Retries
from tidings.push.pushers import Pushers
from tidings.runtime.bridge import Bridge
from tidings.settings import Settings


def receiver_main(port: int, out: str, fail_rate: float) -> None:
    """The receiver process: answers 200 (or 500 at `fail_rate`), and on SIGTERM writes
    {message id: [2xx answers, failures, first receive latency ms]} to `out`."""
    import signal

    import uvicorn

    seen: dict[str, list[float]] = {}

    async def app(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] != "http":
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
                message = await receive()
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            m = await receive()
            body += m.get("body", b"")
            if not m.get("more_body"):
                break
        now = time.time()
        headers = dict(scope["headers"])
        mid = headers[b"webhook-id"].decode()
        entry = seen.setdefault(mid, [0, 0, -1.0])
        failed = random.random() < fail_rate
        entry[1 if failed else 0] += 1
        if entry[2] < 0:
            entry[2] = (now - json.loads(body)["t"]) * 1000
        await send({"type": "http.response.start", "status": 500 if failed else 200,
                    "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})

    def dump(*_: object) -> None:
        with open(out, "w") as f:
            json.dump(seen, f)
        os._exit(0)

    signal.signal(signal.SIGTERM, dump)
    # One socket write per answer, as a node's own server does (server/wire.py): a head
    # and an empty body in two writes meet Nagle and the client's delayed ACK (~40 ms).
    from tidings.server.wire import GatheringHttpToolsProtocol

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False,
                http=GatheringHttpToolsProtocol)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_receiver(folder: str, name: str, fail_rate: float) -> tuple[subprocess.Popen[bytes],
                                                                       str, str]:
    port, out = free_port(), os.path.join(folder, f"{name}.json")
    proc = subprocess.Popen([sys.executable, __file__, "--receiver", str(port), out,
                             str(fail_rate)])
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return proc, f"http://127.0.0.1:{port}/hook", out
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("the receiver did not start")


def stop_receiver(proc: subprocess.Popen[bytes], out: str) -> dict[str, list[float]]:
    proc.terminate()
    proc.wait(30)
    with open(out) as f:
        return dict(json.load(f))


class RunningPushers:
    def __init__(self, t: Tidings) -> None:
        self.bridge = Bridge.for_store(t.store)
        self.loop = uvloop.new_event_loop()
        self.pushers = Pushers(t.push, self.bridge, retries=Retries(0.2, 2.0), refresh_s=0.2)
        self.thread = threading.Thread(target=self.loop.run_until_complete,
                                       args=(self.pushers.run(),), daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.pushers.stop)
        self.thread.join(60)
        self.bridge.close()


def send_many(t: Tidings, queue: str, n: int, chunk: int = 1000) -> None:
    record = t.queues.get_queue(queue)
    for start in range(0, n, chunk):
        body = json.dumps({"t": time.time()})
        t.queues.ops.send(record, [OutgoingMessage(body)] * min(chunk, n - start))


def drained(t: Tidings, queue: str) -> bool:
    c = t.queues.describe(queue).counts
    return c.visible + c.in_flight + c.delayed == 0


def wait_drained(t: Tidings, queue: str, timeout_s: float) -> None:
    deadline = time.time() + timeout_s
    while not drained(t, queue):
        if time.time() > deadline:
            raise RuntimeError(f"{queue} not drained within {timeout_s} s")
        time.sleep(0.25)  # each look is a count: often, it costs the pushers CPU


PG = os.environ.get("TIDINGS_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


def sender_main(db: str, queue: str, rate: float, seconds: float) -> None:
    """The steady sender process: `rate` messages a second, sent 10 at a time at even
    intervals, each carrying the instant of its send."""
    t = Tidings(settings=Settings(db=db))
    record = t.queues.get_queue(queue)
    tick, n = 10 / rate, int(seconds * rate / 10)
    begin = time.time()
    for i in range(n):
        delay = begin + i * tick - time.time()
        if delay > 0:
            time.sleep(delay)
        t.queues.ops.send(record, [OutgoingMessage(json.dumps({"t": time.time()}))] * 10)
    t.close()


def steady(t: Tidings, db: str, folder: str, rate: float, seconds: float) -> dict[str, float]:
    proc, url, out = start_receiver(folder, "steady", 0.0)
    t.queues.create_queue("steady")
    t.queues.subscribe("steady", url, concurrency=64)
    subprocess.run([sys.executable, __file__, "--sender", db, "steady", str(rate),
                    str(seconds)], check=True)
    wait_drained(t, "steady", 120)
    seen = stop_receiver(proc, out)
    latencies = sorted(v[2] for v in seen.values())
    return {"rate": rate, "steady_s": seconds, "steady_messages": len(latencies),
            "latency_p50_ms": round(percentile(latencies, 50), 1),
            "latency_p99_ms": round(percentile(latencies, 99), 1),
            "latency_max_ms": round(latencies[-1], 1) if latencies else 0.0}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pg", nargs="?", const=PG, default=None,
                        help=f"PostgreSQL (a schema is made in it; default {PG})")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rate", type=float, default=1000.0,
                        help="messages a second of the steady run")
    parser.add_argument("--steady-s", type=float, default=10.0)
    parser.add_argument("--failing", type=int, default=10_000)
    parser.add_argument("--loop", action="store_true", help="only the steady run")
    args = parser.parse_args()
    folder = scratch_dir()
    with scratch_database(args.pg, f"{folder}/push.db") as db:
        t = Tidings(settings=Settings(db=db))
        pushers = RunningPushers(t)
        figures: dict[str, object] = {"db": "postgres" if args.pg else "sqlite",
                                      "concurrency": 64, "load": os.getloadavg()[0]}
        try:
            if not args.loop:
                figures.update(throughput(t, folder, args.messages))
            figures.update(steady(t, db, folder, args.rate, args.steady_s))
            if not args.loop:
                figures.update(failing(t, folder, args.failing))
        finally:
            pushers.stop()
            t.close()
    figures["load_after"] = os.getloadavg()[0]
    report(figures)


def throughput(t: Tidings, folder: str, messages: int) -> dict[str, object]:
    proc, url, out = start_receiver(folder, "fast", 0.0)
    t.queues.create_queue("bulk")
    send_many(t, "bulk", messages)
    t.queues.subscribe("bulk", url, concurrency=64)
    started, cpu = time.time(), time.process_time()
    wait_drained(t, "bulk", 1800)
    elapsed, cpu = time.time() - started, time.process_time() - cpu
    seen = stop_receiver(proc, out)
    # CPU of this process (the node's pushers; its looks at the queue are a few %): on a
    # shared machine, a steadier figure than pushes a second
    return {"messages": messages, "pushed_per_s": round(messages / elapsed),
            "node_cpu_us_per_push": round(cpu / messages * 1e6),
            "bulk_lost": messages - sum(1 for v in seen.values() if v[0] >= 1),
            "bulk_duplicates": sum(1 for v in seen.values() if v[0] > 1)}


def failing(t: Tidings, folder: str, messages: int) -> dict[str, object]:
    proc, url, out = start_receiver(folder, "failing", 0.2)
    t.queues.create_queue("flaky")
    send_many(t, "flaky", messages)
    t.queues.subscribe("flaky", url, concurrency=64)
    wait_drained(t, "flaky", 600)
    seen = stop_receiver(proc, out)
    return {"failing_messages": messages,
            "failures_answered": int(sum(v[1] for v in seen.values())),
            "lost": messages - sum(1 for v in seen.values() if v[0] >= 1),
            "duplicates": sum(1 for v in seen.values() if v[0] > 1)}


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--receiver":
        receiver_main(int(sys.argv[2]), sys.argv[3], float(sys.argv[4]))
    elif len(sys.argv) > 1 and sys.argv[1] == "--sender":
        sender_main(sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]))
    else:
        main()
