"""Accepted email is never thrown away: a node without an SMTP relay beside one with a
relay, as real `tidings` processes on one database (both backends). The relay-less node
accepts mail through the SES v2 API and never takes it; the other sends it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import boto3
import httpx
from email_relay import Relay, running_relay

from tidings.client import Tidings
from tidings.model.email import DeliveryState
from tidings.queues.internal import EMAIL_QUEUE
from tidings.settings import Settings

APP = "from tidings import App\napp = App(queue='unused')\n"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(args: list[str], tmp_path: Path, log: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    with open(tmp_path / log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "tidings", *args], cwd=tmp_path,
                                env=env, stdout=out, stderr=out)


def _until(check: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline
        time.sleep(0.2)


def test_a_relayless_node_leaves_mail_to_the_node_with_a_relay(db_url: str,
                                                                tmp_path: Path) -> None:
    (tmp_path / "quiet.py").write_text(APP)
    port = _port()
    front = _start(["serve", "--db", db_url, "--port", str(port)], tmp_path, "front.log")
    procs = [front]
    try:
        _until(lambda: _healthy(port), 30)
        ses = boto3.client("sesv2", endpoint_url=f"http://127.0.0.1:{port}",
                           region_name="us-east-1", aws_access_key_id="x",
                           aws_secret_access_key="x")
        sent = ses.send_email(
            FromEmailAddress="news@example.com",
            Destination={"ToAddresses": ["ana@example.org"]},
            Content={"Simple": {"Subject": {"Data": "hello"}, "Body": {"Text": {"Data": "hi"}}}})
        with Tidings(settings=Settings(db=db_url)) as t:
            time.sleep(2)  # the relay-less node had every chance to take it
            [delivery] = t.email.log()[0]
            assert delivery.id == sent["MessageId"] and delivery.state is DeliveryState.QUEUED
            assert t.email.waiting() == 1
            assert "this node sends no email" in (tmp_path / "front.log").read_text()
            metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
            assert "\ntidings_email_waiting 1.0\n" in metrics  # read at the scrape
            relay = Relay()
            with running_relay(relay) as url:
                procs.append(_start(["worker", "--db", db_url, "--app", "quiet:app",
                                     "--smtp-url", url], tmp_path, "mailer.log"))
                _until(lambda: len(relay.received) == 1, 60)
                _until(lambda: t.email.log()[0][0].state is DeliveryState.SENT, 30)
            assert t.email.waiting() == 0
            assert "\ntidings_email_waiting 0.0\n" in httpx.get(
                f"http://127.0.0.1:{port}/metrics").text
            assert t.queues.describe(EMAIL_QUEUE).counts.visible == 0
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=60)


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
