"""Campaigns and email in a real browser: step progress, pause/resume/cancel, cancelling
one recipient found by id, the delivery log's filters, the suppression list, and a
template preview in which the template's script never runs and nothing remote loads."""

from __future__ import annotations

from pathlib import Path

import pytest
import seed
from console_browser import Node, Page, browser, served, shots
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from tidings.client import Tidings

__all__ = ["browser", "served", "shots"]  # fixtures


@pytest.fixture
def node(served: tuple[str, Node]) -> Node:
    return served[1]


@pytest.fixture
def db_url(served: tuple[str, Node]) -> str:
    return served[0]


def _cancelled_per_step(browser: WebDriver) -> list[str]:
    rows = browser.find_elements(By.CSS_SELECTOR, "section[aria-labelledby=steps-h] tbody tr")
    return [r.find_elements(By.CSS_SELECTOR, "td")[-1].text for r in rows]


def test_campaign_list_and_steps(node: Node, browser: WebDriver, shots: Path) -> None:
    page = Page(browser, node.url, shots)
    page.open("/ui/campaigns")
    text = page.text()
    assert all(name in text for name in ("spring", "autumn", "winter", "summer"))
    page.open("/ui/campaigns/summer")
    steps = browser.find_elements(By.CSS_SELECTOR, "section[aria-labelledby=steps-h] tbody tr")
    assert [r.find_elements(By.CSS_SELECTOR, "td")[3].text for r in steps] == ["12", "12"]
    assert _cancelled_per_step(browser) == ["0", "0"]
    bars = browser.find_elements(By.CSS_SELECTOR, "svg.chart rect")
    assert bars, "summer's welcome step falls within the next 6 hours somewhere"


def test_pause_resume_and_cancel_by_clicking(node: Node, db_url: str, browser: WebDriver,
                                             shots: Path) -> None:
    page = Page(browser, node.url, shots)
    page.open("/ui/campaigns/spring")
    page.click("form[action$='/pause'] button")
    assert "Campaign spring is paused" in page.flash()
    page.click("form[action$='/resume'] button")
    assert "Campaign spring is active" in page.flash()
    page.open("/ui/campaigns/autumn")
    page.click("form[action$='/cancel'] button", confirm=True)
    assert "Campaign autumn is cancelled" in page.flash()
    assert _cancelled_per_step(browser) == ["12", "12"]  # each step's share of the 24
    with Tidings(db_url) as t:
        assert t.campaigns.get("spring").status.value == "ACTIVE"
        assert t.campaigns.get("autumn").status.value == "CANCELLED"
    page.no_console_errors()


def test_cancel_one_recipient_found_by_id(node: Node, db_url: str, browser: WebDriver,
                                          shots: Path) -> None:
    page = Page(browser, node.url, shots)
    page.open("/ui/campaigns/winter")
    box = browser.find_element(By.ID, "recipient-search")
    box.send_keys("r3")
    page.click("form[role=search] button")
    assert "recipient=r3" in browser.current_url
    assert page.text().count("welcome-") >= 1 and "nothing left" not in page.text()
    page.click("form[action$='/cancel-recipient'] button", confirm=True)
    assert "Cancelled 2 remaining step(s) of recipient r3 in winter" in page.flash()
    assert page.text().count("nothing left") == 2
    assert _cancelled_per_step(browser) == ["1", "1"]
    with Tidings(db_url) as t:
        assert t.campaigns.status("winter").counts.scheduled == 22


def test_delivery_log_and_suppressions(node: Node, db_url: str, browser: WebDriver,
                                       shots: Path) -> None:
    page = Page(browser, node.url, shots)
    page.open("/ui/email")
    assert "ada@example.com" in page.text() and "grace@example.com" in page.text()
    page.open("/ui/email?recipient=ada@example.com")
    log = browser.find_element(By.CSS_SELECTOR, "section[aria-labelledby=log-h] tbody").text
    assert "ada@example.com" in log and "grace@example.com" not in log
    page.open("/ui/email")
    browser.find_element(By.ID, "suppress-address").send_keys("new@example.com")
    page.click("#suppress-add")
    assert "Suppressed new@example.com" in page.flash()
    page.click("form[action$='/remove']:has(input[value='remove-me@example.com']) button")
    assert "Removed remove-me@example.com" in page.flash()
    with Tidings(db_url) as t:
        assert t.email.suppression("new@example.com") is not None
        assert t.email.suppression("remove-me@example.com") is None
    page.no_console_errors()


def test_template_preview_is_sandboxed(node: Node, browser: WebDriver, shots: Path) -> None:
    page = Page(browser, node.url, shots)
    page.open("/ui/email")
    Select(browser.find_element(By.ID, "template")).select_by_value("welcome")
    page.click("#preview-button")
    assert browser.find_element(By.ID, "preview-subject").text == "Welcome Ada"
    assert "Hi Ada, order 42" in browser.find_element(By.ID, "preview-text").text
    frame = browser.find_element(By.ID, "preview-frame")
    assert frame.get_attribute("sandbox") == ""  # every restriction on
    browser.switch_to.frame(frame)
    try:
        assert browser.find_element(By.TAG_NAME, "h1").text == "Hello Ada"
        image = browser.find_element(By.TAG_NAME, "img")
        assert browser.execute_script("return arguments[0].naturalWidth", image) == 0
    finally:
        browser.switch_to.default_content()
    assert browser.execute_script("return window.pwned") is None
    # what the browser refused is the template's own script and remote image, nothing else
    refused = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert all("/preview" in m or "198.51.100.7" in m for m in refused), refused


@pytest.mark.parametrize("path", ["/ui/campaigns/winter", "/ui/email"])
def test_keyboard_reaches_every_action(node: Node, browser: WebDriver, shots: Path,
                                       path: str) -> None:
    page = Page(browser, node.url, shots)
    page.open(path)
    assert page.tab_reaches("main button, main a, main input:not([type=hidden]), "
                            "main select, main textarea") == set()


def test_hostile_text_stays_text(node: Node, browser: WebDriver, shots: Path) -> None:
    page = Page(browser, node.url, shots)
    page.open("/ui/email?template=welcome")
    assert seed.XSS_BODY not in browser.page_source  # escaped in the HTML
    assert browser.execute_script("return window.pwned") is None
