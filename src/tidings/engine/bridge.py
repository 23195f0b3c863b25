"""Runs the synchronous store from async code on a small, dedicated thread pool.

Sized by the store's `max_concurrency` (1 for SQLite: one writer, and one thread keeps the
connection hot). bench/queue_throughput.py measures the cost of the hop; it is ~20-40 µs
per call, small beside a transaction.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
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
