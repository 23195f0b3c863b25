"""Helpers of the fault-injection tests: real `tidings serve` processes that a test kills,
a webhook receiver that records what arrived, and reads straight from the tables.

Everything is real: subprocesses, loopback HTTP, the database files and servers. A test
kills with SIGKILL, never a clean stop, unless it says so.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx
from serving import running_server
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from tidings.client import Tidings
from tidings.settings import Settings


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Serve:
    """One `tidings serve` process, its output in a log file beside the test's files."""

    def __init__(self, url: str, cwd: Path, *extra: str, env: dict[str, str] | None = None,
                 log_name: str = "serve.log") -> None:
        self.port = free_port()
        args = [sys.executable, "-m", "tidings", "serve", "--db", url,
                "--port", str(self.port), *extra]
        full_env = {**os.environ,
                    "PYTHONPATH": f"{cwd}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
                    **(env or {})}
        # Bytecode caches make the many restarts of a crash loop start in a fraction of
        # the time: a process that may write them leaves them for the next one.
        full_env.pop("PYTHONDONTWRITEBYTECODE", None)
        with open(cwd / log_name, "ab") as log:
            self.proc = subprocess.Popen(args, cwd=cwd, env=full_env, stdout=log, stderr=log)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def healthy(self) -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not self.healthy():
            assert self.alive(), "tidings serve exited at start"
            assert time.monotonic() < deadline, "tidings serve never became healthy"
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: no handler runs, nothing is flushed, as in a power cut of the process."""
        if self.alive():
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self, timeout: float = 60) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()


def backlog(url: str, names: Sequence[str]) -> int:
    """Messages the queues hold: visible, in flight or delayed."""
    with Tidings(settings=Settings(db=url)) as t:
        total = 0
        for name in names:
            c = t.queues.describe(name).counts
            total += c.visible + c.in_flight + c.delayed
        return total


def schedules_left(url: str) -> int:
    with Tidings(settings=Settings(db=url)) as t:
        return t.store.count_schedules()


def queue_bodies(url: str, name: str) -> list[str]:
    """Receive every message of `name` (and keep them leased for an hour)."""
    bodies: list[str] = []
    with Tidings(settings=Settings(db=url)) as t:
        while msgs := t.queues.receive(name, 10, wait_s=0, visibility_s=3600):
            bodies.extend(m.body for m in msgs)
    return bodies


def done_keys(url: str) -> set[str]:
    """Job identities whose done record committed, read straight from the table."""
    sql = "SELECT job_key FROM job_keys WHERE state = 'done'"
    if url.startswith("sqlite"):
        import sqlite3

        from tidings.store import sqlite_path

        conn = sqlite3.connect(sqlite_path(url), timeout=30)
        try:
            return {r[0] for r in conn.execute(sql)}
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(url) as pg:
        return {r[0] for r in pg.execute(sql)}


class WebhookReceiver:
    """A webhook endpoint on loopback that answers 200 and records (body, execution id)."""

    def __init__(self) -> None:
        self.got: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    async def handle(self, request: Request) -> PlainTextResponse:
        try:
            body = (await request.body()).decode()
        except ClientDisconnect:  # the sender was killed mid-request: nothing arrived
            return PlainTextResponse("gone", status_code=499)
        with self.lock:
            self.got.append((body, request.headers.get("x-tidings-execution-id", "")))
        return PlainTextResponse("ok")

    @contextmanager
    def running(self) -> Iterator[str]:
        """Yields the URL to give a webhook target."""
        app = Starlette(routes=[Route("/hook", self.handle, methods=["POST"])])
        with running_server(app) as base:
            yield f"{base}/hook"
