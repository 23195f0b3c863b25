"""Threads that run synchronous handlers, handing results back to the event loop.

Why not `loop.run_in_executor`: a no-op job should cost microseconds, and the executor
pays a future, a thread wake-up and a loop wake-up per job. Here the loop appends ready
jobs to one shared deque that the threads pull from; a thread sleeps only when the deque
is empty, so a steady stream of jobs costs no wake-up per job. A thread that takes a job
and sees more waiting wakes one sleeping thread, so a slow handler never holds the jobs
behind it while other threads idle. Results that finished since the loop last looked are
collected in one callback. At most one job per thread runs at a time, so `count` threads
keep at most `count` handlers running at once.

The threads are daemons: at the shutdown deadline a job still running is given back and
abandoned (never acknowledged), and the process does not wait for it. Jobs not yet taken
by a thread are taken back (`take_back`); one a thread took runs. Once taken back, a
job cannot be taken by a thread: each job leaves the shared deque exactly once.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

Item = TypeVar("Item")  # what `done` is told of with the outcome of `fn(arg)`
#: (item, ok, the result or the exception)
Outcome = tuple[Item, bool, Any]


class HandlerThreads(Generic[Item]):
    """`done(outcomes)` is called on the loop with the outcomes that arrived since it was
    last called."""

    def __init__(self, count: int, done: Callable[[deque[Outcome[Item]]], None],
                 name: str = "tidings-job") -> None:
        self.count = count
        self.done = done
        self._pending: deque[tuple[Callable[[Any], Any], Any, Item]] = deque()
        self._results: deque[Outcome[Item]] = deque()
        self._wake = threading.Condition(threading.Lock())
        self._sleeping = 0  # threads waiting on _wake
        self._closed = False
        self._lock = threading.Lock()
        self._scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self.name = name
        # Started by the first submit: a consumer whose handlers are all async (the delivery
        # and email consumers, with a concurrency of 128 on a mail node) never pays for them.
        self._threads: list[threading.Thread] = []

    def submit(self, items: Iterable[tuple[Callable[[Any], Any], Any, Item]]) -> None:
        """Run each `fn(arg)`; its outcome goes to `done`, on this loop."""
        if not self._threads:
            self._loop = asyncio.get_running_loop()
            self._threads = [threading.Thread(target=self._work, name=f"{self.name}-{i}",
                                              daemon=True) for i in range(self.count)]
            for thread in self._threads:
                thread.start()
        self._pending.extend(items)
        if self._sleeping:
            with self._wake:
                self._wake.notify()

    def waiting(self) -> int:
        """Jobs handed over that no thread has taken yet."""
        return len(self._pending)

    def take_back(self) -> list[Item]:
        """Shutdown: the items no thread has taken yet, never to run here."""
        taken = []
        while True:
            try:
                taken.append(self._pending.popleft()[2])
            except IndexError:
                return taken

    def _take(self) -> tuple[Callable[[Any], Any], Any, Item] | None:
        pending = self._pending
        while True:
            try:
                job = pending.popleft()
            except IndexError:
                # Checked again under the condition's lock: `submit` extends, then
                # notifies under it, so a job added meanwhile is seen or wakes us.
                with self._wake:
                    while not pending:
                        if self._closed:
                            return None
                        self._sleeping += 1
                        self._wake.wait()
                        self._sleeping -= 1
                continue
            if pending and self._sleeping:
                with self._wake:
                    self._wake.notify()
            return job

    def _work(self) -> None:
        while (job := self._take()) is not None:
            fn, arg, item = job
            try:
                outcome = (item, True, fn(arg))
            except BaseException as exc:  # noqa: BLE001 - handed to the loop
                outcome = (item, False, exc)
            with self._lock:
                self._results.append(outcome)
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
            results, self._results = self._results, deque()
            self._scheduled = False
        self.done(results)

    def close(self) -> None:
        """Let idle threads end; a thread still running a handler ends with the process."""
        with self._wake:
            self._closed = True
            self._wake.notify_all()
