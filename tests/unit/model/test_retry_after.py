"""HTTP's Retry-After (RFC 9110 §10.2.3), the one parser of webhook targets and push
subscriptions: delay-seconds, the three HTTP-date forms a recipient must accept (§5.6.7),
a cap, and None for anything else (the caller's back-off then applies)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tidings.model.limits import retry_after_ms

NOW = int(datetime(1994, 11, 6, 8, 49, 30, tzinfo=UTC).timestamp() * 1000)
CAP = 3_600_000


@pytest.mark.parametrize(("value", "ms"), [
    ("0", 0), ("1", 1000), (" 120 ", 120_000), ("3600", CAP), ("999999999", CAP),
    # the three forms of one instant, 7 s after NOW
    ("Sun, 06 Nov 1994 08:49:37 GMT", 7000),  # IMF-fixdate
    ("Sunday, 06-Nov-94 08:49:37 GMT", 7000),  # obsolete RFC 850
    ("Sun Nov  6 08:49:37 1994", 7000),  # asctime: no zone, taken as GMT
    ("Sun, 06 Nov 1994 08:49:00 GMT", 0),  # already past
    ("Mon, 07 Nov 1994 08:49:30 GMT", CAP),  # a day ahead: capped
])
def test_delay_seconds_and_http_dates(value: str, ms: int) -> None:
    assert retry_after_ms(value, NOW, cap_ms=CAP) == ms


@pytest.mark.parametrize("value", [None, "", "  ", "1.5", "-1", "+5", "1e3", "soon",
                                   "\u0661\u0662", "Sun, 32 Nov 1994 08:49:37 GMT"])
def test_anything_else_is_none(value: str | None) -> None:
    assert retry_after_ms(value, NOW, cap_ms=CAP) is None
