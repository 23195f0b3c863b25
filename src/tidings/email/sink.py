"""`tidings smtp-sink`: a local SMTP server that keeps every message it is given.

For development and tests: point `TIDINGS_SMTP_URL=smtp://127.0.0.1:1025` at it and read
what would have been sent. It listens on loopback only (it accepts mail for anyone, which
must never be reachable from a network). Each message is stored as `<id>.eml` (exactly
the bytes received) in the directory, and one JSON line per message is appended to
`index.jsonl` there (id, file, envelope, Subject, Message-ID, size, received_at), which
`tidings smtp-sink list` prints.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
import uuid
from email.parser import BytesHeaderParser
from email.policy import default as default_policy
from pathlib import Path
from typing import Any

from aiosmtpd.smtp import SMTP, Envelope, Session

INDEX = "index.jsonl"
DEFAULT_DIR = "smtp-sink"


class SinkHandler:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.count = 0

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        data = envelope.original_content or envelope.content or b""
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogateescape")
        ident = f"{time.time_ns() // 1_000_000}-{uuid.uuid4().hex[:12]}"
        headers = BytesHeaderParser(policy=default_policy).parsebytes(data)
        name = f"{ident}.eml"
        entry: dict[str, Any] = {"id": ident, "file": name, "mail_from": envelope.mail_from,
                 "rcpt_tos": list(envelope.rcpt_tos), "subject": str(headers["Subject"] or ""),
                 "message_id": str(headers["Message-ID"] or ""), "size": len(data),
                 "received_at": time.time_ns() // 1_000_000}
        tmp = self.directory / f".{ident}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, self.directory / name)  # never a half-written .eml
        with self._lock, open(self.directory / INDEX, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry, ensure_ascii=False) + "\n")
            self.count += 1
        return f"250 OK stored as {ident}"


def list_messages(directory: Path) -> list[dict[str, Any]]:
    index = directory / INDEX
    if not index.exists():
        return []
    with open(index, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


async def serve_sink(directory: Path, port: int, host: str = "127.0.0.1",
                     ready: asyncio.Event | None = None,
                     stop: asyncio.Event | None = None) -> None:
    handler = SinkHandler(directory)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: SMTP(handler, hostname="tidings-sink"),
                                      host=host, port=port)
    stop = stop or asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # not the main thread
            pass
    bound = server.sockets[0].getsockname()[1]
    print(f"smtp-sink listening on smtp://{host}:{bound}, storing into {directory}",
          flush=True)
    if ready is not None:
        ready.set()
    try:
        await stop.wait()
    finally:
        server.close()
        await server.wait_closed()


def run_sink(directory: Path, port: int) -> None:
    asyncio.run(serve_sink(directory, port))
