"""The browser tests' seed at any hour of any day, without a browser: on a frozen clock set
to each of many "now"s, every campaign step the pages count is still to come, and summer's
forecast (what the campaign page draws, read with the same clock) has a bar in its next
6 hours, at the seed's now and half an hour later, when a page of the module may look.
Issue #31: a fixed 09:00 left no bar from 14:00 to 22:00 UTC in December."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import seed

from tidings.client import Tidings
from tidings.clock import FrozenClock, to_ms

ZONES = ["America/New_York", "Europe/London", "Asia/Kolkata", "Australia/Sydney"]
YEAR = 2027


def dst_changes(zone: str, year: int) -> list[datetime]:
    """The instants (to the hour) at which the zone's UTC offset changes during the year."""
    tz = ZoneInfo(zone)
    hour = datetime(year, 1, 1, tzinfo=UTC)
    out = []
    while hour.year == year:
        later = hour + timedelta(hours=1)
        if hour.astimezone(tz).utcoffset() != later.astimezone(tz).utcoffset():
            out.append(later)
        hour = later
    return out


def nows() -> list[datetime]:
    """Every 20 minutes through a winter and a summer day, the issue's 15:05Z, and each
    quarter hour from 90 minutes before to 90 minutes after every DST change of the
    recipients' zones (a repeated or skipped hour is where a wall time can go wrong)."""
    out = [datetime(YEAR, 12, 3, 15, 5, tzinfo=UTC)]
    for day in (datetime(YEAR, 1, 14, tzinfo=UTC), datetime(YEAR, 7, 14, tzinfo=UTC)):
        out += [day + timedelta(minutes=m) for m in range(0, 1440, 20)]
    for zone in ZONES:
        for change in dst_changes(zone, YEAR):
            out += [change + timedelta(minutes=m) for m in range(-90, 91, 15)]
    return out


def test_the_dst_changes_are_found() -> None:
    assert [len(dst_changes(z, YEAR)) for z in ZONES] == [2, 2, 0, 2]


def test_every_step_is_ahead_and_summer_has_a_bar_whatever_the_hour(tmp_path: Path) -> None:
    wrong = []
    for i, now in enumerate(nows()):
        clock = FrozenClock(to_ms(now))
        with Tidings(f"sqlite:///{tmp_path}/{i}.db", clock=clock) as t:
            seed.campaigns(t)
            for name in ("spring", "autumn", "winter", "summer"):
                scheduled = [p.scheduled for p in t.campaign_views.steps(name)]
                if scheduled != [12, 12]:
                    wrong.append(f"{now:%Y-%m-%d %H:%M}Z: {name} scheduled {scheduled}")
            for late in (0, 30):
                clock.set(to_ms(now + timedelta(minutes=late)))
                if sum(t.campaign_views.forecast("summer")[1]) == 0:
                    wrong.append(f"{now:%Y-%m-%d %H:%M}Z + {late} min: summer has no bar")
    assert not wrong, "\n".join(wrong)
