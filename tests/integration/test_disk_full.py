"""Disk full: `tidings serve` with its SQLite database on a real 16 MB filesystem (tmpfs).

A ballast file takes every free byte; writes then fail with a clear, retryable error (HTTP
503 ServiceUnavailable on the native API, AWS `ServiceUnavailable` on SQS and Scheduler),
nothing accepted before or during is lost, and once the ballast goes the same process
accepts writes again and its engine loops (the dispatcher) fire schedules: no restart.
Finally the process is killed (-9) and restarted on the same file, which must hold every
accepted message.

Mounting a tmpfs needs root (CAP_SYS_ADMIN): the project's CI and developer machines run
as root; elsewhere the test skips, saying why.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

SIZE = "16m"
N_DUE_WHILE_FULL = 100


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tidings-test",
                           str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, db: str, log: Path) -> None:
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        env = {**os.environ, "TIDINGS_LOG_LEVEL": "WARNING"}
        self.log = log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tidings", "serve", "--db", db, "--port", str(port)],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "tidings serve exited"
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        raise AssertionError("tidings serve did not start")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.log.close()


def _fill(path: Path) -> None:
    """Write until the filesystem has no byte left (ENOSPC)."""
    chunk = b"\0" * 65536
    with path.open("wb", buffering=0) as f:
        while True:
            try:
                f.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                chunk = chunk[: len(chunk) // 2]
                if not chunk:
                    return


def _aws(url: str, service: str) -> Any:
    return boto3.client(service, endpoint_url=url, region_name="us-east-1",
                        aws_access_key_id="AKIDTEST", aws_secret_access_key="secret",
                        config=Config(retries={"max_attempts": 1}))


def _first_refusal(write: Callable[[int], object]) -> ClientError:
    """Write through one AWS face until it refuses; a bounded number of tries."""
    for i in range(2_000):
        try:
            write(i)
        except ClientError as exc:
            return exc
    raise AssertionError("the full disk never refused a write through this face")


def test_disk_full_is_503_loses_nothing_and_recovers_by_itself(
        small_fs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SQS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    db = f"sqlite:///{small_fs}/tidings.db"
    server = Server(db, tmp_path / "serve.log")
    http = httpx.Client(base_url=server.url, timeout=30)
    try:
        assert http.post("/v1/queues", json={"name": "jobs"}).status_code == 201
        sqs, scheduler = _aws(server.url, "sqs"), _aws(server.url, "scheduler")
        queue_url = sqs.get_queue_url(QueueName="jobs")["QueueUrl"]
        accepted: set[str] = set()
        pad = "x" * 20_000

        def send(i: int) -> httpx.Response:
            body = f"{i}-{pad}"
            r = http.post("/v1/queues/jobs/messages", json={"body": body})
            if r.status_code == 201:
                accepted.add(body)
            return r

        for i in range(50):
            assert send(i).status_code == 201
        deadline = time.monotonic() + 30  # its dispatcher process may still be starting
        while (ready := http.get("/health/ready")).status_code != 200:
            assert time.monotonic() < deadline, f"never ready: {ready.text}"
            time.sleep(0.1)
        # Schedules accepted before the disk fills, due while it is full: their firings
        # cannot be written, and the readiness probe says so, naming the dispatcher.
        assert http.post("/v1/queues", json={"name": "due-while-full"}).status_code == 201
        due_full = f"at({datetime.fromtimestamp(time.time() + 5, UTC):%Y-%m-%dT%H:%M:%S})"
        for i in range(N_DUE_WHILE_FULL):
            r = http.post("/v1/schedules", json={
                "name": f"full-{i}", "expression": due_full,
                "target": {"kind": "queue", "destination": "due-while-full",
                           "input": f"{i}-" + "y" * 8000}})
            assert r.status_code == 201, r.text
        _fill(small_fs / "ballast")
        # SQLite may still have room in pages it already holds: keep writing until the
        # disk says no (bounded: 16 MB cannot hold 2,000 messages of 20 KB).
        refused = None
        for i in range(50, 2_000):
            r = send(i)
            if r.status_code != 201:
                refused = r
                break
        assert refused is not None, "the disk never filled up"
        assert refused.status_code == 503, refused.text
        error = refused.json()["error"]
        assert error["code"] == "ServiceUnavailable"
        assert "SQLITE_FULL" in error["message"] or "SQLITE_IOERR" in error["message"]
        # Every face says the same, in its own shape; reads still work. A small write may
        # still fit in room SQLite already holds (a WAL reset after a checkpoint rewrites
        # frames without growing the file): each face writes until the disk says no.

        def send_sqs(i: int) -> None:
            sqs.send_message(QueueUrl=queue_url, MessageBody=f"sqs-{i}")
            accepted.add(f"sqs-{i}")

        for face in (send_sqs,
                     lambda i: scheduler.create_schedule_group(Name=f"refused-{i}")):
            error = _first_refusal(face)
            assert error.response["Error"]["Code"] == "ServiceUnavailable"
            assert error.response["ResponseMetadata"]["HTTPStatusCode"] == 503
        assert http.get("/v1/queues/jobs").status_code == 200
        # the engine loops meet the full disk too, and must live through it
        deadline = time.monotonic() + 15
        while (ready := http.get("/health/ready")).status_code != 503:
            assert time.monotonic() < deadline, f"never unready on a full disk: {ready.text}"
            time.sleep(0.1)
        dispatcher = ready.json()["checks"]["dispatcher"]
        assert not dispatcher["ok"] and "SQLITE_FULL" in dispatcher["reason"], dispatcher
        assert ready.json()["checks"]["database"]["ok"]  # reads still work
        assert server.proc.poll() is None

        (small_fs / "ballast").unlink()
        # Space is back: the same process takes writes again, with no restart.
        deadline = time.monotonic() + 10
        while send(100_000).status_code != 201:
            assert time.monotonic() < deadline, "writes did not come back"
            time.sleep(0.2)
        for i in range(100_001, 100_020):
            assert send(i).status_code == 201
        sqs.send_message(QueueUrl=queue_url, MessageBody="after")
        accepted.add("after")
        # ...and the dispatcher still fires schedules into queues.
        http.post("/v1/queues", json={"name": "fired"})
        due = f"at({datetime.now(UTC):%Y-%m-%dT%H:%M:%S})"
        r = http.post("/v1/schedules", json={"name": "after-full", "expression": due,
                                              "target": {"kind": "queue",
                                                         "destination": "fired"}})
        assert r.status_code == 201, r.text
        deadline = time.monotonic() + 15
        while not http.get("/v1/queues/fired/messages",
                           params={"wait": 1}).json()["messages"]:
            assert time.monotonic() < deadline, "the schedule did not fire after recovery"
        # The schedules due while the disk was full fired once each, late, and the node
        # is ready again without a restart.
        fired: list[str] = []
        while page := http.get("/v1/queues/due-while-full/messages", params={
                "max": 10, "visibility_timeout": 600, "wait": 1}).json()["messages"]:
            fired += [m["body"].split("-")[0] for m in page]
        assert sorted(fired, key=int) == [str(i) for i in range(N_DUE_WHILE_FULL)]
        deadline = time.monotonic() + 15
        while (ready := http.get("/health/ready")).status_code != 200:
            assert time.monotonic() < deadline, f"not ready after recovery: {ready.text}"
            time.sleep(0.1)
    finally:
        http.close()
        server.kill()
    # kill -9, restart on the same file: every accepted message is there, nothing else.
    server = Server(db, tmp_path / "serve.log")
    try:
        got: set[str] = set()
        with httpx.Client(base_url=server.url, timeout=30) as http:
            while True:
                page = http.get("/v1/queues/jobs/messages",
                                params={"max": 10, "visibility_timeout": 600}).json()
                if not page["messages"]:
                    break
                got.update(m["body"] for m in page["messages"])
        assert got == accepted
    finally:
        server.kill()
