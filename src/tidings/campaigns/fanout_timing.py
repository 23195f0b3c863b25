"""When each step of a fan-out fires for one recipient: local wall times, DST, quiet hours.

Rules (documented for users in docs/campaigns.md):
- Wall times are read in the recipient's zone with the same rules as `at()`: a time inside
  a spring-forward gap fires shifted forward by the gap (02:30 → 03:30), a time that occurs
  twice (fall-back) means its first occurrence. Wall-time steps are therefore stored as
  `at(local wall time)` in the recipient's zone, and the scheduler computes the very same
  instant.
- A step `day` days after the base date is that many calendar days later in the recipient's
  zone (a DST change in between keeps the wall time, not the 24-hour multiple).
- Base date: `on` a given date; `next`: the first local date on which the time is still
  ahead of now; an instant column: the instant's local date (day 0 without its own time
  fires at the instant itself, stored as `at()` in UTC).
- Quiet hours [start, end) in local time, e.g. 21:00-08:00: a step that would fire inside
  them (or whose flexible window would reach into them) moves to `end` — the same day if
  it was before `end`, else the next day.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from tidings.errors import ValidationError
from tidings.model.campaigns import Step, check_step_name
from tidings.triggers.base import offset_seconds, resolve_zone, wall_to_ms

_TIME = re.compile(r"^([01][0-9]|2[0-3]):([0-5][0-9])(?::([0-5][0-9]))?$")

Wall = tuple[int, int, int, int, int, int]  # year, month, day, hour, minute, second
Planned = tuple[str, str, int]  # (expression, timezone, instant ms)


def parse_time(field: str, text: str) -> tuple[int, int, int]:
    m = _TIME.match(text.strip())
    if m is None:
        raise ValidationError(field, f"{text!r} is not a time of day HH:MM or HH:MM:SS")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def parse_date(field: str, text: str) -> date:
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise ValidationError(field, f"{text!r} is not a date YYYY-MM-DD") from None


def parse_step(text: str) -> Step:
    """`name:day[:HH:MM[:template]]` (e.g. `nudge:2:10:00:nudge-template`)."""
    parts = text.split(":")
    if len(parts) not in (2, 4, 5):
        raise ValidationError("Step", f"{text!r}: use name:day, name:day:HH:MM or "
                              "name:day:HH:MM:template")
    name = check_step_name(parts[0])
    try:
        day = int(parts[1])
    except ValueError:
        raise ValidationError("Step", f"{text!r}: the day offset must be a whole number")\
            from None
    if not 0 <= day <= 366:
        raise ValidationError("Step", f"{text!r}: the day offset must be 0-366")
    time = None
    if len(parts) >= 4:
        time = f"{parts[2]}:{parts[3]}"
        parse_time("Step", time)
    template = parts[4] if len(parts) == 5 and parts[4] else None
    return Step(name, day, time, template)


def parse_instant(field: str, text: str) -> int:
    """ISO 8601 with a UTC offset (or Z); naive times are ambiguous and rejected."""
    try:
        dt = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValidationError(field, f"{text!r} is not an ISO 8601 date-time") from None
    if dt.tzinfo is None:
        raise ValidationError(field, f"{text!r} has no UTC offset (add Z or +hh:mm)")
    return int(dt.timestamp() * 1000)


@dataclass(frozen=True)
class QuietHours:
    start: int  # minute of day
    end: int

    @classmethod
    def parse(cls, text: str) -> QuietHours:
        left, sep, right = text.partition("-")
        if not sep:
            raise ValidationError("QuietHours", f"{text!r}: use HH:MM-HH:MM, e.g. 21:00-08:00")
        sh, sm, _ = parse_time("QuietHours", left)
        eh, em, _ = parse_time("QuietHours", right)
        if (sh, sm) == (eh, em):
            raise ValidationError("QuietHours", "start and end must differ")
        return cls(sh * 60 + sm, eh * 60 + em)

    def allowed_minutes(self) -> int:
        return (self.start - self.end) % 1440


def _at(w: Wall) -> str:
    return f"at({w[0]:04d}-{w[1]:02d}-{w[2]:02d}T{w[3]:02d}:{w[4]:02d}:{w[5]:02d})"


def local_ms(w: Wall, zone: ZoneInfo) -> int:
    """The instant of a wall time in `zone`, by the `at()` rules (fold=0)."""
    off = offset_seconds(datetime(*w, tzinfo=zone).utcoffset())
    return wall_to_ms(*w, off)


class Planner:
    """Per-recipient firing times for a list of steps. Wall-time modes depend only on the
    zone, so plans are computed once per zone and shared by every row in it."""

    def __init__(self, steps: Sequence[Step], *, on: date | None = None,
                 time: tuple[int, int, int] | None = None, next_time: bool = False,
                 quiet: QuietHours | None = None, flex_minutes: int | None = None,
                 now_ms: int = 0) -> None:
        self.steps = list(steps)
        self.on = on
        self.time = time
        self.next_time = next_time
        self.quiet = quiet
        self.flex = flex_minutes or 0
        self.now_ms = now_ms
        self._times = [parse_time("Step", s.time) if s.time else time for s in self.steps]
        if quiet is not None and quiet.allowed_minutes() <= self.flex:
            raise ValidationError("QuietHours", "leave more allowed time than the flexible "
                                  "window, or no step could ever fire")
        self._zones: dict[str, list[Planned] | ValidationError] = {}

    def zone_plan(self, zone_name: str) -> list[Planned]:
        """Wall-time modes: every step's (expression, zone, instant) for this zone; raises
        ValidationError for an unknown zone (cached too)."""
        plan = self._zones.get(zone_name)
        if plan is None:
            try:
                plan = self._compute_zone(zone_name)
            except ValidationError as exc:
                plan = exc
            self._zones[zone_name] = plan
        if isinstance(plan, ValidationError):
            raise plan
        return plan

    def _compute_zone(self, zone_name: str) -> list[Planned]:
        zone = resolve_zone(zone_name)
        base = self.on
        if base is None:  # next: the first local date whose time is still ahead
            first = self._times[0]
            assert first is not None
            today = datetime.fromtimestamp(self.now_ms / 1000, zone).date()
            base = today
            if local_ms((today.year, today.month, today.day, *first), zone) <= self.now_ms:
                base = today + timedelta(days=1)
        out = []
        for step, hms in zip(self.steps, self._times, strict=True):
            assert hms is not None
            d = base + timedelta(days=step.day)
            out.append(self._local((d.year, d.month, d.day, *hms), zone, zone_name))
        return out

    def _local(self, w: Wall, zone: ZoneInfo, zone_name: str) -> Planned:
        w = self._quiet(w)
        return _at(w), zone_name, local_ms(w, zone)

    def _quiet(self, w: Wall) -> Wall:
        q = self.quiet
        if q is None:
            return w
        t = w[3] * 60 + w[4]
        start = (q.start - self.flex) % 1440
        blocked = (start <= t < q.end) if start < q.end else (t >= start or t < q.end)
        if not blocked:
            return w
        d = date(w[0], w[1], w[2])
        if t >= q.end:
            d += timedelta(days=1)
        return d.year, d.month, d.day, q.end // 60, q.end % 60, 0

    def instant_plan(self, instant_ms: int, zone_name: str) -> list[Planned]:
        """Instant-column mode: plans for one row."""
        zone = resolve_zone(zone_name)
        local = datetime.fromtimestamp(instant_ms // 1000, zone)
        out = []
        for step, hms in zip(self.steps, self._times, strict=True):
            if step.day == 0 and hms is None:
                w: Wall = (local.year, local.month, local.day, local.hour, local.minute,
                           local.second)
                moved = self._quiet(w)
                if moved == w:
                    u = datetime.fromtimestamp(instant_ms // 1000, UTC)
                    out.append((_at((u.year, u.month, u.day, u.hour, u.minute, u.second)),
                                "UTC", instant_ms // 1000 * 1000))
                    continue
                out.append((_at(moved), zone_name, local_ms(moved, zone)))
                continue
            d = local.date() + timedelta(days=step.day)
            clock = hms or (local.hour, local.minute, local.second)
            out.append(self._local((d.year, d.month, d.day, *clock), zone, zone_name))
        return out
