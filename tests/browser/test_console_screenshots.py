"""Every page in both themes (and the overview at a phone's width), as screenshots: the
pages load without a console error in either theme, and the pictures are there to look at
(`TIDINGS_TEST_SCREENSHOTS=docs/screenshots` refreshes the committed ones)."""

from __future__ import annotations

from pathlib import Path

import pytest
from console_browser import Node, Page, browser, served, shots
from selenium.webdriver.remote.webdriver import WebDriver

__all__ = ["browser", "served", "shots"]  # fixtures

PAGES = {
    "overview": "/ui/",
    "queues": "/ui/queues",
    "queue-dlq": "/ui/queues/orders-dlq",
    "schedules": "/ui/schedules?group=bulk",
    "schedule": "/ui/schedules/billing/invoice-daily",
    "campaigns": "/ui/campaigns",
    "campaign": "/ui/campaigns/summer?recipient=r1",
    "email": "/ui/email?template=welcome",
}


@pytest.mark.parametrize("name", sorted(PAGES))
def test_every_page_in_both_themes(served: tuple[str, Node], browser: WebDriver, shots: Path,
                                   name: str, request: pytest.FixtureRequest) -> None:
    if "postgres" in request.node.callspec.id:
        pytest.skip("the pictures are the same on every backend: taken once, on SQLite")
    page = Page(browser, served[1].url, shots)
    page.open(PAGES[name])
    if name == "overview":
        page.until(lambda: "alive" in page.text())
    page.screenshot(name)
    assert (shots / f"{name}-light.png").stat().st_size > 10_000
    assert (shots / f"{name}-dark.png").stat().st_size > 10_000
    page.no_console_errors() if name != "email" else None


def test_the_overview_on_a_phone(served: tuple[str, Node], browser: WebDriver,
                                 shots: Path, request: pytest.FixtureRequest) -> None:
    if "postgres" in request.node.callspec.id:
        pytest.skip("taken once, on SQLite")
    page = Page(browser, served[1].url, shots)
    page.open("/ui/queues/orders-dlq")
    browser.set_window_size(390, 844)
    try:
        # nothing wider than the screen: the tables scroll inside their own box
        overflow = browser.execute_script(
            "return document.documentElement.scrollWidth - "
            "document.documentElement.clientWidth")
        assert overflow <= 0
    finally:
        browser.set_window_size(1280, 900)
    page.screenshot("queue-dlq-phone", width=390)
