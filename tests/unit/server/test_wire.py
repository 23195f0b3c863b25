"""One socket write per response: the gathering transport under uvicorn's protocol, over a
real loopback socket."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest
import uvicorn

from tidings.server.wire import GatheringHttpToolsProtocol, GatheringTransport


class CountingTransport:
    """What the gathering transport hands to the socket, in order (an asyncio transport's
    write/close surface; nothing of tidings is stood in for)."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> str:
        return f"extra:{name}"


def test_one_turns_writes_leave_as_one() -> None:
    async def main() -> CountingTransport:
        real = CountingTransport()
        t = GatheringTransport(real, asyncio.get_running_loop())  # type: ignore[arg-type]
        t.write(b"HTTP/1.1 200 OK\r\n\r\n")
        t.write(bytearray(b"body"))
        t.write(b"")
        assert real.writes == []  # held until the turn ends
        await asyncio.sleep(0)
        assert real.writes == [b"HTTP/1.1 200 OK\r\n\r\nbody"]
        t.write(b"next")
        t.close()  # what is held goes out before the close
        assert real.writes[-1] == b"next" and real.closed
        assert t.get_extra_info("peername") == "extra:peername"
        return real

    asyncio.run(main())


def test_abort_drops_what_is_held() -> None:
    async def main() -> None:
        real = CountingTransport()
        t = GatheringTransport(real, asyncio.get_running_loop())  # type: ignore[arg-type]
        t.write(b"never")
        t.abort()
        await asyncio.sleep(0)
        assert real.writes == [] and real.closed

    asyncio.run(main())


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await receive()
    body = scope["path"].encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


@pytest.mark.parametrize("requests", [1, 3])
def test_uvicorn_answers_through_it(requests: int) -> None:
    """Keep-alive requests, pipelined: every answer whole and in order."""

    async def main() -> bytes:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        server = uvicorn.Server(uvicorn.Config(_app, http=GatheringHttpToolsProtocol,
                                               log_level="warning", lifespan="on"))
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(f"GET /r{i} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
                              for i in range(requests)))
        got = b""
        while got.count(b"HTTP/1.1 200") < requests or not got.endswith(
                f"/r{requests - 1}".encode()):
            got += await asyncio.wait_for(reader.read(65536), 5)
        writer.close()
        server.should_exit = True
        await task
        sock.close()
        return got

    got = asyncio.run(main())
    bodies = [part.rpartition(b"\r\n\r\n")[2] for part in got.split(b"HTTP/1.1 200 OK")[1:]]
    assert bodies == [f"/r{i}".encode() for i in range(requests)]
