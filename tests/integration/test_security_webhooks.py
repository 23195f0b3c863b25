"""The webhook SSRF guard through real HTTP: refused at creation when the URL names an
inside address, refused at delivery (non-retryable, to the DLQ with the reason) when a
name resolves to one, redirects never followed; the allow-list opens what it names."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from serving import run_until, running_server
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from tidings.client import Tidings
from tidings.model.schedules import ScheduleSpec, Target, TargetKind
from tidings.node import Node
from tidings.server.app import create_app
from tidings.settings import Settings


class Receiver:
    def __init__(self, redirect_to: str | None = None) -> None:
        self.hits: list[dict[str, str]] = []
        self.lock = threading.Lock()
        self.redirect_to = redirect_to

    async def handle(self, request: Request) -> Response:
        await request.body()
        with self.lock:
            self.hits.append(dict(request.headers))
        if self.redirect_to:
            return RedirectResponse(self.redirect_to, status_code=302)
        return PlainTextResponse("ok")

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/hook", self.handle, methods=["POST"])])


def tidings(db_url: str, **settings: Any) -> Tidings:
    return Tidings(settings=Settings(db=db_url, webhook_guard="on", **settings))


def run_node(t: Tidings, until: Callable[[], bool], timeout: float = 30.0) -> None:
    node = Node(t, dataclass_settings(t), app=None)
    run_until(node, until, timeout=timeout)


def dataclass_settings(t: Tidings) -> Settings:
    import dataclasses

    return dataclasses.replace(t.settings, concurrency=2, shutdown_grace_s=2)


def just_now() -> str:
    return time.strftime("at(%Y-%m-%dT%H:%M:%S)", time.gmtime())


def hook(name: str, url: str) -> ScheduleSpec:
    return ScheduleSpec(name, just_now(), Target(TargetKind.WEBHOOK, url, input="{}",
                                                 dead_letter_queue="hooks-dlq"))


def dead_letters(t: Tidings, n: int) -> list[Any]:
    return t.queues.receive("hooks-dlq", 10, wait_s=0) if n else []


@pytest.fixture
def api(db_url: str) -> Iterator[str]:
    t = tidings(db_url, webhook_https_only=False)
    try:
        with running_server(create_app(t)) as url:
            yield url
    finally:
        t.close()


@pytest.mark.parametrize("destination", [
    "http://127.0.0.1:8080/hook", "http://[::1]/hook", "http://169.254.169.254/latest/",
    "http://localhost:9324/v1/queues", "http://10.0.0.7/hook", "http://224.0.0.1/",
    "http://[::ffff:127.0.0.1]/hook", "http://0.0.0.0/"])
def test_a_literal_inside_address_is_a_400_at_creation(api: str, destination: str) -> None:
    r = httpx.post(f"{api}/v1/schedules", json={
        "name": "inside", "expression": "rate(1 hour)",
        "target": {"kind": "webhook", "destination": destination}})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["field"] == "Target.Arn" and "TIDINGS_WEBHOOK_ALLOW" in err["message"]


def test_a_public_name_is_accepted_at_creation(api: str) -> None:
    r = httpx.post(f"{api}/v1/schedules", json={
        "name": "outside", "expression": "rate(1 hour)",
        "target": {"kind": "webhook", "destination": "https://hooks.example.com/x"}})
    assert r.status_code == 201, r.text


def test_https_only_refuses_http_at_creation(db_url: str) -> None:
    with tidings(db_url, webhook_https_only=True) as t:
        with pytest.raises(Exception, match="https://"):
            t.schedules.create(ScheduleSpec("plain", "rate(1 hour)", Target(
                TargetKind.WEBHOOK, "http://hooks.example.com/x")))


def test_a_name_resolving_to_loopback_fails_the_delivery_without_retry(db_url: str) -> None:
    name = socket.gethostname()
    try:
        resolved = {i[4][0] for i in socket.getaddrinfo(name, 80, type=socket.SOCK_STREAM)}
    except OSError:
        pytest.skip("this machine's own name does not resolve")
    if not any(a.startswith("127.") or a == "::1" for a in resolved):
        pytest.skip(f"{name} does not resolve to loopback here ({resolved})")
    receiver = Receiver()
    with tidings(db_url) as t, running_server(receiver.app()) as base:
        t.queues.create_queue("hooks-dlq")
        port = base.rsplit(":", 1)[1]
        t.schedules.create(hook("by-name", f"http://{name}:{port}/hook"))
        run_node(t, lambda: t.queues.describe("hooks-dlq").counts.visible >= 1)
        [dead] = dead_letters(t, 1)
    assert receiver.hits == []
    assert dead.attributes["ERROR_CODE"].string_value == "WebhookRefused"
    assert "loopback" in dead.attributes["ERROR_MESSAGE"].string_value
    assert dead.attributes["EXHAUSTED_RETRY_CONDITION"].string_value == "NonRetryableError"


def test_a_redirect_to_the_inside_is_not_followed(db_url: str) -> None:
    inside = Receiver()
    with running_server(inside.app()) as inside_url:
        redirector = Receiver(redirect_to=f"{inside_url}/hook")
        with tidings(db_url, webhook_allow="127.0.0.2/32") as t, \
                running_server(redirector.app(), host="127.0.0.2") as outside:
            t.queues.create_queue("hooks-dlq")
            t.schedules.create(hook("redirected", f"{outside}/hook"))
            run_node(t, lambda: t.queues.describe("hooks-dlq").counts.visible >= 1)
            [dead] = dead_letters(t, 1)
    assert len(redirector.hits) == 1 and inside.hits == []
    assert dead.attributes["ERROR_CODE"].string_value == "HTTP302"


def test_the_allow_list_opens_ranges_and_names(db_url: str) -> None:
    receiver = Receiver()
    with tidings(db_url, webhook_allow="127.0.0.0/8, localhost") as t, \
            running_server(receiver.app()) as base:
        port = base.rsplit(":", 1)[1]
        t.queues.create_queue("hooks-dlq")
        t.schedules.create(hook("by-range", f"{base}/hook"))
        t.schedules.create(hook("by-name", f"http://localhost:{port}/hook"))
        run_node(t, lambda: len(receiver.hits) >= 2)
    assert len(receiver.hits) == 2
    assert {h["host"] for h in receiver.hits} == {f"127.0.0.1:{port}", f"localhost:{port}"}
