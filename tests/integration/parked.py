"""A notifier that tells a test when something has started waiting on a channel.

A wake-up test must send its wake-up while the waiter is parked (sent earlier, the waiter
would find the work at once and prove nothing), without guessing how long that takes.
"""

from __future__ import annotations

import threading
from collections import defaultdict

from tidings.notify.base import Notifier


class ParkedNotifier:
    """Delegates to `inner`; `parked(channel)` is set once a waiter waits on `channel`."""

    def __init__(self, inner: Notifier) -> None:
        self.inner = inner
        self._parked: defaultdict[str, threading.Event] = defaultdict(threading.Event)
        self._lock = threading.Lock()

    def parked(self, channel: str) -> threading.Event:
        with self._lock:
            return self._parked[channel]

    def version(self, channel: str) -> int:
        return self.inner.version(channel)

    def notify(self, channel: str) -> None:
        self.inner.notify(channel)

    async def wait(self, channel: str, seen: int, timeout: float) -> bool:
        self.parked(channel).set()
        return await self.inner.wait(channel, seen, timeout)

    def wait_sync(self, channel: str, seen: int, timeout: float) -> bool:
        self.parked(channel).set()
        return self.inner.wait_sync(channel, seen, timeout)

    def close(self) -> None:
        self.inner.close()
