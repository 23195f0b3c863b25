"""Waiting for the first of several things (a wake-up, a stop, a due instant), so an idle
loop sleeps until something happens instead of waking on a timer to look."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any


async def first_of(*waits: Awaitable[Any]) -> None:
    """Return once any of `waits` is done; the others are cancelled."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
