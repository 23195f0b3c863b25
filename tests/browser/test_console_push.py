"""The queue page's push subscription section in a real browser on a real `tidings
serve`: the subscription, its recent failures (the node's own pushes to an endpoint that
is not there), "send test push" and pause/resume by clicking."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from console_browser import Node, Page, browser, free_port, served, shots
from selenium.webdriver.remote.webdriver import WebDriver

from tidings.client import Tidings
from tidings.model.push import SubscriptionState

__all__ = ["browser", "served", "shots"]  # fixtures


class Hook(BaseHTTPRequestHandler):
    seen: list[dict[str, str]] = []

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        self.rfile.read(int(self.headers.get("content-length") or 0))
        Hook.seen.append(dict(self.headers))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


def test_push_section_shows_failures_and_sends_a_test_push(
        served: tuple[str, Node], endpoint: str, browser: WebDriver, shots: Path) -> None:
    db_url, node = served
    nowhere = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens there
    with Tidings(db_url) as t:
        t.queues.create_queue("pushed")
        t.queues.subscribe("pushed", nowhere, timeout="2s")
        t.queues.send("pushed", "<img src=x onerror='window.pwned=1'>")
    page = Page(browser, node.url, shots)
    page.open("/ui/queues/pushed")
    assert nowhere in page.text()

    def failed() -> bool:
        page.open("/ui/queues/pushed")
        return "ConnectionError" in page.text()

    page.until(failed, timeout=60)
    page.click("#push form[action$='/test-push'] button")
    assert "failed" in page.flash()
    with Tidings(db_url) as t:
        t.queues.update_subscription("pushed", endpoint=endpoint)
    page.open("/ui/queues/pushed")
    page.click("#push form[action$='/test-push'] button")
    assert "answered 204" in page.flash()
    # the test push reached the endpoint (the queued message may reach it too, before or
    # after: its retry goes to the new endpoint as well)
    assert any(h["webhook-id"].startswith("test-") for h in Hook.seen)
    page.click("#push form[action$='/push-state'] button")
    assert "Paused" in page.flash()
    with Tidings(db_url) as t:
        assert t.queues.subscription("pushed").subscription.state is SubscriptionState.PAUSED
    assert browser.execute_script("return window.pwned") is None
