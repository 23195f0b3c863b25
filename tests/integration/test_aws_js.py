"""The AWS SDK for JavaScript v3 (SQS, Scheduler and SES v2 clients) against `tidings serve`.

`tests/js/sdk_test.mjs` and `tests/js/sdk_edges.mjs` are application code written for AWS;
only the endpoint and the credentials differ. Their npm packages (pinned in
tests/js/package.json) are installed into tests/js/node_modules the first time, from the
npm registry.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from email_relay import Relay, running_relay
from serving import running_server

from tidings.client import Tidings
from tidings.model.email import DeliveryState
from tidings.node import Node
from tidings.settings import Settings

JS = Path(__file__).resolve().parents[1] / "js"
NODE = shutil.which("node")
NPM = shutil.which("npm")
KEY, SECRET = "AKIDJSSDK", "js-sdk-secret"

pytestmark = pytest.mark.skipif(NODE is None or NPM is None,
                                reason="Node.js and npm are not installed")


def ensure_packages() -> None:
    if all((JS / "node_modules" / "@aws-sdk" / name).is_dir()
           for name in ("client-scheduler", "client-sqs", "client-sesv2")):
        return
    done = subprocess.run([str(NPM), "install", "--no-audit", "--no-fund"], cwd=JS,
                          capture_output=True, text=True, timeout=540, check=False)
    assert done.returncode == 0, f"npm install failed:\n{done.stdout}\n{done.stderr}"


@pytest.fixture
def endpoint(tmp_path: Path, db_url: str) -> Iterator[str]:
    # Keys configured: the SDK's SigV4 signatures are verified, not waved through.
    config = Settings(db=db_url, aws_keys=f"{KEY}:{SECRET}",
                      concurrency=2, shutdown_grace_s=1)
    t = Tidings(settings=config)
    node = Node(t, config)
    try:
        with running_server(node.http_app()) as url:
            yield url
    finally:
        node.bridge.close()
        t.close()


@pytest.mark.timeout(600)
def test_js_sdk_sends_and_schedules(endpoint: str, tmp_path: Path) -> None:
    ensure_packages()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(ENDPOINT=endpoint, AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET,
               AWS_REGION="us-east-1", AWS_MAX_ATTEMPTS="1",
               AWS_CONFIG_FILE=str(tmp_path / "no-config"),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-credentials"))
    done = subprocess.run([str(NODE), "sdk_test.mjs"], cwd=JS, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    output = f"{done.stdout}\n{done.stderr}"
    assert done.returncode == 0, output
    assert "received" in done.stdout and '"type":"invoice.generate"' in done.stdout
    assert '"type":"appointment.reminder"' in done.stdout
    assert "duplicate name: ConflictException (409)" in done.stdout
    assert "missing schedule: ResourceNotFoundException (404)" in done.stdout
    assert done.stdout.rstrip().endswith("OK")


def run_script(script: str, endpoint: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    ensure_packages()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(ENDPOINT=endpoint, AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET,
               AWS_REGION="us-east-1", AWS_CONFIG_FILE=str(tmp_path / "no-config"),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-credentials"))
    return subprocess.run([str(NODE), script], cwd=JS, env=env, capture_output=True,
                          text=True, timeout=180, check=False)


@pytest.mark.timeout(600)
def test_js_sdk_meets_the_edges(db_url: str, tmp_path: Path) -> None:
    """The long-poll cap retried by the SDK, unknown SES operations named, and one-click
    unsubscribe only on list mail: what `sdk_edges.mjs` does, checked from both sides."""
    relay = Relay()
    with running_relay(relay) as smtp_url:
        config = Settings(db=db_url, aws_keys=f"{KEY}:{SECRET}", max_long_polls=1,
                          smtp_url=smtp_url, public_url="https://mail.example.test",
                          concurrency=2, shutdown_grace_s=1)
        t = Tidings(settings=config)
        node = Node(t, config)
        try:
            with running_server(node.http_app()) as endpoint:
                t.email.contacts.create_list("news")  # what the script's list mail names
                done = run_script("sdk_edges.mjs", endpoint, tmp_path)
                output = f"{done.stdout}\n{done.stderr}"
                assert done.returncode == 0, output
                sent = next(line for line in done.stdout.splitlines()
                            if line.startswith("sent ")).split()[1:]
                for message_id in sent:
                    deadline = time.monotonic() + 20
                    while t.email.get_delivery(message_id).state is not DeliveryState.SENT:
                        assert time.monotonic() < deadline, output
                        time.sleep(0.05)
        finally:
            node.bridge.close()
            t.close()
    lines = done.stdout.splitlines()
    retried = next(line for line in lines if line.startswith("cap retried:"))
    assert "body=job" in retried
    assert "answers=429 RequestThrottled retry-after=1," in retried and retried.endswith(
        ",200 body=job"), retried
    exhausted = next(line for line in lines if line.startswith("cap exhausted:"))
    assert exhausted.startswith("cap exhausted: RequestThrottled (429) attempts=2 answers="
                                + ",".join(["429 RequestThrottled retry-after=1"] * 2)), exhausted
    assert "TIDINGS_MAX_LONG_POLLS" in exhausted
    assert "GetAccount: UnknownOperationException (404): GetAccount is an Amazon SES v2 " \
           "operation that tidings does not implement (GET /v2/email/account)." in lines
    assert any(line.startswith("CreateConfigurationSet: UnknownOperationException (404): "
                               "CreateConfigurationSet is an Amazon SES v2 operation")
               for line in lines), lines
    assert "missing template: NotFoundException (404)" in lines
    mail = {r.rcpt_tos[0]: r.message for r in relay.received}
    assert mail["receipt@example.org"]["List-Unsubscribe"] is None
    assert mail["receipt@example.org"]["List-Unsubscribe-Post"] is None
    assert "/unsubscribe/" in mail["member@example.org"]["List-Unsubscribe"]
    assert mail["member@example.org"]["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert lines[-1] == "OK"
