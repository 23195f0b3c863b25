"""A long soak: steady firings and messages for many minutes, watching for decay.

    python bench/soak.py --minutes 30 [--db URL] [--rate 2000]

One process runs what `tidings serve` runs (a `Node`: dispatcher, delivery consumer,
sweeper), with its dispatcher where serve puts it (`--dispatcher auto`: in a dispatcher
process of its own on a SQLite file, in the node on PostgreSQL); its RSS is the one
measured (with its dispatcher process's). Load processes beside it, clients of the same
database as an application's would be, pace the load every 100 ms:
- `--rate` one-shot schedules a second are created, each due ~2 s later and deleting
  itself when it fires into the queue `soak-fired`; a tenth as many far-future schedules
  are created and deleted again (cancellations);
- `--rate` messages a second are sent to `soak-msgs`;
- SQS-style consumers (`--consumers N` threads per queue: receive 10, delete them in a
  batch) take both queues; `--consumers 0` uses the node's own consumers instead (an
  `App` with a handler per queue, as `tidings serve --app` runs).

So rows are continuously inserted and deleted, and the database must reuse their space.
Every 5 s it samples the process's RSS (current, not peak), the database's size and the
counters. Final JSON line (besides counts, the backlog and the process's CPU seconds):
  throughput_first_5min / throughput_last_5min: firings/s + messages consumed/s
  rss_first_mb / rss_last_mb, db_mb_first / db_mb_last: the means over those windows
  lateness_p99_ms: firing time minus due time, over the run (and the worst window's);
    measured per firing when the dispatcher runs in this process; from the dispatcher
    process's lateness histogram (`tidings_firing_lateness_seconds`, interpolated within
    its buckets, as Prometheus' histogram_quantile does) when it runs apart
For runs shorter than 15 minutes the keys keep their names and compare the first and
last thirds. Floors (issue #16): last >= 0.9 x first throughput, RSS growth <= 10 %,
database size bounded, p99 <= 100 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from _common import report  # noqa: E402

from tidings.client import Tidings  # noqa: E402
from tidings.dispatch_process import runs_apart  # noqa: E402
from tidings.jobs.handlers import Handlers, Job  # noqa: E402
from tidings.model.messages import OutgoingMessage  # noqa: E402
from tidings.model.schedules import (  # noqa: E402
    ActionAfterCompletion,
    ScheduleSpec,
    Target,
    TargetKind,
)
from tidings.node import Node, freeze_startup_objects  # noqa: E402
from tidings.ops.nodes import LATENESS_BOUNDS_S  # noqa: E402
from tidings.runtime import metrics  # noqa: E402
from tidings.settings import Settings  # noqa: E402
from tidings.store import sqlite_path  # noqa: E402

TICK_S = 0.1
SAMPLE_S = 5.0
FIRED, MSGS = "soak-fired", "soak-msgs"


class Counters:
    """Counts the load processes add to, read by the node's process."""

    def __init__(self, ctx: Any) -> None:
        self.sent = ctx.Value("q", 0)
        self.consumed = ctx.Value("q", 0)
        self.created = ctx.Value("q", 0)
        self.cancelled = ctx.Value("q", 0)

    @staticmethod
    def add(value: Any, n: int) -> None:
        with value.get_lock():
            value.value += n


def rss_mb(pid: int | str = "self") -> float:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except FileNotFoundError:  # a dispatcher process between two lives
        return 0.0


