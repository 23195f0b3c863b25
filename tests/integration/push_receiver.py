"""HTTP endpoints that push subscriptions POST to, over loopback, and a way to run a
node's pushers in a background thread (`running_pushers`)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tidings.client import Tidings
from tidings.push.pusher import Retries
from tidings.push.pushers import Pushers
from tidings.runtime.bridge import Bridge


@dataclass
class Pushed:
    body: bytes
    headers: dict[str, str]
    at: float


#: (status, headers, body) the receiver answers; may sleep first.
Answer = tuple[int, dict[str, str], bytes]
Behaviour = Callable[[Pushed, int], Awaitable[Answer]]


async def always_ok(_pushed: Pushed, _n: int) -> Answer:
    return 200, {}, b"ok"


@dataclass
class Receiver:
    """A raw ASGI app recording every request; `behaviour(pushed, n)` (n: the request's
    number, from 1) says what to answer."""

    behaviour: Behaviour = always_ok
    requests: list[Pushed] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        pushed = Pushed(body, {k.decode(): v.decode() for k, v in scope["headers"]},
                        time.monotonic())
        with self.lock:
            self.requests.append(pushed)
            n = len(self.requests)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            status, headers, answer = await self.behaviour(pushed, n)
        finally:
            with self.lock:
                self.in_flight -= 1
        await send({"type": "http.response.start", "status": status,
                    "headers": [(k.encode(), v.encode()) for k, v in headers.items()]})
        await send({"type": "http.response.body", "body": answer})

    def ids(self) -> list[str]:
        with self.lock:
            return [r.headers["webhook-id"] for r in self.requests]


@contextmanager
def running_pushers(t: Tidings, *, retry_base_s: float = 0.05,
                    refresh_s: float = 60.0, grace_s: float = 2.0,
                    limits_refresh_s: float | None = None) -> Iterator[Pushers]:
    """The node's push service over `t`, on its own event loop in a thread. Its fallback
    read of the subscriptions is a minute away: what the tests see of a subscription made,
    changed or deleted while it runs comes from the store's wake-up. `limits_refresh_s`:
    how often its limit book reads while limits exist (a node's: every 0.5 s), for a test
    that must see a change arrive by the wake-up alone."""
    bridge = Bridge.for_store(t.store)
    loop = asyncio.new_event_loop()
    made: list[Pushers] = []
    ready = threading.Event()

    def main() -> None:
        asyncio.set_event_loop(loop)

        async def go() -> None:
            pushers = Pushers(t.push, bridge, retries=Retries(retry_base_s, 1.0),
                              refresh_s=refresh_s, grace_s=grace_s)
            if limits_refresh_s is not None:
                pushers.book.refresh_s = pushers.book.fallback_s = limits_refresh_s
            made.append(pushers)
            ready.set()
            await pushers.run()

        loop.run_until_complete(go())

    thread = threading.Thread(target=main, daemon=True, name="pushers")
    thread.start()
    ready.wait(10)
    try:
        yield made[0]
    finally:
        loop.call_soon_threadsafe(made[0].stop)
        thread.join(30)
        loop.close()
        bridge.close()


def wait_until(check: Callable[[], bool], timeout_s: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        time.sleep(0.01)


def empty(t: Tidings, queue: str) -> bool:
    """Nothing left in `queue`: neither visible, nor in flight, nor delayed."""
    counts = t.queues.describe(queue).counts
    return counts.visible + counts.in_flight + counts.delayed == 0
