"""A push subscription's endpoint written in Node.js (`tests/js/push_receiver.mjs`),
verifying each request with the Standard Webhooks JavaScript library, on every backend:
what the article's Node API would run instead of a worker."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from push_receiver import running_pushers, wait_until
from test_aws_js import JS, NODE, NPM, ensure_packages

from tidings.client import Tidings
from tidings.model.digests import MessageAttributeValue
from tidings.settings import Settings

pytestmark = pytest.mark.skipif(NODE is None or NPM is None,
                                reason="Node.js and npm are not installed")


def ensure_standardwebhooks() -> None:
    ensure_packages()
    if not (JS / "node_modules" / "standardwebhooks").is_dir():
        done = subprocess.run([str(NPM), "install", "--no-audit", "--no-fund"], cwd=JS,
                              capture_output=True, text=True, timeout=540, check=False)
        assert done.returncode == 0, done.stderr


@pytest.mark.timeout(600)
def test_a_node_receiver_verifies_every_push(db_url: str, tmp_path: Path) -> None:
    ensure_standardwebhooks()
    with Tidings(settings=Settings(db=db_url)) as t:
        t.queues.create_queue("jobs")
        view = t.queues.subscribe("jobs", "http://127.0.0.1:9/", concurrency=4)
        out = (tmp_path / "receiver.out").open("w+")
        receiver = subprocess.Popen(
            [str(NODE), "push_receiver.mjs"], cwd=JS, stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, "PUSH_SECRET": view.subscription.secret})
        try:
            def lines() -> list[dict[str, object]]:
                out.seek(0)
                return [json.loads(x) for x in out.read().splitlines() if x.startswith("{")]

            wait_until(lambda: bool(lines()), 30, "the receiver's port")
            port = lines()[0]["port"]
            t.queues.update_subscription("jobs", endpoint=f"http://127.0.0.1:{port}/jobs")
            kind = {"kind": MessageAttributeValue("String", "invoice")}
            sent = {t.queues.send("jobs", {"type": "invoice.generate", "id": i},
                                  attributes=kind).message_id for i in range(10)}
            with running_pushers(t):
                wait_until(lambda: len(lines()) >= 11, 60, "ten pushes at the receiver")
            got = lines()[1:]
        finally:
            receiver.terminate()
            receiver.wait(10)
            out.close()
    assert all(g["ok"] for g in got), got
    assert {g["id"] for g in got} == sent
    assert sorted(g["body"]["id"] for g in got) == list(range(10))  # type: ignore[index]
    assert all(g["attributes"] == {"kind": {"DataType": "String", "StringValue": "invoice"}}
               for g in got)
