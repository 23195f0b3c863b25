"""server/quiet.py: the Date header follows the requests, not a timer; setting
`should_exit` wakes the server's loop at once."""

from __future__ import annotations

import asyncio
import time
from email.utils import parsedate_to_datetime
from types import SimpleNamespace

import uvicorn

from tidings.server.quiet import QuietServer, fresh_date


def test_the_date_header_is_refreshed_by_the_first_request_of_a_second() -> None:
    config = SimpleNamespace(date_header=True, encoded_headers=[(b"server", b"t")])
    state = SimpleNamespace(default_headers=[])
    fresh_date(state, config)
    (name, value), extra = state.default_headers
    assert name == b"date" and extra == (b"server", b"t")
    assert abs(parsedate_to_datetime(value.decode()).timestamp() - time.time()) < 2
    state.tidings_date_s -= 5  # as if the last request came five seconds ago
    state.default_headers = []
    fresh_date(state, config)
    assert state.default_headers[0][0] == b"date"
    kept = state.default_headers
    fresh_date(state, config)  # the same second: nothing rebuilt
    assert state.default_headers is kept


def test_no_date_header_when_uvicorn_is_told_not_to_send_one() -> None:
    config = SimpleNamespace(date_header=False, encoded_headers=[])
    state = SimpleNamespace(default_headers=[])
    fresh_date(state, config)
    assert state.default_headers == []


def test_setting_should_exit_ends_the_main_loop_at_once() -> None:
    async def app(scope: object, receive: object, send: object) -> None:
        raise AssertionError("no request is made")

    server = QuietServer(uvicorn.Config(app, lifespan="off"))
    server.config.load()

    async def main() -> float:
        loop = asyncio.get_running_loop()
        began = loop.time()
        waiting = asyncio.create_task(server.main_loop())
        await asyncio.sleep(0)  # (it waits now: its fallback is a minute)
        loop.call_later(0.05, setattr, server, "should_exit", True)
        await asyncio.wait_for(waiting, 30)
        return loop.time() - began

    assert asyncio.run(main()) < 10  # woken, not found by its 60 s check
