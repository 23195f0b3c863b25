"""The stepped clock a test uses to move a node's wall clock (TIDINGS_CLOCK_OFFSET_FILE)."""

from __future__ import annotations

import time
from pathlib import Path

from tidings.clock import SteppedClock


def test_stepped_clock_follows_its_file_and_keeps_the_last_good_offset(
    tmp_path: Path
) -> None:
    path = tmp_path / "offset"
    path.write_text("-3600000")
    clock = SteppedClock(str(path))
    assert abs(clock.now_ms() - (time.time_ns() // 1_000_000 - 3_600_000)) < 1000
    path.write_text("7200000\n")
    time.sleep(SteppedClock.CHECK_S * 2)
    assert abs(clock.now_ms() - (time.time_ns() // 1_000_000 + 7_200_000)) < 1000
    path.write_text("not a number")  # a half-written file: the last offset holds
    time.sleep(SteppedClock.CHECK_S * 2)
    assert abs(clock.now_ms() - (time.time_ns() // 1_000_000 + 7_200_000)) < 1000
    path.unlink()
    time.sleep(SteppedClock.CHECK_S * 2)
    assert abs(clock.now_ms() - (time.time_ns() // 1_000_000 + 7_200_000)) < 1000
