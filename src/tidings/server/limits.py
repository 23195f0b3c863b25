"""Limits that protect the node from its clients: body, header and query sizes, and slow
senders. One ASGI middleware, outermost, so nothing behind it reads more than it allows.

* A body larger than its API's maximum is refused with 413 before it is read: at once when
  `Content-Length` says so, otherwise as soon as the bytes received pass the limit (the
  application then sees a disconnect and its answer is replaced by the 413).
* Headers beyond `MAX_HEADER_BYTES` (12 KiB) get 431, a query string beyond `MAX_QUERY_BYTES` 414.
* A client that stalls for `client_timeout_s` while sending its body gets 408.

The maxima are each API's own, with room for its envelope and encoding:

=====================  ==========  ====================================================
API                    max body    why
=====================  ==========  ====================================================
SQS (both protocols)   3 MiB+64K   1 MiB of messages, JSON-escaped (unicode escapes: at most 3
                                   bytes per byte of UTF-8) or percent-encoded (3 per byte)
Scheduler              64 KiB      Input is at most 8 KiB of text (escaped: 3x)
SES v2                 14 MiB      a 10 MB raw message, base64-encoded
native /v1             3 MiB+64K   1 MiB of message, JSON-escaped
campaign fan-out       none        streamed through a bounded buffer as it arrives
=====================  ==========  ====================================================
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tidings.settings import Settings

MiB = 1024 * 1024
ENVELOPE = 64 * 1024
SQS_MAX_BODY = 3 * MiB + ENVELOPE
SCHEDULER_MAX_BODY = 64 * 1024
SES_MAX_BODY = 14 * MiB
NATIVE_MAX_BODY = 3 * MiB + ENVELOPE
MAX_HEADER_BYTES = 12 * 1024  # below h11's own 16 KiB, so the answer is ours (431)
MAX_QUERY_BYTES = 8 * 1024

_SCHEDULER_PREFIXES = ("/schedules", "/schedule-groups", "/tags/")


def body_limit(method: str, path: str) -> tuple[int | None, str]:
    """(maximum body bytes or None for unbounded, the API's name) for a request."""
    if path.startswith("/v2/email"):
        return SES_MAX_BODY, "ses"
    if path.startswith(_SCHEDULER_PREFIXES):
        return SCHEDULER_MAX_BODY, "scheduler"
    if path.startswith("/v1/"):
        if method == "POST" and path.startswith("/v1/campaigns/") and path.endswith("/fanout"):
            return None, "native"
        return NATIVE_MAX_BODY, "native"
    if path.startswith(("/unsubscribe/", "/health", "/metrics", "/ui")):
        return 64 * 1024, "native"
    return SQS_MAX_BODY, "sqs"


@dataclass(frozen=True)
class Limits:
    client_timeout_s: float = 30.0
    max_header_bytes: int = MAX_HEADER_BYTES
    max_query_bytes: int = MAX_QUERY_BYTES

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        return cls(client_timeout_s=settings.client_timeout_s)

    def middleware(self, app: ASGIApp) -> ASGIApp:
        """`app.add_middleware(limits.middleware)`: Starlette calls it with the app."""
        return LimitsMiddleware(app, self)


class SlowBodies:
    """The slow-body timer of every request, as one ticking handle instead of a timer per
    read (a timer armed and cancelled per request cost more than the rest of the checks):
    a read that has waited past its deadline when the tick comes is cancelled, and the
    reader sees the timeout. Deadlines are therefore kept within a quarter of the timeout
    (at most a second) late."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.tick_s = min(1.0, timeout_s / 4)
        self.waiting: dict[asyncio.Task[Any], float] = {}
        self.expired: set[asyncio.Task[Any]] = set()
        self._handle: asyncio.TimerHandle | None = None

    def watch(self, task: asyncio.Task[Any], loop: asyncio.AbstractEventLoop) -> None:
        self.waiting[task] = loop.time() + self.timeout_s
        if self._handle is None:
            self._handle = loop.call_later(self.tick_s, self._tick, loop)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        self._handle = None
        now = loop.time()
        for task, deadline in list(self.waiting.items()):
            if deadline <= now and task not in self.expired:
                self.expired.add(task)
                task.cancel()
        if self.waiting:
            self._handle = loop.call_later(self.tick_s, self._tick, loop)


class LimitsMiddleware:
    def __init__(self, app: ASGIApp, limits: Limits) -> None:
        self.app = app
        self.limits = limits
        self.slow = SlowBodies(limits.client_timeout_s)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        method, path = str(scope["method"]), str(scope["path"])
        limit, api = body_limit(method, path)
        headers = scope.get("headers", ())
        size, declared = 0, b""
        for key, value in headers:  # one pass: the total size and Content-Length
            size += len(key) + len(value) + 4
            if key == b"content-length":
                declared = value
        if size > self.limits.max_header_bytes:
            return await _refuse(send, 431, api, "RequestHeaderFieldsTooLarge",
                                 f"The request headers are longer than "
                                 f"{self.limits.max_header_bytes} bytes.", headers)
        if len(scope.get("query_string", b"")) > self.limits.max_query_bytes:
            return await _refuse(send, 414, api, "RequestURITooLong",
                                 f"The query string is longer than "
                                 f"{self.limits.max_query_bytes} bytes.", headers)
        too_large = f"The request body is longer than {limit} bytes, the most this API takes."
        if limit is not None and declared and declared.isdigit() and int(declared) > limit:
            return await _refuse(send, 413, api, "RequestEntityTooLarge", too_large, headers)
        state = {"received": 0, "done": False, "failed": 0, "started": False}
        timeout = self.limits.client_timeout_s

        slow = self.slow

        async def bounded_receive() -> Message:
            if state["done"]:
                return await receive()  # after the body: disconnect watching, no timeout
            task = asyncio.current_task()
            assert task is not None
            slow.watch(task, asyncio.get_running_loop())
            try:
                message = await receive()
            except asyncio.CancelledError:
                if task not in slow.expired:
                    raise
                slow.expired.discard(task)
                task.uncancel()
                state["failed"] = 408
                return {"type": "http.disconnect"}
            finally:
                slow.waiting.pop(task, None)
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if limit is not None and state["received"] > limit:
                    state["failed"] = 413
                    return {"type": "http.disconnect"}
                if not message.get("more_body", False):
                    state["done"] = True
            return message

        async def guarded_send(message: Message) -> None:
            if state["failed"]:
                return  # the application's answer to a body it never got whole
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        try:
            await self.app(scope, bounded_receive, guarded_send)
        except Exception:
            if not state["failed"]:
                raise
        if state["failed"] and not state["started"]:
            if state["failed"] == 413:
                await _refuse(send, 413, api, "RequestEntityTooLarge", too_large, headers)
            else:
                await _refuse(send, 408, api, "RequestTimeout",
                              f"The request body did not arrive within {timeout:g} s.",
                              headers)


async def _refuse(send: Send, status: int, api: str, code: str, message: str,
                  headers: Any) -> None:
    """The refusal in the shape the API's clients read: SQS query protocol XML for form
    posts, AWS JSON (`x-amzn-ErrorType`, `x-amzn-query-error`) for the other AWS APIs, the
    native `{"error": …}` for /v1."""
    extra: list[tuple[bytes, bytes]] = [(b"connection", b"close")]
    content_type = dict(headers).get(b"content-type", b"")
    is_target = any(k == b"x-amz-target" for k, _ in headers)
    if api == "native":
        body = json.dumps({"error": {"code": code, "message": message}}).encode()
        ctype = b"application/json"
    elif api == "sqs" and not is_target and b"x-amz-json" not in content_type:
        body = ("<ErrorResponse><Error><Type>Sender</Type><Code>" + code + "</Code><Message>"
                + message + "</Message></Error><RequestId>00000000-0000-0000-0000-"
                "000000000000</RequestId></ErrorResponse>").encode()
        ctype = b"text/xml"
    else:
        body = json.dumps({"__type": code, "message": message, "Message": message}).encode()
        ctype = b"application/x-amz-json-1.0" if api == "sqs" else b"application/json"
        extra += [(b"x-amzn-errortype", code.encode()),
                  (b"x-amzn-query-error", f"{code};Sender".encode())]
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", ctype),
                            (b"content-length", str(len(body)).encode()), *extra]})
    await send({"type": "http.response.body", "body": body})
