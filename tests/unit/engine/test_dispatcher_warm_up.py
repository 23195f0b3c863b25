"""After a quiet spell the dispatcher reads the rows of a coming burst before they are due
(`Store.warm_due`), so that the pages its passes read and update are in memory by then:
the OS drops cached pages nobody touched, and reading them inside the passes made the
first second of a 10,000/s burst up to 0.8 s late. The warm-up is a read that changes
nothing, and a dispatcher that is firing anyway does not do it."""

from __future__ import annotations

import asyncio
import time

from tidings.client import Tidings
from tidings.clock import FrozenClock, from_ms
from tidings.model.schedules import ActionAfterCompletion, ScheduleSpec, Target
from tidings.runtime.bridge import Bridge
from tidings.schedules.dispatcher import QUIET_MS, WARM_LEAD_MS, WARM_SPAN_MS, Dispatcher
from tidings.settings import Settings

DELETE = ActionAfterCompletion.DELETE


def _one_shots(t: Tidings, at_ms: list[int], prefix: str = "job") -> None:
    for i, at in enumerate(at_ms):
        t.schedules.create(ScheduleSpec.once(f"{prefix}-{i}", from_ms(at),
                                             Target.queue("jobs", str(i)),
                                             action_after_completion=DELETE))


def test_warm_due_reads_the_rows_of_a_span_and_changes_nothing(t: Tidings,
                                                               clock: FrozenClock) -> None:
    t.queues.create_queue("jobs")
    now = clock.now_ms()
    _one_shots(t, [now + 1_000 + 10 * i for i in range(30)] + [now + 5_000])
    before = {s.name: (s.due_at, s.modified_at) for s in t.schedules.list()[0]}
    assert t.store.warm_due(now + 1_000, now + 1_200, 100) == (20, now + 1_190)
    assert t.store.warm_due(now + 1_000, now + 2_000, 7) == (7, now + 1_060)  # earliest first
    assert t.store.warm_due(now + 5_001, now + 9_000, 100) == (0, None)
    assert {s.name: (s.due_at, s.modified_at) for s in t.schedules.list()[0]} == before
    assert t.store.next_due_at() == now + 1_000


def test_a_quiet_dispatcher_warms_a_burst_up_and_a_busy_one_does_not(db_url: str) -> None:
    with Tidings(settings=Settings(db=db_url)) as t:  # the wall clock: the loop sleeps
        t.queues.create_queue("jobs")
        now = time.time_ns() // 1_000_000
        first = now + 1_000  # time for the loop to start and look before it is due
        later = first + WARM_SPAN_MS + 300  # past the first warm-up's span
        assert later - first < min(QUIET_MS, WARM_LEAD_MS)
        _one_shots(t, [first])
        _one_shots(t, [later + i for i in range(10)], prefix="later")
        bridge = Bridge(1)
        d = Dispatcher(t.schedules, t.queues, t.store, t.clock, t.notifier, bridge)

        async def run() -> None:
            loop = asyncio.create_task(d.run())
            deadline = time.monotonic() + 20
            while d.fired < 11:
                assert time.monotonic() < deadline, f"fired {d.fired} of 11"
                await asyncio.sleep(0.02)
            d.stop()
            await loop

        try:
            asyncio.run(run())
        finally:
            bridge.close()
        # Quiet at the start: the first schedule was read ahead. Then it fired, so the
        # ten due 2.3 s later were not (the passes keep their pages in memory).
        assert d.warmed == 1
        bodies = []
        while got := t.queues.receive("jobs", 10, wait_s=0):
            bodies += [m.body for m in got]
            for m in got:
                t.queues.delete("jobs", m.receipt_handle)
        assert sorted(bodies) == sorted(["0", *map(str, range(10))])  # each fired once
        assert t.schedules.list()[0] == []
