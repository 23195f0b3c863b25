"""The sweeper's rests: an idle node sweeps less and less often, work brings it back."""

from __future__ import annotations

from tidings.ops.sweeper import IDLE_STRETCH, MOVE_TICK_S, SweepPace


def test_sweeps_that_find_nothing_rest_longer_up_to_the_stretch() -> None:
    pace = SweepPace(5.0)
    rests = [pace.after(worked=False, more=False) for _ in range(5)]
    assert rests == [10.0, 20.0, 5.0 * IDLE_STRETCH, 5.0 * IDLE_STRETCH, 5.0 * IDLE_STRETCH]


def test_a_sweep_that_found_work_brings_the_interval_back() -> None:
    pace = SweepPace(5.0)
    for _ in range(4):
        pace.after(worked=False, more=False)
    assert pace.after(worked=True, more=False) == 5.0
    assert pace.after(worked=False, more=False) == 10.0


def test_a_backlog_or_a_running_move_task_comes_back_within_a_second() -> None:
    pace = SweepPace(5.0)
    assert pace.after(worked=True, more=True) == MOVE_TICK_S
    assert SweepPace(0.2).after(worked=True, more=True) == 0.2  # never later than the interval
