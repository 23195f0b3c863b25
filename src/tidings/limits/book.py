"""A node's copy of the limit settings and pauses, so a job whose keys have no limit costs
no store call at all.

It reads them when a change anywhere wakes it (`LIMITS_CHANNEL`: the store notifies it
in the transaction that sets, deletes, pauses or resumes a limit, on every node of a
PostgreSQL database; on SQLite the writer's notifier reaches the file's other processes),
so a change from the CLI, the API or the console takes effect on every node within a
second. A wake-up lost costs latency only, so the book also reads again on its own: every
REFRESH_S while any limit or pause exists (the second the issue promises holds even for
a lost wake-up), and only every `TIDINGS_POLL_FALLBACK_S` while none does: an idle node
with no limits reads nothing in between (it read 4 statements every 0.5 s before).

A change also reaches the jobs a limit already sent back to their queue: the names whose
setting changed or whose pause ended go to `on_change`, and each consumer makes the jobs
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
from tidings.notify.base import LIMITS_CHANNEL, POLL_FALLBACK_S, Notifier
from tidings.notify.local import LocalNotifier
from tidings.runtime.bridge import Bridge
from tidings.runtime.waits import first_of
from tidings.store.base import LimitStore
from tidings.store.contract.limits import KeyRule

log = logging.getLogger("tidings.limits")

#: While limits exist: how stale the book may be when a wake-up was lost.
REFRESH_S = 0.5


@dataclass
class LimitBook:
    """One per node, shared by its consumers and its dispatcher; a service (`run`, `stop`)
    of the node."""

    store: LimitStore
    clock: Clock
    bridge: Bridge
    notifier: Notifier = field(default_factory=LocalNotifier)
    #: While no limit and no pause exists: the longest between two reads.
    fallback_s: float = POLL_FALLBACK_S
    #: While any does (tests raise it to prove the wake-ups, not the reads, did it).
    refresh_s: float = REFRESH_S
    settings: dict[str, LimitSetting] = field(default_factory=dict)
    pauses: dict[str, int] = field(default_factory=dict)
    #: The limit names any setting or pause is stored under (`export` for `export:c-42`):
    #: a job's key of another name needs no working out at all.
    names: frozenset[str] = frozenset()
    #: Told after each read (the limiters: their gauges start or stop with the limits).
    watchers: list[Callable[[], None]] = field(default_factory=list)
    #: Told, on the event loop, the keys or names whose setting changed or whose pause
    #: ended or shortened since the read before (the limiters: their held-back jobs).
    on_change: list[Callable[[set[str]], None]] = field(default_factory=list)
    reads: int = 0
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)

    def refresh(self) -> set[str]:
        """Read the settings and pauses again (on the store's thread); what changed."""
        settings = {s.key: s for s in self.store.limit_settings()}
        pauses = self.store.limit_pauses(self.clock.now_ms())
        changed = {key for key in settings.keys() | self.settings.keys()
                   if _terms(settings.get(key)) != _terms(self.settings.get(key))}
        changed |= {key for key, until in self.pauses.items() if pauses.get(key, 0) < until}
        self.settings, self.pauses = settings, pauses
        self.names = frozenset(k.partition(":")[0] for k in (*self.settings, *self.pauses))
        self.reads += 1
        return changed

    @property
    def active(self) -> bool:
        """Whether any limit or pause exists (as last read)."""
        now = self.clock.now_ms()
        return bool(self.settings) or any(until > now for until in self.pauses.values())

    def next_read_in(self) -> float:
        """Seconds to the next read if no wake-up comes first."""
        return self.refresh_s if self.active else self.fallback_s

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
            self.names |= {key.partition(":")[0]}

    async def run(self) -> None:
        notifier, bridge = self.notifier, self.bridge
        while not self._stopping.is_set():
            # Taken before the read: a change committed after it wakes the wait below.
            seen = notifier.version(LIMITS_CHANNEL)
            try:
                changed = await bridge.run(self.refresh)
            except TidingsError as exc:
                log.warning("cannot read the limits (the last ones read stand): %s", exc)
            else:
                if changed:
                    for tell in self.on_change:
                        tell(changed)
            for watcher in self.watchers:
                watcher()
            await first_of(notifier.wait(LIMITS_CHANNEL, seen, self.next_read_in()),
                           self._stopping.wait())

    def stop(self) -> None:
        self._stopping.set()


def _terms(setting: LimitSetting | None) -> tuple[object, ...] | None:
    """What a setting limits (not who wrote it or when)."""
    if setting is None:
        return None
    return (setting.rate, setting.burst, setting.concurrency)


def covers(names: set[str], key: str) -> bool:
    """Whether a change to any of `names` (keys or names) touches `key` (`name:value`)."""
    return key in names or key.partition(":")[0] in names
