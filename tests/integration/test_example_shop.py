"""examples/shop.py as users run it: `tidings serve --app examples.shop:app` in a real
process on each backend, fed by tasks sent from this process and a raw JSON job from the
HTTP API; and its whole welcome drip through time travel."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

import tidings
from tidings.settings import Settings
from tidings.testing import time_travel

ROOT = Path(__file__).resolve().parents[2]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _until(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _waiting(t: tidings.Tidings) -> list[str]:
    return sorted(json.loads(v.message.body)["type"] for v in t.queues.peek("shop")[0])


def test_the_shop_runs_under_tidings_serve(db_url: str, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    port = _port()
    env = {**os.environ, "TIDINGS_DB": db_url, "PYTHONPATH": str(ROOT)}
    log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115 - closed below
    server = subprocess.Popen([sys.executable, "-m", "tidings", "serve", "--app",
                               "examples.shop:app", "--port", str(port)], cwd=ROOT, env=env,
                              stdout=log, stderr=subprocess.STDOUT)
    monkeypatch.setenv("TIDINGS_DB", db_url)
    from examples import shop

    try:
        with tidings.Tidings(settings=Settings(db=db_url)) as t:
            # the node registered the periodic jobs at start
            _until(lambda: _names(t, "tidings-periodic") == ["nightly_report", "restock"])
            shop.signup.send(email="ada@example.com", name="Ada")
            body = {"type": "place_order", "id": "o-1", "args": {"order": {
                "id": 1, "sku": "mug", "quantity": 2, "email": "bob@example.com"}}}
            _until(lambda: _healthy(port))
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/v1/queues/shop/messages", method="POST",
                data=json.dumps({"body": body}).encode(),
                headers={"content-type": "application/json"})
            urllib.request.urlopen(request, timeout=10).close()
            # signup ran welcome at once; its mail and the order's wait for a relay
            _until(lambda: sorted(d.recipients[0] for d in t.email.log()[0]) == [
                "ada@example.com", "bob@example.com"])
            # tips (2 days) waits in the queue; offer (5 days) as a one-shot schedule. The
            # order's mail is written by its handler, before the job is acknowledged: wait
            # for the acknowledgement too.
            _until(lambda: _waiting(t) == ["ship", "tips"])
            [offer] = t.schedules.list(group="tidings-jobs")[0]
            assert json.loads(offer.spec.target.input or "")["type"] == "offer"
    finally:
        server.terminate()
        server.wait(30)
        log.close()
        shop.app.close()
    output = (tmp_path / "serve.log").read_text()
    # uvicorn ends on SIGTERM by re-raising it, after a clean shutdown
    assert server.returncode in (0, -signal.SIGTERM) and "Traceback" not in output, output[-3000:]
    assert "Application shutdown complete" in output


def _names(t: tidings.Tidings, group: str) -> list[str]:
    return sorted(s.name for s in t.schedules.list(group=group)[0])


def _healthy(port: int) -> bool:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).close()
        return True
    except OSError:
        return False


def test_the_shops_drip_in_time_travel() -> None:
    from examples import shop

    with time_travel(shop.app, start=datetime(2026, 3, 2, 8, tzinfo=UTC)) as tt:
        shop.signup.send(email="ada@example.com", name="Ada")
        shop.place_order.send(order=shop.Order(id=7, sku="mug", quantity=1,
                                               email="ada@example.com"))
        tt.advance(days=6)
        assert sorted((e.at.strftime("%d %H:%M"), e.subject) for e in tt.sent_emails) == [
            ("02 08:00", "Order 7 confirmed"), ("02 08:00", "Welcome, Ada"),
            ("04 08:00", "Three tips for Ada"), ("07 08:00", "10% off for you, Ada")]
        [ship] = [r for r in tt.jobs_run if r.type == "ship"]
        assert ship.args == {"order_id": 7} and ship.at.strftime("%d %H:%M") == "02 09:00"
        # hourly from the start instant to the end instant, both included
        restocks = [r for r in tt.jobs_run if r.type == "restock"]
        assert len(restocks) == 6 * 24 + 1 and restocks[0].args == {}
