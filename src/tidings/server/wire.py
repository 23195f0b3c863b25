"""One socket write per response: uvicorn's HTTP protocol over a transport that gathers the
writes made in one turn of the event loop.

uvicorn writes a response's head when the application sends `http.response.start` and its
body at `http.response.body`: two `send()` system calls per response, each waking the
client, which was a sixth of the server's CPU for an SQS SendMessage over loopback. Both
writes happen in the same turn of the loop (nothing awaits in between), so the transport
below keeps what is written and hands it to the socket at the end of that turn, as one
write. Nothing is held longer than the turn; closing the transport writes what it holds
first.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class GatheringTransport:
    """The writes of one loop turn, joined into one. Everything but writing and closing
    goes to the real transport (flow control stays the real transport's: the protocol's
    pause_writing/resume_writing come from it)."""

    __slots__ = ("_transport", "_loop", "_held")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        chunk = data if isinstance(data, bytes) else bytes(data)  # the caller may reuse it
        if self._held is None:
            self._held = [chunk]
            self._loop.call_soon(self.flush)
        else:
            self._held.append(chunk)

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def flush(self) -> None:
        held, self._held = self._held, None
        if held and not self._transport.is_closing():
            self._transport.write(held[0] if len(held) == 1 else b"".join(held))

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class GatheringHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol writing through a `GatheringTransport`
    (`uvicorn.Config(http=GatheringHttpToolsProtocol)`)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        gathering: Any = GatheringTransport(transport, self.loop)
        super().connection_made(gathering)
