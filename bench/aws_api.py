"""SQS JSON-protocol request rates of `tidings serve`, from a concurrent keep-alive client.

    python bench/aws_api.py [--seconds 10] [--concurrency 32] [--db URL]

Starts `tidings serve` (a subprocess, SQLite in a temporary directory unless --db), then
drives it over loopback with a minimal asyncio HTTP/1.1 client (persistent connections;
boto3's own per-call overhead would dominate the figure, so it is not used here):
1. single SendMessage requests/s;
2. ReceiveMessage (1 message) + DeleteMessage pairs/s;
3. SendMessageBatch of 10: messages/s.
Final line: {"send_req_per_s", "receive_delete_req_per_s", "batch_msgs_per_s"}, each phase's
request latencies (`*_p50_ms`, `*_p99_ms`; a pair's is its two calls together) and the
server's CPU seconds per 10,000 requests, pairs or messages (`*_cpu_s_per_10k`, from
/proc: a figure that holds on a loaded machine, where the rates do not) and this client's
(`*_client_cpu_s_per_10k`: what the client takes of the same 2 cores).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from typing import Any

from _common import percentile, report, scratch_dir  # noqa: E402


class Conn:
    """One keep-alive HTTP/1.1 connection speaking the SQS JSON protocol."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 port: int) -> None:
        self.reader, self.writer, self.port = reader, writer, port

    @classmethod
    async def open(cls, port: int) -> Conn:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer, port)

    async def call(self, action: str, params: dict[str, Any]) -> dict[str, Any]:
        body = json.dumps(params).encode()
        head = (f"POST / HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
                f"Content-Type: application/x-amz-json-1.0\r\n"
                f"X-Amz-Target: AmazonSQS.{action}\r\nContent-Length: {len(body)}\r\n\r\n")
        self.writer.write(head.encode() + body)
        status = await self.reader.readline()
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        payload = await self.reader.readexactly(length)
        if b" 200 " not in status:
            raise RuntimeError(f"{action}: {status!r} {payload[:200]!r}")
        return json.loads(payload) if payload else {}


def cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of process `pid` so far (0 where /proc is missing)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except (OSError, TypeError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def phase(conns: list[Conn], seconds: float, step: Any, name: str, pid: int | None,
                figures: dict[str, Any]) -> float:
    """Run `step(conn)` on every connection until `seconds` pass; the rate of what it
    returns per second. Adds the phase's latencies and server CPU to `figures`."""
    counts = [0] * len(conns)
    latencies: list[float] = []
    cpu_before, client_before = cpu_s(pid), time.process_time()
    start = time.perf_counter()
    deadline = start + seconds

    async def worker(i: int) -> None:
        while (t0 := time.perf_counter()) < deadline:
            counts[i] += await step(conns[i])
            latencies.append(time.perf_counter() - t0)

    await asyncio.gather(*(worker(i) for i in range(len(conns))))
    elapsed, done = time.perf_counter() - start, sum(counts)
    latencies.sort()
    figures[f"{name}_p50_ms"] = round(percentile(latencies, 50) * 1000, 2)
    figures[f"{name}_p99_ms"] = round(percentile(latencies, 99) * 1000, 2)
    if pid is not None and done:
        figures[f"{name}_cpu_s_per_10k"] = round((cpu_s(pid) - cpu_before) / done * 10_000, 2)
        figures[f"{name}_client_cpu_s_per_10k"] = round(
            (time.process_time() - client_before) / done * 10_000, 2)
    return done / elapsed


async def run(port: int, seconds: float, concurrency: int,
              pid: int | None = None) -> dict[str, Any]:
    conns = [await Conn.open(port) for _ in range(concurrency)]
    url = (await conns[0].call("CreateQueue", {"QueueName": "bench"}))["QueueUrl"]
    body = json.dumps({"type": "invoice.generate", "id": "12345678"})

    async def send(c: Conn) -> int:
        await c.call("SendMessage", {"QueueUrl": url, "MessageBody": body})
        return 1

    async def receive_delete(c: Conn) -> int:
        got = await c.call("ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": 1})
        for m in got.get("Messages", []):
            await c.call("DeleteMessage", {"QueueUrl": url, "ReceiptHandle": m["ReceiptHandle"]})
        return 1 if got.get("Messages") else 0

    entries = [{"Id": str(i), "MessageBody": body} for i in range(10)]

    async def send_batch(c: Conn) -> int:
        await c.call("SendMessageBatch", {"QueueUrl": url, "Entries": entries})
        return 10

    details: dict[str, Any] = {}
    send_rate = await phase(conns, seconds, send, "send", pid, details)
    rd_rate = await phase(conns, seconds, receive_delete, "receive_delete", pid, details)
    batch_rate = await phase(conns, seconds, send_batch, "batch", pid, details)
    for c in conns:
        c.writer.close()
    return {"send_req_per_s": round(send_rate), "receive_delete_req_per_s": round(rd_rate),
            "batch_msgs_per_s": round(batch_rate), **details, "concurrency": concurrency,
            "seconds_per_phase": seconds, "load_average": round(os.getloadavg()[0], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--db", default=None)
    args = parser.parse_args()
    tmp = scratch_dir()
    db = args.db or f"sqlite:///{tmp}/bench.db"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "tidings", "serve", "--db", db,
                               "--port", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env={**os.environ,
                                                              "TIDINGS_LOG_LEVEL": "warning"})
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("tidings serve did not start") from None
                time.sleep(0.1)
        figures = asyncio.run(run(port, args.seconds, args.concurrency, server.pid))
    finally:
        server.terminate()
        server.wait(timeout=30)
    report(figures)


if __name__ == "__main__":
    main()
