"""In-process notifier: wakes async and thread waiters of this process at once."""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict


class LocalNotifier:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._versions: dict[str, int] = defaultdict(int)
        self._waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]] = (
            defaultdict(set)
        )

    def version(self, channel: str) -> int:
        with self._cond:
            return self._versions[channel]

    def notify(self, channel: str) -> None:
        with self._cond:
            self._versions[channel] += 1
            waiters = self._waiters.pop(channel, set())
            self._cond.notify_all()
        for loop, fut in waiters:
            if not loop.is_closed():
                loop.call_soon_threadsafe(_wake, fut)

    async def wait(self, channel: str, seen: int, timeout: float) -> bool:
        if timeout <= 0:
            return self.version(channel) != seen
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        entry = (loop, fut)
        with self._cond:
            if self._versions[channel] != seen:
                return True
            self._waiters[channel].add(entry)
        try:
            await asyncio.wait_for(fut, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            with self._cond:
                self._waiters.get(channel, set()).discard(entry)

    def wait_sync(self, channel: str, seen: int, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._versions[channel] != seen, timeout)

    def close(self) -> None:
        """Nothing to release; here so every notifier can be closed alike."""


class ListeningNotifier(LocalNotifier):
    """A local notifier that also hears other processes: it starts listening with the
    first wait (`_ensure_listening`), so a process that never waits (a CLI command, a web
    process that only sends) opens nothing for it."""

    def _ensure_listening(self, channel: str) -> None:
        raise NotImplementedError

    async def wait(self, channel: str, seen: int, timeout: float) -> bool:
        self._ensure_listening(channel)
        return await super().wait(channel, seen, timeout)

    def wait_sync(self, channel: str, seen: int, timeout: float) -> bool:
        self._ensure_listening(channel)
        return super().wait_sync(channel, seen, timeout)


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
