"""Queue throughput: send N messages in batches of 10, then receive+delete them in tens.

    python bench/queue_throughput.py --n 200000 [--db sqlite:///bench.db]

Goes through the Python API (QueueService) on one thread, as an application would.
End-to-end latency is measured from each message's SentTimestamp to its receive, on a
separate phase where a sender and a receiver run together at a steady rate (so the figure
means "time in the queue", not "time waiting behind N backlogged messages").
Final line: {"send_per_s", "receive_delete_per_s", "latency_p50_ms", "latency_p99_ms",
"peak_rss_mb"}.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

from _common import peak_rss_mb, percentile, report, scratch_dir  # noqa: E402

from tidings.client import Tidings  # noqa: E402
from tidings.model.messages import OutgoingMessage  # noqa: E402
from tidings.settings import Settings  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--db", default=None)
    parser.add_argument("--latency-n", type=int, default=20_000)
    parser.add_argument("--latency-rate", type=int, default=2_000,
                        help="messages/s sent during the latency phase (below capacity, so the"
                             " figure is time in the queue, not time behind a backlog)")
    args = parser.parse_args()
    tmp = scratch_dir()
    db = args.db or f"sqlite:///{tmp}/bench.db"
    t = Tidings(settings=Settings(db=db))
    q = t.queues
    name = f"bench-{os.getpid()}"
    q.create_queue(name, visibility_timeout_s=300)
    body = '{"type": "invoice.generate", "id": "%08d", "customer": "c-123456"}'

    start = time.perf_counter()
    for base in range(0, args.n, 10):
        batch = [OutgoingMessage(body % (base + i), entry_id=str(i))
                 for i in range(min(10, args.n - base))]
        q.send_batch(name, batch)
    send_s = time.perf_counter() - start
    print(f"sent {args.n} in {send_s:.2f}s; rss {peak_rss_mb()} MB", file=sys.stderr)

    start = time.perf_counter()
    got = 0
    while got < args.n:
        msgs = q.receive(name, 10, wait_s=0)
        if not msgs:
            break
        q.delete_batch(name, [(str(i), m.receipt_handle) for i, m in enumerate(msgs)])
        got += len(msgs)
    recv_s = time.perf_counter() - start
    assert got == args.n, f"received {got} of {args.n}"

    # Latency phase: a sender thread at a steady pace, this thread long-polling.
    latencies: list[float] = []
    total = args.latency_n

    def sender() -> None:
        start = time.perf_counter()
        for k in range(0, total, 10):
            q.send_batch(name, [OutgoingMessage("x", entry_id=str(i)) for i in range(10)])
            ahead = start + (k + 10) / args.latency_rate - time.perf_counter()
            if ahead > 0:
                time.sleep(ahead)

    th = threading.Thread(target=sender)
    th.start()
    seen = 0
    while seen < total:
        msgs = q.receive(name, 10, wait_s=5)
        now_ms = time.time() * 1000
        latencies.extend(now_ms - m.sent_at for m in msgs)
        if msgs:
            q.delete_batch(name, [(str(i), m.receipt_handle) for i, m in enumerate(msgs)])
        seen += len(msgs)
    th.join()
    latencies.sort()
    t.close()
    report({
        "n": args.n,
        "send_per_s": round(args.n / send_s),
        "receive_delete_per_s": round(args.n / recv_s),
        "latency_p50_ms": round(percentile(latencies, 50), 2),
        "latency_p99_ms": round(percentile(latencies, 99), 2),
        "peak_rss_mb": peak_rss_mb(),
    })


if __name__ == "__main__":
    main()
