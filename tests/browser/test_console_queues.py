"""The overview and the queue pages in a real browser on a real `tidings serve`: pages load
without a console error, show the seeded data, keep hostile bodies inert, and their
actions (send, purge, redrive all or a selection) work by clicking."""

from __future__ import annotations

from pathlib import Path

import pytest
import seed
from console_browser import Node, Page, browser, served, shots
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tidings.client import Tidings

__all__ = ["browser", "served", "shots"]  # fixtures


@pytest.fixture
def node(served: tuple[str, Node]) -> Node:
    return served[1]


@pytest.fixture
def db_url(served: tuple[str, Node]) -> str:
    return served[0]


def test_overview_and_queue_list_show_the_seeded_queues(node: Node, browser: WebDriver,
                                                        shots: Path) -> None:
    page = Page(browser, node.url, shots)
    page.open("/ui/")
    text = page.text()
    assert "Overview" in text and "orders-dlq" in text
    # the node's own heartbeat is there within a beat
    page.until(lambda: "alive" in page.text())
    assert "Dead-letter queue orders-dlq holds 3 message(s)" in page.text()
    page.open("/ui/queues")
    rows = {r.find_element(By.CSS_SELECTOR, "td").text: r.text
            for r in browser.find_elements(By.CSS_SELECTOR, "tbody tr")}
    assert set(rows) >= {"orders", "orders-dlq", "emails"}
    assert " 25 " in f" {rows['emails']} "
    page.open("/ui/queues?prefix=ord")
    assert "emails" not in page.text()


def test_dead_letters_are_inert_text_and_a_peek_changes_nothing(
        node: Node, db_url: str, browser: WebDriver, shots: Path) -> None:
    def state() -> list[tuple[int, int, int | None]]:
        with Tidings(db_url) as t:
            views, _ = t.queues.peek("orders-dlq")
        return [(v.message.receive_count, v.message.visible_at, v.message.lease_token)
                for v in views]

    before = state()
    page = Page(browser, node.url, shots)
    page.open("/ui/queues/orders-dlq")
    text = page.text()
    assert seed.XSS_BODY in text and seed.XSS_IMG in text  # shown as text...
    assert browser.execute_script("return window.pwned") is None  # ...and never run
    assert "ValueError: order 3 has no customer" in text  # the recorded error
    page.open("/ui/queues/orders-dlq")  # a second look
    assert len(before) == 3 and state() == before


def test_send_and_purge_by_clicking(node: Node, db_url: str, browser: WebDriver,
                                    shots: Path) -> None:
    page = Page(browser, node.url, shots)
    page.open("/ui/queues/purge-me")
    body = browser.find_element(By.ID, "body")
    body.clear()
    body.send_keys(seed.XSS_IMG)
    page.click("#send-form button[type=submit]")
    assert "Sent message" in page.flash()
    assert browser.execute_script("return window.pwned") is None
    with Tidings(db_url) as t:
        assert t.queues.describe("purge-me").counts.visible == 6
    page.click("form[action$='/purge'] button", confirm=True)
    assert "Purged 6 message(s)" in page.flash()
    with Tidings(db_url) as t:
        assert t.queues.describe("purge-me").counts.visible == 0
    page.no_console_errors()


def test_redrive_a_selection_then_all_with_a_move_task(node: Node, db_url: str,
                                                       browser: WebDriver,
                                                       shots: Path) -> None:
    page = Page(browser, node.url, shots)
    page.open("/ui/queues/refunds-dlq")
    boxes = browser.find_elements(By.CSS_SELECTOR, "input[name=selected]")
    assert len(boxes) == 3
    boxes[0].click()
    page.click("#redrive-chosen")
    assert "Moved 1 of 1 chosen message(s)" in page.flash()
    with Tidings(db_url) as t:
        assert t.queues.describe("refunds-dlq").counts.visible == 2
        assert t.queues.describe("refunds").counts.visible == 1
    page.click("#redrive-all", confirm=True)
    assert "Started a message move task" in page.flash()
    # the move task's progress, as the page shows it (refreshed until it completes)
    page.until(lambda: "COMPLETED" in page.text() and "2 / 2" in page.text(), timeout=45)
    with Tidings(db_url) as t:
        assert t.queues.describe("refunds-dlq").counts.visible == 0
        assert t.queues.describe("refunds").counts.visible == 3
    page.no_console_errors()


def test_keyboard_reaches_every_action_of_a_queue_page(node: Node, browser: WebDriver,
                                                       shots: Path) -> None:
    page = Page(browser, node.url, shots)
    page.open("/ui/queues/orders-dlq")
    missed = page.tab_reaches("main button, main a, main input:not([type=hidden]), "
                              "main textarea, header a, header button")
    assert missed == set()


def test_actions_need_the_csrf_token(node: Node, db_url: str) -> None:
    import httpx

    with httpx.Client(base_url=node.url) as c:
        c.get("/ui/queues/emails")  # a session cookie, but no token in the form
        r = c.post("/ui/queues/emails/purge", data={"back": "/ui/queues/emails"})
        assert r.status_code == 403
        r = c.post("/ui/queues/emails/purge", data={"csrf": "forged"})
        assert r.status_code == 403
    with Tidings(db_url) as t:
        assert t.queues.describe("emails").counts.visible == 25


def test_pages_carry_a_strict_content_security_policy(node: Node) -> None:
    import httpx

    r = httpx.get(f"{node.url}/ui/queues")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp
    assert "unsafe-inline" not in csp
    assert "<script>" not in r.text.replace('<script src="/ui/static/console.js" defer>', "")
