"""Signing in to the console with an API token on a node that requires tokens, in a real
browser: scopes decide what the viewer may do, the cookie is HttpOnly and SameSite=Strict,
and actions reach the audit log under the token's id."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import seed
from console_browser import Node, Page, browser, shots
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tidings.client import Tidings

__all__ = ["browser", "shots"]  # fixtures

READ = "read-token-0123456789abcdef"
OPERATE = "operate-token-0123456789abcdef"
ADMIN = "admin-token-0123456789abcdef"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Node]]:
    folder = tmp_path_factory.mktemp("secured")
    url = f"sqlite:///{folder}/secured.db"
    with Tidings(url) as t:
        seed.queues(t)
    node = Node(url, folder, env={
        "TIDINGS_API_TOKENS": f"read:{READ},operate:{OPERATE},admin:{ADMIN}"})
    try:
        yield url, node
    finally:
        node.stop()


def sign_in(page: Page, token: str, then: str = "/ui/") -> None:
    page.d.get(page.base + then)
    assert "/ui/signin" in page.d.current_url
    page.d.find_element(By.ID, "token").send_keys(token)
    page.click("form.stack button[type=submit]")


def test_the_console_asks_for_a_token_and_keeps_only_a_cookie(
        secured: tuple[str, Node], browser: WebDriver, shots: Path) -> None:
    page = Page(browser, secured[1].url, shots)
    page.d.get(page.base + "/ui/queues")
    assert "/ui/signin" in browser.current_url
    page.screenshot("signin", themes=("light",))
    browser.find_element(By.ID, "token").send_keys("not-a-token-at-all-000")
    page.click("form.stack button[type=submit]")
    assert "That token is not valid here." in page.text()
    sign_in(page, READ, "/ui/queues")
    assert browser.current_url.endswith("/ui/queues")
    assert "Sign out (read)" in page.text()
    cookie = browser.get_cookie("tidings_console")
    assert cookie is not None and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert READ not in cookie["value"]
    assert browser.execute_script("return document.cookie").find("tidings_console") == -1
    page.click("form[action='/ui/signout'] button")
    assert "/ui/signin" in browser.current_url


def test_scopes_decide_who_may_act(secured: tuple[str, Node], browser: WebDriver,
                                   shots: Path) -> None:
    url, node = secured
    page = Page(browser, node.url, shots)
    sign_in(page, READ, "/ui/queues/emails")
    assert "lets you look, not act" in page.text()
    assert browser.find_elements(By.CSS_SELECTOR, "main form[method=post] button") == []
    page.d.delete_all_cookies()
    sign_in(page, OPERATE, "/ui/queues/emails")
    page.click("#send-form button[type=submit]")
    assert "Sent message" in page.flash()
    assert browser.find_elements(By.CSS_SELECTOR, "form[action$='/purge'] button") == []
    page.d.delete_all_cookies()
    sign_in(page, ADMIN, "/ui/queues/purge-me")
    page.click("form[action$='/purge'] button", confirm=True)
    assert "Purged 5 message(s)" in page.flash()
    with Tidings(url) as t:
        assert t.queues.describe("emails").counts.visible == 26
        assert t.queues.describe("purge-me").counts.visible == 0
        entries = [e for e in t.audit.list() if e.face == "console"]
    assert {(e.action, e.resource) for e in entries} >= {
        ("send", "/ui/queues/emails/send"), ("purge", "/ui/queues/purge-me/purge")}
    assert all(e.actor.startswith("token-") for e in entries), entries


def test_a_forged_session_cookie_is_refused(secured: tuple[str, Node]) -> None:
    import httpx

    with httpx.Client(base_url=secured[1].url) as c:
        c.cookies.set("tidings_console", "eyJzaWQiOiJ4In0.forged", path="/ui")
        r = c.get("/ui/queues")
        assert r.status_code == 303 and "/ui/signin" in r.headers["location"]


def test_the_server_refuses_what_the_page_does_not_offer(secured: tuple[str, Node]) -> None:
    """A read session with a valid CSRF token still cannot act: the scope is checked on
    the server, not only by hiding buttons."""
    import re

    import httpx

    url, node = secured
    with httpx.Client(base_url=node.url) as c:
        c.post("/ui/signin", data={"token": READ}, headers={"origin": node.url})
        page = c.get("/ui/queues/emails").text
        csrf = re.search(r'name="csrf" value="([^"]+)"', page)
        assert csrf is not None  # (the sign-out form carries it)
        r = c.post("/ui/queues/orders/send", data={"csrf": csrf.group(1), "body": "x"})
        assert r.status_code == 403 and "needs the operate scope" in r.text
    with Tidings(url) as t:
        assert t.queues.describe("orders").counts.visible == 0
