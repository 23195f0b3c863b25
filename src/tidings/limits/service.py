"""Limits as every face sees them (`t.limits`): list them with what each key is doing,
set, delete, pause and resume them, and the declarations an app makes at its start.
Every change is a row in the database, and a wake-up on `LIMITS_CHANNEL`: each node reads
it within a second (`tidings.limits.book`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tidings.clock import Clock, iso
from tidings.errors import NotFoundError, ValidationError
from tidings.model.limits import (
    LimitSetting,
    Rate,
    check_counts,
    check_key,
)
from tidings.notify.base import LIMITS_CHANNEL, Notifier
from tidings.store.base import LimitStore

#: The longest pause an operator may ask for.
MAX_PAUSE_MS = 366 * 86_400_000


class LimitNotFound(NotFoundError):
    """The limit does not exist."""

    kind = "limit"


@dataclass(frozen=True, slots=True)
class LimitView:
    """A key as `tidings limit list` shows it: its setting (None: only paused, or only in
    use), slots held now, starts within its rate's window (else the last second), and
    its pause."""

    key: str
    setting: LimitSetting | None
    in_use: int
    recent_starts: int
    paused_until: int | None

    def as_json(self) -> dict[str, Any]:
        s = self.setting
        return {"key": self.key, "rate": str(s.rate) if s and s.rate else None,
                "burst": s.burst if s else None,
                "concurrency": s.concurrency if s else None,
                "source": s.source if s else None,
                "in_use": self.in_use, "recent_starts": self.recent_starts,
                "paused_until": iso(self.paused_until) if self.paused_until else None}


class LimitService:
    def __init__(self, store: LimitStore, clock: Clock, notifier: Notifier) -> None:
        self.store = store
        self.clock = clock
        self.notifier = notifier

    def _changed(self) -> None:
        """After the commit: wake the books of this process and, on SQLite, of the file's
        other processes (on PostgreSQL the store's NOTIFY reaches every node)."""
        self.notifier.notify(LIMITS_CHANNEL)

    def list(self) -> list[LimitView]:
        now = self.clock.now_ms()
        settings = {s.key: s for s in self.store.limit_settings()}
        pauses = self.store.limit_pauses(now)
        slots, _ = self.store.limit_usage(now, now - 1000)
        keys = sorted(set(settings) | set(pauses) | set(slots))
        views = []
        for key in keys:
            setting = settings.get(key) or settings.get(key.partition(":")[0])
            window = setting.rate.period_ms if setting and setting.rate else 1000
            _, starts = self.store.limit_usage(now, now - window)
            views.append(LimitView(key, settings.get(key), slots.get(key, 0),
                                   starts.get(key, (0, 0))[0], pauses.get(key)))
        return views

    def get(self, key: str) -> LimitView:
        for view in self.list():
            if view.key == key:
                return view
        raise LimitNotFound(key)

    def set(self, key: str, *, rate: str | None = None, concurrency: int | None = None,
            burst: int | None = None) -> LimitSetting:
        """Replace the key's setting (a name's applies to every key under it; a
        `name:value` key's overrides its name's for that key)."""
        check_key(key)
        check_counts(concurrency, burst)
        parsed = Rate.parse(rate) if rate else None
        if parsed is None and concurrency is None:
            raise ValidationError("rate", "give a rate, a concurrency, or both")
        if burst is not None and parsed is None:
            raise ValidationError("burst", "a burst needs a rate")
        setting = LimitSetting(key, parsed, burst, concurrency, "set", self.clock.now_ms())
        self.store.put_limits([setting])
        self._changed()
        return setting

    def delete(self, key: str) -> None:
        if not self.store.delete_limit(check_key(key)):
            raise LimitNotFound(key)
        self._changed()

    def pause(self, key: str, until: int) -> int:
        """Hold back every job of `key` (a name: of all its keys) until the instant."""
        check_key(key)
        now = self.clock.now_ms()
        if until <= now:
            raise ValidationError("until", "must be in the future")
        if until > now + MAX_PAUSE_MS:
            raise ValidationError("until", "at most a year ahead")
        self.store.pause_limit(key, until, extend=False)
        self._changed()
        return until

    def resume(self, key: str) -> None:
        self.store.pause_limit(check_key(key), None, extend=False)
        self._changed()

    def declare(self, settings: Iterable[LimitSetting]) -> None:
        """An app's declarations, at its start: created, or updated to what the code says."""
        settings = [s for s in settings if s.limits_anything]
        if settings:
            self.store.put_limits(settings)
            self._changed()
