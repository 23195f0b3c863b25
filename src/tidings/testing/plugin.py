"""The pytest plugin tidings registers (entry point `pytest11`): the `tidings_time_travel`
fixture, a factory of time travels that are all closed after the test.

    def test_drip(tidings_time_travel):
        tt = tidings_time_travel(app, start=datetime(2026, 3, 1, tzinfo=UTC))
        signup.send(user="ada")
        tt.advance(days=7)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tidings.jobs.handlers import Handlers
from tidings.testing.time_travel import TimeTravel, time_travel


@pytest.fixture
def tidings_time_travel(tmp_path: Path) -> Iterator[Callable[..., TimeTravel]]:
    """`tidings_time_travel(app=None, *, start=None, settings=None)` → a `TimeTravel` on
    a SQLite file under the test's `tmp_path`."""
    with contextlib.ExitStack() as stack:
        count = 0

        def start(app: Handlers | None = None, *, start: datetime | None = None,
                  **kwargs: Any) -> TimeTravel:
            nonlocal count
            count += 1
            folder = tmp_path / f"tidings-time-travel-{count}"
            folder.mkdir()
            return stack.enter_context(time_travel(app, start=start, directory=folder,
                                                   **kwargs))

        yield start
