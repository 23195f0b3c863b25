"""The AWS SDK for JavaScript v3 (SQS + Scheduler clients) against `tidings serve`.

`tests/js/sdk_test.mjs` is application code written for AWS; only the endpoint and the
credentials differ. Its npm packages (pinned in tests/js/package.json) are installed into
tests/js/node_modules the first time, from the npm registry.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from serving import running_server

from tidings.client import Tidings
from tidings.node import Node
from tidings.settings import Settings

JS = Path(__file__).resolve().parents[1] / "js"
NODE = shutil.which("node")
NPM = shutil.which("npm")
KEY, SECRET = "AKIDJSSDK", "js-sdk-secret"

pytestmark = pytest.mark.skipif(NODE is None or NPM is None,
                                reason="Node.js and npm are not installed")


def ensure_packages() -> None:
    if (JS / "node_modules" / "@aws-sdk" / "client-scheduler").is_dir() and \
            (JS / "node_modules" / "@aws-sdk" / "client-sqs").is_dir():
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
