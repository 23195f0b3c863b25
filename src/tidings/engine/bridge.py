"""Runs the synchronous store from async code on a small, dedicated thread pool.

Sized by the store's `max_concurrency` (1 for SQLite: one writer, and one thread keeps the
connection hot). bench/queue_throughput.py measures the cost of the hop; it is ~20-40 µs
per call, small beside a transaction.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class Bridge:
    def __init__(self, max_workers: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers, thread_name_prefix="tidings-store")

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def close(self) -> None:
        self._pool.shutdown(wait=True)


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
