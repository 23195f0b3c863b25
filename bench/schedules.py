"""Schedules: bulk creation, draining a due backlog into a queue, and steady-rate lateness.

    python bench/schedules.py --n 1000000 [--db sqlite:///bench.db] [--pending 0]

1. create_per_s: `create_many` of N one-shot schedules into one queue target.
2. drain_per_s: all N made due in the same minute, fired by one dispatcher into the queue
   (drain_cpu_s: the process CPU time that took).
3. lateness: schedules due at a steady 2,000/s for `--steady-s` seconds, fired by a
   dispatcher running in its own loop (as in `tidings serve`); lateness = firing time
   minus due time.
4. `--pending M` first creates M far-future schedules, to show RSS does not grow with
   how many are pending.
Final line: {"create_per_s", "drain_per_s", "drain_cpu_s", "lateness_p50_ms", "lateness_p99_ms",
"peak_rss_mb"}.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from datetime import UTC, datetime

from _common import peak_rss_mb, percentile, report  # noqa: E402

from tidings.client import Tidings  # noqa: E402
from tidings.clock import SystemClock  # noqa: E402
from tidings.model.schedules import (  # noqa: E402
    ActionAfterCompletion,
    ScheduleSpec,
    Target,
    TargetKind,
)
from tidings.queues.internal import ensure_internal_queues  # noqa: E402
from tidings.runtime.bridge import Bridge  # noqa: E402
from tidings.schedules.dispatcher import Dispatcher  # noqa: E402
from tidings.settings import Settings  # noqa: E402


class ShiftedClock:
    """System time plus an offset: lets the drain phase jump to the due minute."""

    def __init__(self) -> None:
        self.offset = 0
        self._sys = SystemClock()

    def now_ms(self) -> int:
        return self._sys.now_ms() + self.offset


def at_expr(ms: int) -> str:
    return "at(" + datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S") + ")"


def specs(prefix: str, n: int, when_ms: int, target: Target, spread_ms: int = 0):  # type: ignore[no-untyped-def]
    for i in range(n):
        at = when_ms + (i * spread_ms // n if spread_ms else 0)
        yield ScheduleSpec(f"{prefix}-{i}", at_expr(at), target,
                           action_after_completion=ActionAfterCompletion.DELETE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--db", default=None)
    parser.add_argument("--pending", type=int, default=0)
    parser.add_argument("--steady-rate", type=int, default=2000)
    parser.add_argument("--steady-s", type=int, default=20)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="tidings-bench-")
    clock = ShiftedClock()
    t = Tidings(settings=Settings(db=args.db or f"sqlite:///{tmp}/bench.db"), clock=clock)
    ensure_internal_queues(t.queues)
    queue = f"bench-{os.getpid()}"
    t.queues.create_queue(queue, retention_s=14 * 86400)
    target = Target(TargetKind.QUEUE, queue, input='{"type": "reminder", "id": "x"}')
    now = clock.now_ms()

    if args.pending:
        far = now + 300 * 86400 * 1000
        for r in t.schedules.create_many(specs("pending", args.pending, far, target,
                                               86400 * 1000)):
            assert r.created
        print(f"{args.pending} pending; rss {peak_rss_mb()} MB", file=sys.stderr)

    due_minute = (now // 60_000 + 10) * 60_000
    start = time.perf_counter()
    created = sum(r.created for r in t.schedules.create_many(
        specs("drain", args.n, due_minute, target), chunk=10_000))
    create_s = time.perf_counter() - start
    assert created == args.n
    print(f"created {args.n} in {create_s:.1f}s; rss {peak_rss_mb()} MB", file=sys.stderr)

    dispatcher = Dispatcher(t.schedules, t.queues, t.store, clock, t.notifier, Bridge(1),
                            batch=2000)
    clock.offset = due_minute + 60_000 - clock.now_ms() + clock.offset  # jump: all due
    start, start_cpu = time.perf_counter(), time.process_time()
    fired = 0
    while n := dispatcher.fire_due():
        fired += n
    drain_s = time.perf_counter() - start
    drain_cpu_s = time.process_time() - start_cpu  # steadier than wall time on a busy host
    assert t.queues.describe(queue).counts.visible == args.n, "every schedule fired once"
    print(f"drained {fired} in {drain_s:.1f}s; rss {peak_rss_mb()} MB", file=sys.stderr)
    t.queues.purge_queue(queue)

    # steady rate: schedules due at rate/s from 2 s from now, fired by a live loop
    clock.offset = 0
    steady_n = args.steady_rate * args.steady_s
    begin = (clock.now_ms() // 1000 + 3) * 1000
    lateness: list[int] = []
    # one-second resolution of at() is too coarse for a steady rate: use a rate() anchor per
    # schedule instead, each firing once (EndDate = StartDate)
    steady_specs = (
        ScheduleSpec(f"steady-{i}", "rate(1 day)", target,
                     start_ms=begin + i * 1000 // args.steady_rate,
                     end_ms=begin + i * 1000 // args.steady_rate + 1,
                     action_after_completion=ActionAfterCompletion.DELETE)
        for i in range(steady_n))
    for r in t.schedules.create_many(steady_specs, chunk=10_000):
        assert r.created
    live = Dispatcher(t.schedules, t.queues, t.store, clock, t.notifier, Bridge(1))
    live.on_fired = lateness.extend

    async def run() -> None:
        task = asyncio.create_task(live.run())
        while len(lateness) < steady_n:
            await asyncio.sleep(0.1)
        live.stop()
        await task

    asyncio.run(run())
    lateness.sort()
    t.close()
    report({
        "n": args.n,
        "pending": args.pending,
        "create_per_s": round(args.n / create_s),
        "drain_per_s": round(args.n / drain_s),
        "drain_s": round(drain_s, 1),
        "drain_cpu_s": round(drain_cpu_s, 1),
        "lateness_p50_ms": round(percentile(lateness, 50), 1),
        "lateness_p99_ms": round(percentile(lateness, 99), 1),
        "peak_rss_mb": peak_rss_mb(),
    })


if __name__ == "__main__":
    main()
