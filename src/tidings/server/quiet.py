"""uvicorn without its timer: an idle node's event loop sleeps until something happens.

uvicorn's server wakes ten times a second (`Server.main_loop`) to see whether it should
exit and, once a second, to write the `Date` header all responses share. On an idle node
that tick was most of the event loop's wake-ups. Here the loop waits for the exit itself
(`should_exit` wakes it when set, from a signal handler or from the node), and the `Date`
header is brought up to date by the first request of each second instead of by a timer.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from email.utils import formatdate
from typing import Any

import uvicorn

from tidings.server.wire import GatheringHttpToolsProtocol

#: How often the server looks at `should_exit` by itself, should something set it without
#: waking it: only a bound, every way of setting it wakes the loop at once.
EXIT_CHECK_S = 60.0


class QuietServer(uvicorn.Server):
    _should_exit = False
    _exit: asyncio.Event | None = None
    _loop: asyncio.AbstractEventLoop | None = None

    @property
    def should_exit(self) -> bool:
        return self._should_exit

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        self._should_exit = value
        loop, wake = self._loop, self._exit
        if value and loop is not None and wake is not None and not loop.is_closed():
            loop.call_soon_threadsafe(wake.set)  # safe from a signal handler, too

    async def main_loop(self) -> None:
        self._exit = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        if await self.on_tick(0):  # what uvicorn does at start (the Date header first)
            return
        while not self.should_exit:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._exit.wait(), EXIT_CHECK_S)


class QuietHttpToolsProtocol(GatheringHttpToolsProtocol):
    """Refreshes the shared `Date` header when a request begins in a new second (what
    uvicorn's tick did once a second, requests or not)."""

    def on_message_begin(self) -> None:
        fresh_date(self.server_state, self.config)
        super().on_message_begin()


def fresh_date(state: Any, config: Any) -> None:
    now = int(time.time())
    if getattr(state, "tidings_date_s", None) == now or not config.date_header:
        return
    state.tidings_date_s = now
    state.default_headers = ([(b"date", formatdate(now, usegmt=True).encode())]
                             + config.encoded_headers)
