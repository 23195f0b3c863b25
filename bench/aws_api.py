"""SQS JSON-protocol request rates of `tidings serve`, from a concurrent keep-alive client.

    python bench/aws_api.py [--seconds 10] [--concurrency 32] [--db URL]

Starts `tidings serve` (a subprocess, SQLite in a temporary directory unless --db), then
drives it over loopback with a minimal asyncio HTTP/1.1 client (persistent connections;
boto3's own per-call overhead would dominate the figure, so it is not used here):
1. single SendMessage requests/s;
2. ReceiveMessage (1 message) + DeleteMessage pairs/s;
3. SendMessageBatch of 10: messages/s.
Final line: {"send_req_per_s", "receive_delete_req_per_s", "batch_msgs_per_s"}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

from _common import report  # noqa: E402


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


async def phase(conns: list[Conn], seconds: float, step: Any) -> int:
    """Run `step(conn)` on every connection until `seconds` pass; count what it returns."""
    deadline = time.perf_counter() + seconds
    counts = [0] * len(conns)

    async def worker(i: int) -> None:
        while time.perf_counter() < deadline:
            counts[i] += await step(conns[i])

    await asyncio.gather(*(worker(i) for i in range(len(conns))))
    return sum(counts)


async def run(port: int, seconds: float, concurrency: int) -> dict[str, Any]:
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

    start = time.perf_counter()
    sent = await phase(conns, seconds, send)
    send_rate = sent / (time.perf_counter() - start)
    start = time.perf_counter()
    pairs = await phase(conns, seconds, receive_delete)
    rd_rate = pairs / (time.perf_counter() - start)
    start = time.perf_counter()
    batched = await phase(conns, seconds, send_batch)
    batch_rate = batched / (time.perf_counter() - start)
    for c in conns:
        c.writer.close()
    return {"send_req_per_s": round(send_rate), "receive_delete_req_per_s": round(rd_rate),
            "batch_msgs_per_s": round(batch_rate), "concurrency": concurrency,
            "seconds_per_phase": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--db", default=None)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="tidings-bench-")
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
        figures = asyncio.run(run(port, args.seconds, args.concurrency))
    finally:
        server.terminate()
        server.wait(timeout=30)
    report(figures)


if __name__ == "__main__":
    main()
