"""The sweeper's expiry on every backend: messages past retention go in short
transactions (`EXPIRE_STEP` rows each), at most `EXPIRE_STEPS` of them per pass."""

from __future__ import annotations

import asyncio
import time

import pytest

from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.model.messages import OutgoingMessage
from tidings.ops import sweeper as sweeper_module
from tidings.ops.sweeper import Sweeper
from tidings.runtime.bridge import Bridge


def fill(t: Tidings, n: int) -> None:
    t.queues.create_queue("short", retention_s=60)
    for start in range(0, n, 10):
        t.queues.send_batch("short", [OutgoingMessage("x", entry_id=str(i))
                                      for i in range(min(10, n - start))])


def test_expiry_runs_in_short_transactions(t: Tidings, clock: FrozenClock,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweeper_module, "EXPIRE_STEP", 40)
    fill(t, 100)
    clock.advance(61_000)
    sweeper = Sweeper(t.queues, Bridge(1), interval_s=5, job_memory_s=60)
    steps: list[tuple[int, int]] = []
    step = sweeper._expire_step

    def counted() -> tuple[int, int]:
        steps.append(got := step())
        return got

    sweeper._expire_step = counted  # type: ignore[method-assign]
    assert asyncio.run(sweeper._expire()) == (100, 0, False)
    assert [expired for expired, _ in steps] == [40, 40, 20]
    assert t.queues.describe("short").counts.visible == 0


def test_a_pass_expires_at_most_its_share_the_next_pass_the_rest(
        t: Tidings, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweeper_module, "EXPIRE_STEP", 10)
    monkeypatch.setattr(sweeper_module, "EXPIRE_STEPS", 2)
    fill(t, 50)
    clock.advance(61_000)
    sweeper = Sweeper(t.queues, Bridge(1), interval_s=5, job_memory_s=60)
    # (expired, job ids forgotten, more may be left: the next pass comes a second later,
    # not an interval)
    assert asyncio.run(sweeper._expire()) == (20, 0, True)
    assert t.queues.describe("short").counts.visible == 30
    assert asyncio.run(sweeper._expire()) == (20, 0, True)
    assert asyncio.run(sweeper._expire()) == (10, 0, False)
    assert t.queues.describe("short").counts.visible == 0


def test_an_idle_sweeper_still_expires_what_comes_due(
        t: Tidings, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """After sweeps that found nothing (rests stretched to IDLE_STRETCH intervals), a
    message past its retention is still expired by the next sweep."""
    t.queues.create_queue("short", retention_s=60)
    sweeper = Sweeper(t.queues, Bridge(1), interval_s=0.02, job_memory_s=60)
    found: list[float] = []
    step = sweeper._expire_step

    def counted() -> tuple[int, int]:
        found.append(time.monotonic())
        return step()

    sweeper._expire_step = counted  # type: ignore[method-assign]

    async def scenario() -> None:
        task = asyncio.create_task(sweeper.run())
        while len(found) < 6:  # rests of 0.04, 0.08, then 0.12 s (the stretch)
            await asyncio.sleep(0.01)
        fill(t, 5)
        clock.advance(61_000)
        while t.queues.describe("short").counts.visible:
            assert not task.done()
            await asyncio.sleep(0.01)
        sweeper.stop()
        await asyncio.wait_for(task, 5)

    asyncio.run(asyncio.wait_for(scenario(), 30))
    gaps = [b - a for a, b in zip(found, found[1:], strict=False)]
    assert max(gaps[:5]) >= 0.02 * 4  # it did rest longer than the interval while idle
