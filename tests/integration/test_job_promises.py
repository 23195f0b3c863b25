"""The promises of docs/jobs.md ("What holds"), through real `tidings` processes on both
backends: a job id runs to success once however many copies arrive on however many
nodes; a poison message lands in the DLQ at once with a reason boto3 can read; SIGTERM
never both gives a job back and finishes it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path

import boto3
import httpx
import pytest

from tidings.client import Tidings
from tidings.model.messages import OutgoingMessage
from tidings.settings import Settings

pytestmark = pytest.mark.slow

APP = textwrap.dedent("""
    import os, time
    from tidings import App
    app = App(queue="work", concurrency=4)
    app.declare_queue("work", visibility_timeout_s=30, max_receive_count=3)
    LOG = os.environ["JOB_LOG"]

    def record(line):
        with open(LOG, "a") as f:
            f.write(line + "\\n")

    @app.handler("task")
    def task(job):
        time.sleep(0.02)  # long enough for copies to arrive while it runs
        record(job.id)

    @app.handler("slow")
    def slow(job):
        record("started " + job.id)
        time.sleep(30)
        record("finished " + job.id)
""")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    (tmp_path / "promises.py").write_text(APP)
    return {**os.environ, "JOB_LOG": str(tmp_path / "jobs.log"), **extra,
            "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def _spawn(args: list[str], tmp_path: Path, env: dict[str, str], log: str,
           ) -> subprocess.Popen[bytes]:
    with open(tmp_path / log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "tidings", *args], cwd=tmp_path,
                                env=env, stdout=out, stderr=out)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _lines(tmp_path: Path) -> list[str]:
    path = tmp_path / "jobs.log"
    return path.read_text().splitlines() if path.exists() else []


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        p.wait(timeout=60)


def test_copies_of_a_job_on_three_nodes_run_it_once(db_url: str, tmp_path: Path) -> None:
    env = _env(tmp_path)
    workers = [_spawn(["worker", "--db", db_url, "--app", "promises:app"], tmp_path, env,
                      f"worker-{i}.log") for i in range(3)]
    try:
        with Tidings(settings=Settings(db=db_url)) as t:
            _wait(lambda: _exists(t, "work"), 30, "the app to declare its queue")
            ids = [f"job-{i}" for i in range(120)]

            def sender(offset: int) -> None:
                with Tidings(settings=Settings(db=db_url)) as mine:
                    for k in range(0, len(ids), 2):
                        # the same two ids five times in one batch, from three senders
                        pair = [ids[(k + offset * 40 + j) % len(ids)] for j in (0, 1)]
                        mine.queues.send_batch("work", [OutgoingMessage(
                            json.dumps({"type": "task", "id": pair[n % 2]}), entry_id=str(n))
                            for n in range(10)])

            senders = [threading.Thread(target=sender, args=(i,)) for i in range(3)]
            for s in senders:
                s.start()
            for s in senders:
                s.join()
            _wait(lambda: _empty(t, "work") and len(set(_lines(tmp_path))) == len(ids), 120,
                  "every copy to be handled")
            assert t.queues.describe("work-dlq").counts.visible == 0
        runs = Counter(_lines(tmp_path))
        assert set(runs) == set(ids) and set(runs.values()) == {1}, runs.most_common(3)
        assert all(w.poll() is None for w in workers)
    finally:
        _stop(workers)
    duplicates = sum(_duplicate_warnings(tmp_path / f"worker-{i}.log") for i in range(3))
    assert duplicates > 0  # the copies were there, and each was dropped with a warning


def _duplicate_warnings(log: Path) -> int:
    return log.read_text().count("acknowledging its duplicate")


def _exists(t: Tidings, name: str) -> bool:
    try:
        t.queues.get_queue(name)
        return True
    except Exception:  # noqa: BLE001 - not yet
        return False


def _empty(t: Tidings, name: str) -> bool:
    c = t.queues.describe(name).counts
    return c.visible + c.in_flight + c.delayed == 0


def test_poison_reaches_the_dlq_at_once_with_a_reason_boto3_reads(
        db_url: str, tmp_path: Path) -> None:
    port = _free_port()
    server = _spawn(["serve", "--db", db_url, "--app", "promises:app", "--port", str(port)],
                    tmp_path, _env(tmp_path), "serve.log")
    try:
        _wait(lambda: _healthy(port), 30, "the server")
        sqs = boto3.client("sqs", endpoint_url=f"http://127.0.0.1:{port}",
                           region_name="us-east-1", aws_access_key_id="x",
                           aws_secret_access_key="x")
        url = sqs.get_queue_url(QueueName="work")["QueueUrl"]
        for body in ("not json", json.dumps({"type": "nobody.handles.this", "id": 1})):
            sqs.send_message(QueueUrl=url, MessageBody=body)
        dlq = sqs.get_queue_url(QueueName="work-dlq")["QueueUrl"]
        got: list[dict[str, object]] = []
        deadline = time.monotonic() + 30
        while len(got) < 2 and time.monotonic() < deadline:
            got += sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10, WaitTimeSeconds=2,
                                       MessageAttributeNames=["All"],
                                       MessageSystemAttributeNames=["All"]).get("Messages", [])
        reasons = {m["Body"]: m["MessageAttributes"] for m in got}  # type: ignore[index]
        assert reasons["not json"]["ERROR_CODE"]["StringValue"] == "NotAJob"
        assert "no handler registered for job type 'nobody.handles.this'" in \
            reasons[json.dumps({"type": "nobody.handles.this", "id": 1})][
                "ERROR_MESSAGE"]["StringValue"]
        for m in got:
            attrs = m["Attributes"]  # type: ignore[index]
            assert attrs["ApproximateReceiveCount"] == "1"  # no retries first
            assert attrs["DeadLetterQueueSourceArn"].endswith(":work")
    finally:
        _stop([server])
    log = (tmp_path / "serve.log").read_text()
    assert "cannot be a job" in log and "Traceback" not in log  # no tidings traceback


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_sigterm_gives_back_a_job_past_the_grace_and_never_finishes_it(
        db_url: str, tmp_path: Path) -> None:
    env = _env(tmp_path, TIDINGS_SHUTDOWN_GRACE_S="2")
    worker = _spawn(["worker", "--db", db_url, "--app", "promises:app"], tmp_path, env,
                    "worker.log")
    try:
        with Tidings(settings=Settings(db=db_url)) as t:
            _wait(lambda: _exists(t, "work"), 30, "the app to declare its queue")
            t.queues.send("work", json.dumps({"type": "slow", "id": "s1"}))
            _wait(lambda: "started s1" in _lines(tmp_path), 30, "the job to start")
            begin = time.monotonic()
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=20)
            assert time.monotonic() - begin < 10  # the grace (2 s), not the job (30 s)
            # given back at the deadline: visible again at once, despite the 30 s timeout
            [m] = t.queues.receive("work", wait_s=0)
            assert m.receive_count == 2
    finally:
        _stop([worker])  # once it has exited, nothing more can be written: read now
    assert "finished s1" not in _lines(tmp_path)
    log = (tmp_path / "worker.log").read_text()
    assert "consumers stopping: 1 jobs running" in log
    assert "shutdown deadline: job slow:s1 on work still running" in log
