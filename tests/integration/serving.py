"""Run an ASGI app on a real uvicorn server, on a free loopback port, in a thread.

Real sockets, real HTTP: what the integration tests exercise is what clients get.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


@contextmanager
def running_server(app: Any, *, startup_timeout_s: float = 10.0,
                   host: str = "127.0.0.1") -> Iterator[str]:
    """Serve `app` until the block ends; yields its base URL (http://127.0.0.1:PORT, or
    another loopback `host`)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))  # the kernel picks a free port; no race with other tests
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", ws="none",
                            http="h11", timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True,
                              name=f"uvicorn-{port}")
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


def serve(db_url: str, **settings: Any) -> Iterator[str]:
    """A node's HTTP app over `db_url` with these settings, for a fixture to `yield from`."""
    from tidings.client import Tidings
    from tidings.server.app import create_app
    from tidings.settings import Settings

    t = Tidings(settings=Settings(db=db_url, **settings))
    try:
        with running_server(create_app(t)) as url:
            yield url
    finally:
        t.close()


def run_until(node: Any, until: Callable[[], bool], *, timeout: float = 30.0,
              poll_s: float = 0.05) -> None:
    """Run a `tidings.node.Node` until `until()` holds, the node stops by itself or
    `timeout` passes; then stop it and close its bridge."""
    async def scenario(running: asyncio.Task[None]) -> None:
        deadline = time.monotonic() + timeout
        while not until() and not running.done() and time.monotonic() < deadline:
            await asyncio.sleep(poll_s)

    run_with(node, scenario)


def run_with(node: Any, scenario: Callable[[asyncio.Task[None]], Awaitable[None]]) -> None:
    """Run a `tidings.node.Node` while the coroutine `scenario(running)` acts on it
    (`running`: the node's task); then stop the node and close its bridge, after a failing
    scenario too."""
    async def main() -> None:
        task = asyncio.create_task(node.run())
        try:
            await scenario(task)
        finally:
            node.stop()
            await task

    try:
        asyncio.run(main())
    finally:
        node.bridge.close()
