"""Runs the synchronous store from async code on a small, dedicated thread pool.

Sized by the store's `max_concurrency` (1 for SQLite: one writer, and one thread keeps the
connection hot). bench/queue_throughput.py measures the cost of the hop; it is ~20-40 µs
per call, small beside a transaction.

A short call may skip the hop (`run_short`): where one connection serves every call
(SQLite) and nobody is using it, the loop's own thread runs the call at once. Handing each
small group commit to another thread cost more than its SQLite write: the two threads
trade the GIL at every statement, and on a busy machine waking the store thread lets the
kernel preempt the loop (bench/aws_api.py, receive + delete pairs: ~40 % more pairs/s and
~20 % less CPU per pair on the loop's thread). The price: while another process holds
the database's write lock (a CLI command's transaction), such a call waits for it on the
loop's thread (busy_timeout) rather than on the store's.

A long call (`run_long`: a fan-out reading its request body for minutes) goes to threads
of its own, `LONG_WORKERS` of them made on first use: on the store's pool it would hold
SQLite's one thread, and every short call of the API would queue behind it. It still
reaches the store through the store's own lock, one transaction at a time, so short calls
interleave with its chunks. The bridge is the one way from async code to the sync store
(`asyncio.to_thread` would be a second, unsized one: tests/unit/test_source_rules.py).
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, ParamSpec, TypeVar

if TYPE_CHECKING:
    from tidings.store.base import StoreRuntime
    from tidings.store.driver import ConnectionLock

#: Threads for long calls (`run_long`): concurrent fan-outs beyond it wait their turn.
LONG_WORKERS = 4
P = ParamSpec("P")
T = TypeVar("T")


class Bridge:
    def __init__(self, max_workers: int, *, inline_lock: ConnectionLock | None = None) -> None:
        self._pool = ThreadPoolExecutor(max_workers, thread_name_prefix="tidings-store")
        self._inline_lock = inline_lock
        self._long: ThreadPoolExecutor | None = None
        self._long_lock = threading.Lock()

    @classmethod
    def for_store(cls, store: StoreRuntime) -> Bridge:
        """A bridge sized by the store's `max_concurrency`, running short calls inline
        where the store allows it."""
        return cls(max(store.max_concurrency, 1), inline_lock=store.inline_lock)

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    async def run_short(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`run` for a call that takes well under a millisecond of store time (a group
        commit of a few requests): on the loop's thread when the store's one connection
        is free now, else through the pool like any call. Never waits on the loop's
        thread: a long transaction of another thread (a sweep) does not stall the loop."""
        lock = self._inline_lock
        if lock is not None and lock.acquire(blocking=False):
            try:
                return fn(*args, **kwargs)
            finally:
                lock.release()
        return await self.run(fn, *args, **kwargs)

    async def run_long(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`run` for a call that may take seconds to minutes (a fan-out): on the bridge's
        long-call threads, so the store's pool stays free for short calls."""
        with self._long_lock:
            if self._long is None:
                self._long = ThreadPoolExecutor(LONG_WORKERS, thread_name_prefix="tidings-long")
            pool = self._long
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(pool, functools.partial(fn, *args, **kwargs))

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        with self._long_lock:
            long, self._long = self._long, None
        if long is not None:
            long.shutdown(wait=True)


class InlineExecutor(Executor):
    """Runs each task at once, on the caller's thread: what a bulk writer uses for SQLite.

    Pipelining a bulk write on a second thread pays off when the database works in another
    process (PostgreSQL); with SQLite the writer needs the GIL to bind every row, and the
    two threads mostly trade it back and forth (measured: ~62k vs ~55k schedules/s)."""

    def submit(self, fn: Callable[P, T], /, *args: P.args,
               **kwargs: P.kwargs) -> Future[T]:
        future: Future[T] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - delivered through the future
            future.set_exception(exc)
        return future


def bulk_writer(concurrency: int) -> Executor:
    """One background writer when the store takes concurrent connections, else inline."""
    if concurrency > 1:
        return ThreadPoolExecutor(1, thread_name_prefix="tidings-bulk")
    return InlineExecutor()
