"""The wall clock of a running `tidings serve` stepped back and forward by an hour while
schedules are pending: no occurrence is lost or fired twice.

tidings sleeps on monotonic time and compares due instants with wall time. A step back
must neither fire again what already fired nor stall the node; a step forward fires what
became due at once, once.

How the clock is stepped: the node reads its wall clock through the injected `Clock`, and
the test-only setting `TIDINGS_CLOCK_OFFSET_FILE` makes it the system clock plus an offset
the test writes to a file, while monotonic time runs on untouched: what a step of the
system clock (an operator, or NTP) does to a process. libfaketime (Debian's package) was
tried first, as the more external tool: its 0.9.10 breaks Python 3.11's `time.sleep`
(EINVAL from `clock_nanosleep` when monotonic time is left real, an hour-long sleep when
it is faked too), so a node under it cannot run at all.
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import httpx
import pytest
from faults import Serve

from tidings.client import Tidings
from tidings.model.schedules import ActionAfterCompletion, ScheduleSpec, Target, TargetKind
from tidings.settings import Settings

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
HOUR_MS = 3_600_000


def _at(epoch_s: float) -> str:
    return time.strftime("at(%Y-%m-%dT%H:%M:%S)", time.gmtime(epoch_s))


def _schedules(url: str, prefix: str, n: int, first_s: float, spread_s: float) -> None:
    """`n` one-shots due from `first_s` seconds from now (real time), over `spread_s`;
    every other one deletes itself after firing, the rest stay, completed."""
    start = time.time() + first_s
    specs = [ScheduleSpec(
        f"{prefix}{i}", _at(start + spread_s * i / n),
        Target(TargetKind.QUEUE, "jobs", input=f"{prefix}{i}"),
        action_after_completion=(ActionAfterCompletion.DELETE if i % 2
                                 else ActionAfterCompletion.NONE)) for i in range(n)]
    with Tidings(settings=Settings(db=url)) as t:
        assert sum(r.created for r in t.schedules.create_many(specs)) == n


def _queued(url: str) -> int:
    with Tidings(settings=Settings(db=url)) as t:
        c = t.queues.describe("jobs").counts
        return c.visible + c.in_flight + c.delayed


class NodeClock:
    """Steps the node's wall clock and reads it back through the node's own API: the
    `created_at` of a queue it creates is its wall clock."""

    def __init__(self, node: Serve, offset_file: Path) -> None:
        self.node, self.file, self.probes = node, offset_file, 0

    def read_ms(self) -> int:
        self.probes += 1
        r = httpx.post(f"http://127.0.0.1:{self.node.port}/v1/queues",
                       json={"name": f"clock-probe-{self.probes}"}, timeout=10)
        r.raise_for_status()
        return int(datetime.fromisoformat(r.json()["created_at"]).timestamp() * 1000)

    def step_to(self, offset_ms: int) -> None:
        self.file.write_text(str(offset_ms))
        deadline = time.monotonic() + 10
        while abs(self.read_ms() - (time.time() * 1000 + offset_ms)) > 60_000:
            assert time.monotonic() < deadline, "the node's clock did not step"
            time.sleep(0.05)


def _wait_queued(url: str, n: int, timeout: float, node: Serve) -> float:
    """Seconds until the queue holds `n`; fails if it passes `n` or takes too long."""
    began = time.monotonic()
    while (got := _queued(url)) < n:
        assert node.alive(), "the node died"
        assert time.monotonic() - began < timeout, f"{got} of {n} fired"
        time.sleep(0.1)
    assert got == n, f"{got} queued, {n} expected: an occurrence fired twice"
    return time.monotonic() - began


def test_clock_stepped_back_and_forward_an_hour_loses_and_doubles_nothing(
    db_url: str, tmp_path: Path
) -> None:
    offset = tmp_path / "clock-offset-ms"
    offset.write_text("0")
    with Tidings(settings=Settings(db=db_url)) as t:
        t.queues.create_queue("jobs", retention_s=86400)
    node = Serve(db_url, tmp_path, env={"TIDINGS_CLOCK_OFFSET_FILE": str(offset)})
    try:
        node.wait_ready()
        clock = NodeClock(node, offset)
        _schedules(db_url, "a", 100, first_s=1, spread_s=2)      # fire before the steps
        _schedules(db_url, "c", 100, first_s=1800, spread_s=600)  # due in 30-40 minutes
        _wait_queued(db_url, 100, 60, node)

        # Back an hour: what fired stays fired; what is pending waits for its wall time.
        clock.step_to(-HOUR_MS)
        _schedules(db_url, "b", 100, first_s=2, spread_s=1)  # due in 2-3 s, real time
        time.sleep(5)  # past their due instant in real time, an hour early for the node
        assert _queued(db_url) == 100, "a step back fired something again, or early"

        # Forward an hour (back to real time): b is now due and fires at once, once.
        clock.step_to(0)
        took = _wait_queued(db_url, 200, 30, node)
        assert took < 15, f"b fired {took:.1f} s after the step: a sleep was on wall time"

        # Forward another hour: c (30-40 minutes ahead) became due; fires once.
        clock.step_to(HOUR_MS)
        _wait_queued(db_url, 300, 30, node)
        time.sleep(2)  # a second firing of anything would land now
        assert node.alive()
    finally:
        node.stop()
    # Read on the node's clock (an hour ahead now): what it enqueued after the last step
    # became visible at its own "now", which the real clock reaches only in an hour.
    bodies: list[str] = []
    with Tidings(settings=Settings(db=db_url, clock_offset_file=str(offset))) as t:
        while msgs := t.queues.receive("jobs", 10, wait_s=0, visibility_s=3600):
            bodies.extend(m.body for m in msgs)
    assert sorted(bodies) == sorted(f"{p}{i}" for p in "abc" for i in range(100))
