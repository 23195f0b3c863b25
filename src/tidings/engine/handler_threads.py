"""Threads that run synchronous handlers, handing results back to the event loop.

Why not `loop.run_in_executor`: a no-op job should cost microseconds, and the executor
pays a future, a thread wake-up and a loop wake-up per job. Here the loop hands each
thread a chunk of the jobs that are ready (one wake-up per chunk), and collects every
result that finished since it last looked in one callback. At most one job per thread
runs at a time, so `count` threads keep `count` handlers running at once.

The threads are daemons: at the shutdown deadline a job still running is given back and
abandoned (never acknowledged), and the process does not wait for it; a job of a chunk
that has not begun by then is skipped.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

_STOP = object()


class Item(Protocol):
    """What a thread runs: `fn(arg)`, unless `skip` was set before it began."""

    skip: bool
    begun: bool


Done = Callable[[Any, bool, Any], None]  # (item, ok, result or exception), on the loop
Settled = Callable[[], None]  # after a batch of results was handed over, on the loop


class HandlerThreads:
    def __init__(self, count: int, settled: Settled | None = None,
                 name: str = "tidings-job") -> None:
        self.count = count
        self.settled = settled
        self._chunks: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._done: deque[tuple[Done, Any, bool, Any]] = deque()
        self._lock = threading.Lock()
        self._scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self.name = name
        # Started by the first submit: a consumer whose handlers are all async (the delivery
        # and email consumers, with a concurrency of 128 on a mail node) never pays for them.
        self._threads: list[threading.Thread] = []

    def submit(self, items: Sequence[tuple[Callable[[Any], Any], Any, Item]], done: Done,
               ) -> None:
        """Run each `fn(arg)`; `done(item, ok, value)` is called on this loop for each."""
        self._loop = asyncio.get_running_loop()
        if not self._threads:
            self._threads = [threading.Thread(target=self._work, name=f"{self.name}-{i}",
                                              daemon=True) for i in range(self.count)]
            for thread in self._threads:
                thread.start()
        chunks = min(len(items), self.count)
        for i in range(chunks):
            self._chunks.put((items[i::chunks], done))

    def _work(self) -> None:
        while True:
            chunk = self._chunks.get()
            if chunk is _STOP:
                return
            items, done = chunk
            for fn, arg, item in items:
                if item.skip:
                    continue
                item.begun = True
                try:
                    outcome = (done, item, True, fn(arg))
                except BaseException as exc:  # noqa: BLE001 - handed to the loop
                    outcome = (done, item, False, exc)
                with self._lock:
                    self._done.append(outcome)
                    wake = not self._scheduled
                    self._scheduled = True
                loop = self._loop
                if wake and loop is not None and not loop.is_closed():
                    try:
                        loop.call_soon_threadsafe(self._settle)
                    except RuntimeError:  # the loop closed meanwhile: nobody listens
                        return

    def _settle(self) -> None:
        with self._lock:
            done, self._done = self._done, deque()
            self._scheduled = False
        for callback, item, ok, value in done:
            callback(item, ok, value)
        if self.settled is not None:
            self.settled()

    def close(self) -> None:
        """Let idle threads end; a thread still running a handler ends with the process."""
        for _ in self._threads:
            self._chunks.put(_STOP)
