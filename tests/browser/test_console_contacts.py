"""Contact lists and returned mail in a real browser: the lists and their topics, one
list's contacts filtered by topic status, unsubscribing and removing a contact by
clicking, and bounces and complaints beside the delivery log."""

from __future__ import annotations

from pathlib import Path

import pytest
from console_browser import Node, Page, browser, served, shots
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from tidings.client import Tidings
from tidings.email.returns import Returned
from tidings.model.email_events import EventKind

__all__ = ["browser", "served", "shots"]  # fixtures


@pytest.fixture
def node(served: tuple[str, Node]) -> Node:
    return served[1]


@pytest.fixture
def db_url(served: tuple[str, Node]) -> str:
    return served[0]


def test_contact_lists_and_returned_mail(node: Node, db_url: str, browser: WebDriver,
                                         shots: Path) -> None:
    with Tidings(db_url) as t:
        t.email.contacts.create_list("members", [
            {"TopicName": "events", "DisplayName": "Club events",
             "DefaultSubscriptionStatus": "OPT_IN"},
            {"TopicName": "offers", "DisplayName": "<b>Offers</b>",
             "DefaultSubscriptionStatus": "OPT_OUT"}], "Our <members>")
        for who, prefs in (("in@example.org", "OPT_IN"), ("out@example.org", "OPT_OUT")):
            t.email.contacts.create_contact("members", who, [
                {"TopicName": "events", "SubscriptionStatus": prefs}])
        t.email.contacts.create_contact("members", "gone@example.org")
        t.email.returns.record([
            Returned("bounced@example.org", EventKind.HARD_BOUNCE, "dsn",
                     "failed 5.1.1: user unknown"),
            Returned("busy@example.org", EventKind.SOFT_BOUNCE, "dsn", "delayed 4.2.2")])
    page = Page(browser, node.url, shots)
    page.open("/ui/email/lists")
    text = page.text()
    assert "members" in text and "Club events" in text and "<b>Offers</b>" in text  # as text
    page.click("a[href='/ui/email/lists/members']")
    rows = page.text()
    assert all(a in rows for a in ("in@example.org", "out@example.org", "gone@example.org"))
    Select(browser.find_element(By.NAME, "status")).select_by_value("OPT_OUT")
    Select(browser.find_element(By.NAME, "topic")).select_by_value("events")
    page.click("#contacts-filter")
    filtered = page.text()
    assert "out@example.org" in filtered and "in@example.org" not in filtered.replace(
        "out@example.org", "")
    page.open("/ui/email/lists/members")
    page.click("form[action$='/opt-out']:has(input[value='in@example.org']) button")
    assert "in@example.org opted out of the whole list" in page.flash()
    page.click("form[action$='/remove']:has(input[value='gone@example.org']) button")
    assert "Removed gone@example.org from members" in page.flash()
    with Tidings(db_url) as t:
        assert t.email.contacts.get_contact("members", "in@example.org").unsubscribe_all
        assert t.email.contacts.store.get_contact("members", "gone@example.org") is None
        assert t.email.suppression("in@example.org") is None  # the list, not the account
    page.open("/ui/email")
    returned = browser.find_element(By.ID, "returned").text
    assert "bounced@example.org" in returned and "HARD_BOUNCE" in returned
    assert "busy@example.org" in returned and "SOFT_BOUNCE" in returned
    page.no_console_errors()
