"""A node's copy of the limit settings and pauses, read from the database every
REFRESH_S, so a change from the CLI, the API or the console takes effect on every node
within a second, and a job whose keys have no limit costs no store call at all.

A change also reaches the jobs a limit already sent back to their queue: the names whose
setting changed or whose pause ended go to `on_change`, and the consumer makes the jobs
it held back under them visible again (else a raised limit would be seen only as the
backlog came back at the pace the old limit set)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from tidings.clock import Clock
from tidings.errors import TidingsError
from tidings.model.limits import LimitSetting
from tidings.runtime.bridge import Bridge
from tidings.store.base import LimitStore
from tidings.store.contract.limits import KeyRule

log = logging.getLogger("tidings.limits")

REFRESH_S = 0.5


@dataclass
class LimitBook:
    store: LimitStore
    clock: Clock
    settings: dict[str, LimitSetting] = field(default_factory=dict)
    pauses: dict[str, int] = field(default_factory=dict)
    #: Called on the event loop with the keys or names whose setting changed or whose
    #: pause ended or shortened since the last reading.
    on_change: Callable[[set[str]], None] | None = None

    def refresh(self) -> set[str]:
        """Read the settings and pauses again (on the store's thread); what changed."""
        settings = {s.key: s for s in self.store.limit_settings()}
        pauses = self.store.limit_pauses(self.clock.now_ms())
        changed = {key for key in settings.keys() | self.settings.keys()
                   if _terms(settings.get(key)) != _terms(self.settings.get(key))}
        changed |= {key for key, until in self.pauses.items()
                    if pauses.get(key, 0) < until}
        self.settings, self.pauses = settings, pauses
        return changed

    def rule(self, key: str, name: str) -> KeyRule | None:
        """The limit on `key` (`name`, or `name:value`): the key's own setting, else its
        name's; None when neither limits anything and neither is paused (the job runs
        without asking the store)."""
        setting = self.settings.get(key) or self.settings.get(name)
        now = self.clock.now_ms()
        paused = self.pauses.get(key, 0) > now or self.pauses.get(name, 0) > now
        if setting is None or not setting.limits_anything:
            if not paused:
                return None
            return KeyRule(key, None, None, None, name if name != key else None)
        return KeyRule(key, setting.rate, setting.burst, setting.concurrency,
                       name if name != key else None)

    def paused(self, key: str, until: int) -> None:
        """A pause this node just wrote: known here at once."""
        if until > self.pauses.get(key, 0):
            self.pauses[key] = until

    async def run(self, bridge: Bridge, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            try:
                changed = await bridge.run(self.refresh)
            except TidingsError as exc:
                log.warning("cannot read the limits (the last ones read stand): %s", exc)
            else:
                if changed and self.on_change is not None:
                    self.on_change(changed)
            try:
                await asyncio.wait_for(stopping.wait(), REFRESH_S)
            except TimeoutError:
                pass


def _terms(setting: LimitSetting | None) -> tuple[object, ...] | None:
    """What a setting limits (not who wrote it or when)."""
    if setting is None:
        return None
    return (setting.rate, setting.burst, setting.concurrency)


def covers(names: set[str], key: str) -> bool:
    """Whether a change to any of `names` (keys or names) touches `key` (`name:value`)."""
    return key in names or key.partition(":")[0] in names