def cpu_s(pid: int) -> float:
    """A process's user + system CPU seconds so far (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bucket_percentile(counts: list[int], q: float) -> float:
    """The q-th percentile (ms) of a histogram of counts per LATENESS_BOUNDS_S bucket,
    linear within the bucket it falls in (the +Inf bucket: its lower bound)."""
    total = sum(counts)
    if not total:
        return 0.0
    rank, seen, lower = q / 100 * total, 0, 0.0
    for upper, n in zip(LATENESS_BOUNDS_S, counts, strict=True):
        if n and seen + n >= rank:
            if upper == float("inf"):
                return lower * 1000
            return (lower + (upper - lower) * (rank - seen) / n) * 1000
        seen += n
        lower = upper
    return lower * 1000


def db_mb(url: str) -> tuple[float, float]:
    """The database's size and, on SQLite, the part of it that is the WAL (and -shm)
    file, which the driver lets grow between checkpoints and cuts back to 16 MB."""
    if url.startswith("sqlite"):
        path = sqlite_path(url)
        main, wal = (sum(os.path.getsize(p) for p in paths if os.path.exists(p)) / 2**20
                     for paths in ((path,), (f"{path}-wal", f"{path}-shm")))
        return main + wal, wal
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'm')").fetchone()
        return float(row[0] if row else 0) / 2**20, 0.0


def paced(stop: Any, step: object) -> None:
    """Call `step()` every TICK_S on a fixed grid; a slow step is caught up, not skipped,
    so the offered rate holds (or the shortfall shows in the throughput)."""
    next_at = time.monotonic()
    while not stop.is_set():
        step()  # type: ignore[operator]
        next_at += TICK_S
        pause = next_at - time.monotonic()
        if pause > 0:
            stop.wait(pause)


def creator(t: Tidings, rate: int, c: Counters, stop: Any) -> None:
    target = Target(TargetKind.QUEUE, FIRED, input='{"type": "soak"}')
    far = Target(TargetKind.QUEUE, FIRED, input='{"type": "never"}')
    per_tick = max(1, round(rate * TICK_S))
    seq = [0]
    cancel_next: list[str] = []

    def step() -> None:
        base = (time.time_ns() // 1_000_000) + 2000
        n0 = seq[0]
        seq[0] += per_tick
        # rate(1 day) from StartDate to StartDate+1 ms: one firing at a millisecond instant
        specs = [ScheduleSpec(f"s{n0 + i}", "rate(1 day)", target,
                              start_ms=base + i * 100 // per_tick,
                              end_ms=base + i * 100 // per_tick + 1,
                              action_after_completion=ActionAfterCompletion.DELETE)
                 for i in range(per_tick)]
        cancel = [f"x{n0 + i}" for i in range(max(1, per_tick // 10))]
        specs += [ScheduleSpec(name, "at(2099-01-01T00:00:00)", far) for name in cancel]
        made = sum(r.created for r in t.schedules.create_many(specs))  # a generator
        assert made == len(specs), f"{len(specs) - made} schedules not created"
        for name in cancel_next:
            t.schedules.delete(name)
        Counters.add(c.created, per_tick)
        Counters.add(c.cancelled, len(cancel_next))
        cancel_next[:] = cancel

    paced(stop, step)


def producer(t: Tidings, rate: int, c: Counters, stop: Any) -> None:
    per_tick = max(1, round(rate * TICK_S))

    def step() -> None:
        for start in range(0, per_tick, 10):
            t.queues.send_batch(MSGS, [OutgoingMessage('{"type": "soak-msg"}', entry_id=str(i))
                                       for i in range(min(10, per_tick - start))])
        Counters.add(c.sent, per_tick)

    paced(stop, step)


def consumer(t: Tidings, queue: str, c: Counters, stop: Any) -> None:
    while not stop.is_set():
        msgs = t.queues.receive(queue, 10, wait_s=1, visibility_s=60)
        if msgs:
            t.queues.delete_batch(queue, [(str(i), m.receipt_handle)
                                          for i, m in enumerate(msgs)])
            if queue == MSGS:
                Counters.add(c.consumed, len(msgs))


def load(kind: str, url: str, arg: Any, threads: int, c: Counters, stop: Any) -> None:
    """One load process (a client of the database, as an application would be): its own
    Tidings, `threads` threads of `kind`; any error stops the whole run."""
    with Tidings(settings=Settings(db=url, log_level="warning")) as t:
        run_load(kind, t, arg, threads, c, stop)


def run_load(kind: str, t: Tidings, arg: Any, threads: int, c: Counters, stop: Any) -> None:
    fn = {"creator": creator, "producer": producer, "consumer": consumer}[kind]
    errors: list[BaseException] = []

    def body() -> None:
        try:
            fn(t, arg, c, stop)
        except BaseException as exc:
            errors.append(exc)
            stop.set()
            raise

    pool = [threading.Thread(target=body) for _ in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    if errors:
        raise SystemExit(f"{kind} failed: {errors[0]!r}")


def hist_percentile(hist: Counter[int], q: float) -> float:
    total = hist.total()
    if not total:
        return 0.0
    rank, seen = q / 100 * (total - 1), 0
    for value in sorted(hist):
        seen += hist[value]
        if seen > rank:
            return float(value)
    return float(max(hist))


def backlog(t: Tidings) -> int:
    total = 0
    for q in (FIRED, MSGS):
        counts = t.queues.describe(q).counts
        total += counts.visible + counts.in_flight + counts.delayed
    return total


@dataclass
class Sample:
    at: float  # seconds since the start
    fired: int
    consumed: int
    rss_mb: float
    db_mb: float
    wal_mb: float  # of db_mb
    backlog: int  # messages waiting in both queues: the load not kept up with


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--db", default=None)
    parser.add_argument("--rate", type=int, default=2000, help="firings/s and messages/s")
    parser.add_argument("--consumers", type=int, default=2,
                        help="SQS-style consumer threads per queue (receive 10, delete in a "
                             "batch); 0: the node's own consumers (an App) instead")
    parser.add_argument("--concurrency", type=int, default=64,
                        help="the node's consumers: jobs at once")
    parser.add_argument("--warmup-s", type=float, default=15,
                        help="seconds of load before measuring starts")
    parser.add_argument("--dispatcher", choices=("auto", "inline", "process"),
                        default="auto", help="where the dispatcher runs, as "
                        "TIDINGS_DISPATCHER: auto is what tidings serve does (a process "
                        "of its own on a SQLite file)")
    parser.add_argument("--load", choices=("threads", "processes"), default=None,
                        help="where the load runs: threads of the node's process (the "
                             "default on SQLite, which one process owns) or processes "
                             "of their own (the default on PostgreSQL)")
    args = parser.parse_args()
    if args.load is None:
        args.load = "processes" if (args.db or "").startswith("postgres") else "threads"
    url = args.db or f"sqlite:///{tempfile.mkdtemp(prefix='tidings-soak-')}/soak.db"
    settings = Settings(db=url, log_level="warning", job_memory_s=60,
                        dispatcher=args.dispatcher)
    apart = runs_apart(settings)
    t = Tidings(settings=settings)
    for q in (FIRED, MSGS):
        t.queues.create_queue(q, retention_s=3600)
    ctx = multiprocessing.get_context("spawn")
    c = Counters(ctx)
    app = None
    if not args.consumers:
        app = Handlers(queue=MSGS, concurrency=args.concurrency)

        @app.handler("soak", queue=FIRED)
        async def fired_job(job: Job) -> None:
            pass

        @app.handler("soak-msg")
        async def msg_job(job: Job) -> None:
            Counters.add(c.consumed, 1)

    node = Node(t, settings, app=app, dispatcher_process=apart)
    fired: list[int] = [0]
    # Lateness as a histogram per minute of the run (ms -> count): the instrument's own
    # memory stays flat, so the RSS measured is the node's.
    lateness: dict[int, Counter[int]] = defaultdict(Counter)

    def on_fired(late: list[int]) -> None:  # on the dispatcher's (store) thread
        minute = int((time.monotonic() - began_at[0]) // 60) if measuring[0] else -1
        fired[0] += len(late)
        lateness[minute].update(late)

    began_at, measuring = [time.monotonic()], [False]
    cpu_at = [0.0, 0.0]  # CPU seconds (with the dispatcher process's) at start and end
    # Apart: per minute, the dispatcher process's lateness histogram (merged into this
    # process's metrics by the node) since the last look; its counts are the firings.
    buckets: dict[int, list[int]] = defaultdict(lambda: [0] * len(LATENESS_BOUNDS_S))
    seen_buckets = [metrics.LATENESS.state()[0]]

    def take_buckets() -> None:
        now = metrics.LATENESS.state()[0]
        delta = [a - b for a, b in zip(now, seen_buckets[0], strict=True)]
        seen_buckets[0] = now
        minute = int((time.monotonic() - began_at[0]) // 60) if measuring[0] else -1
        buckets[minute] = [a + b for a, b in zip(buckets[minute], delta, strict=True)]
        fired[0] += sum(delta)

    # CPU of dispatcher processes that are gone (one killed, say): each one's figure at
    # the last look before it went; the looks are the samples, every few seconds.
    child_cpu, child_pid, child_last = [0.0], [0], [0.0]

    def dispatcher_pid() -> int:
        proc = node.dispatcher_process.process if node.dispatcher_process else None
        return proc.pid if proc is not None else 0

    def dispatcher_cpu() -> float:
        pid = dispatcher_pid()
        if pid != child_pid[0]:  # a new one: the old one's last figure stays counted
            child_cpu[0] += child_last[0]
            child_pid[0], child_last[0] = pid, 0.0
        if pid:
            child_last[0] = cpu_s(pid) or child_last[0]
        return child_cpu[0] + child_last[0]

    if not apart:
        assert node.dispatcher is not None  # built in this process: its probe is called here
        node.dispatcher.on_fired = on_fired
    stop = ctx.Event()
    jobs: list[tuple[str, Any, int]] = [("creator", args.rate, 1), ("producer", args.rate, 1)]
    if args.consumers:  # SQS-style clients instead of the node's own consumers
        jobs += [("consumer", q, args.consumers) for q in (FIRED, MSGS)]
    procs: list[Any]
    if args.load == "processes":
        procs = [ctx.Process(target=load, args=(kind, url, arg, n, c, stop))
                 for kind, arg, n in jobs]
    else:  # one process owns a SQLite database: the load shares the node's Tidings
        procs = [threading.Thread(target=run_load, args=(kind, t, arg, n, c, stop))
                 for kind, arg, n in jobs]
    total_s = args.minutes * 60
    samples: list[Sample] = []

    async def run() -> None:
        freeze_startup_objects()  # as `tidings serve` does before serving
        task = asyncio.create_task(node.run())
        for proc in procs:
            proc.start()
        await asyncio.sleep(args.warmup_s)  # load processes start, caches fill: not measured
        if apart:
            take_buckets()  # the warm-up's firings: minute -1
        began = began_at[0] = time.monotonic()
        cpu_at[0] = time.process_time() + dispatcher_cpu()
        measuring[0] = True
        next_sample = began
        while (elapsed := time.monotonic() - began) < total_s:
            if task.done():
                task.result()
            if stop.is_set():
                raise RuntimeError("a load process failed (its error is above)")
            if time.monotonic() >= next_sample:
                if apart:
                    take_buckets()
                    dispatcher_cpu()  # (a look: a child that dies keeps its CPU counted)
                size, wal = await asyncio.to_thread(db_mb, url)
                waiting = await asyncio.to_thread(backlog, t)
                rss = rss_mb() + (rss_mb(dispatcher_pid()) if apart else 0.0)
                s = Sample(elapsed, fired[0], c.consumed.value, rss, size, wal, waiting)
                samples.append(s)
                print(f"  {elapsed:6.0f} s fired {s.fired} consumed {s.consumed} rss "
                      f"{s.rss_mb:.0f} MB db {s.db_mb:.1f} MB backlog {s.backlog}",
                      file=sys.stderr, flush=True)
                next_sample += min(SAMPLE_S, total_s / 30)
            await asyncio.sleep(0.2)
        cpu_at[1] = time.process_time() + dispatcher_cpu()
        stop.set()
        node.stop()
        await task

    try:
        asyncio.run(run())
    finally:
        stop.set()
        for proc in procs:
            proc.join(30)
        node.bridge.close()
        t.close()
    window = 300.0 if total_s >= 900 else total_s / 3
    first = [s for s in samples if s.at <= window]
    last = [s for s in samples if s.at >= total_s - window]

    def throughput(ws: list[Sample]) -> float:
        if len(ws) < 2:
            return 0.0
        span = ws[-1].at - ws[0].at
        return ((ws[-1].fired - ws[0].fired) + (ws[-1].consumed - ws[0].consumed)) / span

    def mean(values: list[float]) -> float:
        return sum(values) / len(values) if values else 0.0

    late_all: Counter[int] = Counter()
    worst = 0.0
    for minute, hist in lateness.items():  # p99 per minute: "throughout", not on average
        if minute < 0:
            continue  # warm-up
        late_all.update(hist)
        if hist.total() > 100:
            worst = max(worst, hist_percentile(hist, 99))
    counts_all = [0] * len(LATENESS_BOUNDS_S)
    for minute, counts in buckets.items():
        if minute < 0:
            continue
        counts_all = [a + b for a, b in zip(counts_all, counts, strict=True)]
        if sum(counts) > 100:
            worst = max(worst, bucket_percentile(counts, 99))

    def late_percentile(q: float) -> float:
        return bucket_percentile(counts_all, q) if apart else hist_percentile(late_all, q)
    tp_first, tp_last = throughput(first), throughput(last)
    rss_first, rss_last = mean([s.rss_mb for s in first]), mean([s.rss_mb for s in last])
    db_first, db_last = mean([s.db_mb for s in first]), mean([s.db_mb for s in last])
    report({
        "minutes": args.minutes,
        "backend": url.split(":", 1)[0],
        "load": args.load,
        "dispatcher": "process" if apart else "inline",
        "lateness_from": "histogram buckets" if apart else "each firing",
        "offered_per_s": 2 * args.rate,
        "created": c.created.value, "cancelled": c.cancelled.value, "fired": fired[0],
        "sent": c.sent.value, "consumed": c.consumed.value,
        "lateness_p50_ms": round(late_percentile(50), 1),
        "lateness_p99_worst_minute_ms": round(worst, 1),
        "throughput_ratio": round(tp_last / tp_first, 3) if tp_first else 0,
        # CPU seconds of this process (the node, plus the load on SQLite) and of the
        # dispatcher process, per 1,000 firings + messages consumed: unlike the wall
        # figures, not the host's load.
        "cpu_s": round(cpu_at[1] - cpu_at[0], 1),
        "cpu_ms_per_op": round(1000 * (cpu_at[1] - cpu_at[0]) / max(
            1, (samples[-1].fired - samples[0].fired)
            + (samples[-1].consumed - samples[0].consumed)), 3) if samples else 0,
        "backlog_first": first[-1].backlog if first else 0,
        "backlog_last": last[-1].backlog if last else 0,
        "rss_growth": round(rss_last / rss_first - 1, 3) if rss_first else 0,
        "throughput_first_5min": round(tp_first, 1),
        "throughput_last_5min": round(tp_last, 1),
        "rss_first_mb": round(rss_first, 1),
        "rss_last_mb": round(rss_last, 1),
        "db_mb_first": round(db_first, 1),
        "db_mb_last": round(db_last, 1),
        # without the WAL: the tables and indexes, whose free pages are reused
        "db_file_mb_first": round(db_first - mean([s.wal_mb for s in first]), 1),
        "db_file_mb_last": round(db_last - mean([s.wal_mb for s in last]), 1),
        "wal_mb_max": round(max((s.wal_mb for s in samples), default=0.0), 1),
        "lateness_p99_ms": round(late_percentile(99), 1),
    })


if __name__ == "__main__":
    main()
