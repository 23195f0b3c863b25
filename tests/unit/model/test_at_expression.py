"""`at_expression`: an aware datetime as the `at(…)` text the Python API stores, in UTC,
milliseconds kept (and omitted when whole), read back to the same instant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from tidings.clock import to_ms
from tidings.errors import ValidationError
from tidings.model.schedules import at_expression
from tidings.triggers import parse_expression


@pytest.mark.parametrize(("when", "text"), [
    (datetime(2026, 12, 1, 4, 0, 3, 250_000, tzinfo=UTC), "at(2026-12-01T04:00:03.250)"),
    (datetime(2026, 12, 1, 4, 0, 3, 7_999, tzinfo=UTC), "at(2026-12-01T04:00:03.007)"),
    (datetime(2026, 12, 1, 4, 0, 3, 999, tzinfo=UTC), "at(2026-12-01T04:00:03)"),
    (datetime(2026, 12, 1, 5, 30, tzinfo=timezone(timedelta(hours=1, minutes=30))),
     "at(2026-12-01T04:00:00)"),
    (datetime(1, 1, 1, 0, 0, 0, 1_000, tzinfo=UTC), "at(0001-01-01T00:00:00.001)"),
    (datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC), "at(9999-12-31T23:59:59.999)"),
])
def test_an_instant_is_written_in_utc_to_the_millisecond(when: datetime, text: str) -> None:
    assert at_expression(when) == text
    trigger = parse_expression(text, "UTC")
    assert trigger.next_fire_after(-(2**62)) == to_ms(when)


def test_a_naive_datetime_is_refused_by_name() -> None:
    with pytest.raises(ValidationError, match="when"):
        at_expression(datetime(2026, 12, 1), "when")
