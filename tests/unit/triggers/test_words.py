"""Schedule expressions in words."""

from __future__ import annotations

import pytest

from tidings.triggers.words import describe


@pytest.mark.parametrize(("expression", "zone", "words"), [
    ("rate(1 minute)", "UTC", "every minute"),
    ("rate(5 minutes)", "UTC", "every 5 minutes"),
    ("rate(2 days)", "UTC", "every 2 days"),
    ("at(2026-12-01T09:30:00)", "UTC", "once, at 2026-12-01 09:30:00 UTC"),
    ("at(2026-12-01T09:30:00)", "Asia/Tokyo", "once, at 2026-12-01 09:30:00 (Asia/Tokyo)"),
    ("cron(0 9 ? * MON-FRI *)", "Europe/Paris", "at 09:00, Monday to Friday (Europe/Paris)"),
    ("cron(30 8,17 * * ? *)", "UTC", "at 08:30 and 17:30, every day"),
    ("cron(0 0 L * ? *)", "UTC", "at 00:00, on the last day of the month"),
    ("cron(0 12 ? * 6#3 *)", "UTC", "at 12:00, on the third Friday of the month"),
    ("cron(0/15 * * * ? *)", "UTC", "every 15 minutes, every day"),
    ("cron(0 10 1 JAN,JUL ? 2027)", "UTC",
     "at 10:00, on day 1 of the month, in January and July, in 2027"),
    ("cron(0 9-17 ? * MON *)", "UTC", "at minute 0 from 09:00 to 17:59, Monday"),
])
def test_describe(expression: str, zone: str, words: str) -> None:
    assert describe(expression, zone) == words
