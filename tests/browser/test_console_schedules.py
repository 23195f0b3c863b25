"""The schedule pages in a real browser: keyset paging through a group, filters in the
address, one schedule's page (words, occurrences in two zones, target), and enable,
disable and delete by clicking."""

from __future__ import annotations

from pathlib import Path

import pytest
import seed
from console_browser import Node, Page, browser, served, shots
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tidings.client import Tidings
from tidings.errors import ScheduleNotFound

__all__ = ["browser", "served", "shots"]  # fixtures


@pytest.fixture
def node(served: tuple[str, Node]) -> Node:
    return served[1]


@pytest.fixture
def db_url(served: tuple[str, Node]) -> str:
    return served[0]


def _names(browser: WebDriver) -> list[str]:
    return [r.find_elements(By.CSS_SELECTOR, "td")[1].text
            for r in browser.find_elements(By.CSS_SELECTOR, "tbody tr")
            if len(r.find_elements(By.CSS_SELECTOR, "td")) > 1]


def test_a_group_pages_by_key_with_the_filters_in_the_address(
        node: Node, browser: WebDriver, shots: Path) -> None:
    page = Page(browser, node.url, shots)
    page.open("/ui/schedules?group=bulk")
    seen = _names(browser)
    assert seen == [f"bulk-{i:03d}" for i in range(50)]
    page.click("#next-page")
    assert "group=bulk" in browser.current_url and "after=" in browser.current_url
    seen += _names(browser)
    page.click("#next-page")
    seen += _names(browser)
    assert seen == [f"bulk-{i:03d}" for i in range(120)]
    assert browser.find_elements(By.ID, "next-page") == []
    page.no_console_errors()
    page.open("/ui/schedules?state=DISABLED")
    assert _names(browser) == ["to-enable"]
    page.open("/ui/schedules?target=webhook")
    assert _names(browser) == ["hook"]
    page.open("/ui/schedules?from=2000-01-01T00:00&prefix=invoice")
    assert _names(browser) == ["invoice-daily"]
    page.open("/ui/schedules?from=tomorrow")
    assert "must be a date and time" in page.text()


def test_a_schedule_page_says_when_in_words_and_in_two_zones(
        node: Node, browser: WebDriver, shots: Path) -> None:
    page = Page(browser, node.url, shots)
    page.open("/ui/schedules/billing/invoice-daily")
    text = page.text()
    assert "at 09:00, Monday to Friday (Europe/Paris)" in text
    rows = browser.find_elements(By.CSS_SELECTOR, "section[aria-labelledby=when-h] tbody tr")
    assert len(rows) == 10
    paris, local = rows[0].find_elements(By.CSS_SELECTOR, "td")
    assert "09:00:00 CE" in paris.text  # CET or CEST
    assert local.text and local.text != paris.text  # the script wrote the viewer's time
    assert seed.XSS_BODY in text and seed.XSS_IMG in text
    assert browser.execute_script("return window.pwned") is None
    assert "orders-dlq" in text and "185 attempts" in text


def test_a_schedule_page_shows_its_last_firings_and_their_outcome(
        node: Node, browser: WebDriver, shots: Path) -> None:
    page = Page(browser, node.url, shots)
    page.open("/ui/schedules/default/hook")  # a webhook target: outcomes for any kind
    rows = [[td.text for td in r.find_elements(By.CSS_SELECTOR, "td")]
            for r in browser.find_elements(By.CSS_SELECTOR, "#firings tbody tr")]
    assert [r[2] for r in rows] == ["dropped", "delivered"]  # newest first
    assert rows[0][3] == "3" and rows[0][4] == f"HTTP500: {seed.XSS_IMG}"  # shown as text
    assert browser.execute_script("return window.pwned") is None
    page.open("/ui/schedules/default/to-enable")  # never fired
    assert "No firing with a final outcome" in page.text()


def test_disable_enable_and_delete_by_clicking(node: Node, db_url: str, browser: WebDriver,
                                               shots: Path) -> None:
    page = Page(browser, node.url, shots)
    page.open("/ui/schedules/default/to-disable")
    page.click("form[action$='/disable'] button")
    assert "Disabled schedule default/to-disable" in page.flash()
    page.open("/ui/schedules/default/to-enable")
    page.click("form[action$='/enable'] button")
    assert "Enabled schedule default/to-enable" in page.flash()
    page.open("/ui/schedules/default/to-delete")
    page.click("form[action$='/delete'] button", confirm=True)
    assert "Deleted schedule default/to-delete" in page.flash()
    assert browser.current_url.endswith("/ui/schedules")
    with Tidings(db_url) as t:
        assert t.schedules.get("to-disable").spec.state.value == "DISABLED"
        assert t.schedules.get("to-enable").spec.state.value == "ENABLED"
        with pytest.raises(ScheduleNotFound):
            t.schedules.get("to-delete")
    browser.get(f"{node.url}/ui/schedules/default/to-delete")  # gone: a 404 page
    assert "does not exist" in page.text()
