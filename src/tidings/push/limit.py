"""A subscription's downstream limit: the limit key `push:<queue>` (`tidings.limits`),
shared by every node as every limit is.

- A 429 or 503 with Retry-After pauses the key until then (`pause_limit`, extend: a later
  pause stands), here at once and on the other nodes as soon as their books read it; the
  message goes back uncounted: the endpoint asked for time, no attempt was spent. `tidings
  limit resume push:<queue>` (or resuming the subscription) lifts it; a pause of the name
  `push` holds every subscription back.
- A limit set on the key (`tidings limit set push:jobs --concurrency 5 --rate 50/s`)
  lowers the subscription's own concurrency and rate, never raises them: the concurrency
  through the shared slots (`push/slots.py`), so it holds across nodes.

The settings and pauses are the node's one `LimitBook`, the one its consumers and its
dispatcher read, woken on the `limits` channel when anything changes anywhere: no second
copy read on a timer (the pushers kept one, read every 0.5 s while they had work, before
issue 33 was finished). A change that touches a subscription's key (`on_change`) wakes its
pusher at once, so a raised limit or a lifted pause is obeyed within the wake-up's
latency, not at the pusher's next look."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import NamedTuple

from tidings.errors import TidingsError
from tidings.limits.book import LimitBook
from tidings.model.push import Subscription
from tidings.notify.base import LIMITS_CHANNEL, Notifier
from tidings.runtime.bridge import Bridge
from tidings.store.base import Store

log = logging.getLogger("tidings.push")

#: The name of every subscription's limit key.
PUSH_LIMIT = "push"


def limit_key(queue: str) -> str:
    return f"{PUSH_LIMIT}:{queue}"


class Allowed(NamedTuple):
    """What a subscription may do now: its concurrency and rate (pushes a second, None:
    no rate), each the lower of its own and its limit's, and until when it is paused (0:
    not)."""

    concurrency: int
    rate_per_s: float | None
    paused_until: int


class PushLimits:
    """What the node's limit book says of its subscriptions, and the pauses their
    endpoints ask for."""

    def __init__(self, book: LimitBook, store: Store, bridge: Bridge,
                 notifier: Notifier) -> None:
        self.book = book
        self.store = store
        self.bridge = bridge
        self.notifier = notifier

    def watch(self, wake: Callable[[str], None]) -> None:
        """Have `wake(queue)` called, on the event loop, for each subscription whose key
        (or the name `push`) a change touches: its setting, or a pause ended or cut short."""

        def changed(keys: set[str]) -> None:
            if PUSH_LIMIT in keys:
                wake("")  # the name's: every subscription
                return
            for key in keys:
                name, _, queue = key.partition(":")
                if name == PUSH_LIMIT and queue:
                    wake(queue)

        self.book.on_change.append(changed)

    def allowed(self, queue: str, sub: Subscription) -> Allowed:
        book, key = self.book, limit_key(queue)
        paused = max(book.pauses.get(key, 0), book.pauses.get(PUSH_LIMIT, 0))
        setting = book.settings.get(key)
        concurrency, rate = sub.concurrency, sub.rate_per_s
        if setting is not None:
            if setting.concurrency is not None:
                concurrency = min(concurrency, setting.concurrency)
            if setting.rate is not None:
                per_s = setting.rate.count * 1000 / setting.rate.period_ms
                rate = per_s if rate is None else min(rate, per_s)
        return Allowed(concurrency, rate, paused if paused > book.clock.now_ms() else 0)

    async def pause(self, queue: str, until: int) -> None:
        """An endpoint's Retry-After: no push of the queue before `until`, on any node."""
        key = limit_key(queue)
        self.book.paused(key, until)
        try:
            await self.bridge.run(self.store.pause_limit, key, until, extend=True)
            self.notifier.notify(LIMITS_CHANNEL)  # (the SQLite file's other processes)
        except TidingsError as exc:
            log.warning("could not pause %s on the other nodes (this one waits): %s", key,
                        exc)
