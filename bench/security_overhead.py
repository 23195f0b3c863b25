"""CPU cost per request of the protections every request passes (issue #13): the limits
middleware (body/header/query bounds, slow-body timer) and a bearer-token check, measured
in-process on a trivial ASGI app, so the figure is the protections' own and not the
network's or the machine's load.

    python bench/security_overhead.py [--requests 200000]

Final line: {"bare_us", "limits_us", "limits_overhead_us", "token_check_us"}, microseconds
per request (best of 5 rounds).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import MutableMapping
from typing import Any

from _common import report  # noqa: E402

from tidings.server.access import Access, Scope, parse_tokens
from tidings.server.limits import Limits, LimitsMiddleware

BODY = b'{"QueueUrl": "http://127.0.0.1:9324/000000000000/jobs", "MessageBody": "hello"}'
HEADERS = [(b"host", b"127.0.0.1:9324"), (b"content-type", b"application/x-amz-json-1.0"),
           (b"x-amz-target", b"AmazonSQS.SendMessage"),
           (b"content-length", str(len(BODY)).encode())]


async def app(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
    message = await receive()
    assert message["body"] == BODY
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


async def per_request_us(asgi: Any, n: int) -> float:
    scope = {"type": "http", "method": "POST", "path": "/", "headers": HEADERS,
             "query_string": b""}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": BODY, "more_body": False}

    async def send(_message: Any) -> None:
        return None

    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for i in range(n):
            await asgi(dict(scope), receive, send)
            if i % 64 == 0:
                await asyncio.sleep(0)  # the loop turns, as a server's does between requests
        best = min(best, (time.perf_counter() - started) / n * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=200_000)
    args = parser.parse_args()
    bare = asyncio.run(per_request_us(app, args.requests))
    limited = asyncio.run(per_request_us(LimitsMiddleware(app, Limits()), args.requests))
    access = Access(parse_tokens(",".join(f"operate:token-number-{i:04d}-abcdef"
                                           for i in range(10))), required=True)
    header = "Bearer token-number-0009-abcdef"
    rounds = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(args.requests):
            access.authorise(header, Scope.READ)
        rounds.append((time.perf_counter() - started) / args.requests * 1e6)
    report({"bare_us": round(bare, 2), "limits_us": round(limited, 2),
            "limits_overhead_us": round(limited - bare, 2),
            "token_check_us": round(min(rounds), 2), "tokens_configured": 10})


if __name__ == "__main__":
    main()
