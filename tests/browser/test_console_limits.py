"""The limits page in a real browser on a real `tidings serve`: set a limit with the form,
pause it for some minutes, resume it and delete it by clicking, every change in the
database; the current use (a concurrency slot held by a job); and a key written by
someone else shown as text, never run."""

from __future__ import annotations

from pathlib import Path

from console_browser import Node, Page, browser, served, shots
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tidings.client import Tidings
from tidings.store.contract.limits import KeyRule, LimitClaim

__all__ = ["browser", "served", "shots"]  # fixtures

HOSTILE = "tenant:<img src=x onerror='window.pwned=1'>"


def row(browser: WebDriver, key: str) -> list[str]:
    for tr in browser.find_elements(By.CSS_SELECTOR, "tr.limit-row"):
        if tr.get_attribute("data-key") == key:
            return [td.text for td in tr.find_elements(By.CSS_SELECTOR, "td")]
    raise AssertionError(f"no row for {key!r}")


def test_set_pause_resume_and_delete_a_limit_by_clicking(
        served: tuple[str, Node], browser: WebDriver, shots: Path) -> None:
    db_url, node = served
    page = Page(browser, node.url, shots)
    page.open("/ui/limits")
    browser.find_element(By.ID, "limit-key").send_keys("webhook:api.partner.example")
    browser.find_element(By.ID, "limit-rate").send_keys("50/s")
    browser.find_element(By.ID, "limit-concurrency").send_keys("10")
    page.click("#set-limit button")
    assert "Limit webhook:api.partner.example set: rate 50/s, 10 at once." in page.flash()
    cells = row(browser, "webhook:api.partner.example")
    assert cells[1:4] == ["50/s", "—", "10"] and cells[8] == "set"
    with Tidings(db_url) as t:
        setting = t.limits.get("webhook:api.partner.example").setting
        assert setting is not None and (str(setting.rate), setting.concurrency) == ("50/s", 10)

    form = "tr[data-key='webhook:api.partner.example'] form.pause"
    minutes = browser.find_element(By.CSS_SELECTOR, form + " input[name=minutes]")
    minutes.clear()
    minutes.send_keys("30")
    page.click(form + " button")
    assert "Paused webhook:api.partner.example for 30 min." in page.flash()
    assert row(browser, "webhook:api.partner.example")[7] != "—"
    with Tidings(db_url) as t:
        view = t.limits.get("webhook:api.partner.example")
        assert view.paused_until is not None
        assert 29 * 60_000 <= view.paused_until - t.clock.now_ms() <= 30 * 60_000

    page.click("tr[data-key='webhook:api.partner.example'] form[action$='/resume'] button")
    assert "Resumed webhook:api.partner.example." in page.flash()
    assert row(browser, "webhook:api.partner.example")[7] == "—"
    page.click("tr[data-key='webhook:api.partner.example'] form[action$='/delete'] button",
               confirm=True)
    assert "Deleted the limit webhook:api.partner.example." in page.flash()
    assert [tr.get_attribute("data-key") for tr in browser.find_elements(
        By.CSS_SELECTOR, "tr.limit-row")].count("webhook:api.partner.example") == 0
    with Tidings(db_url) as t:
        assert all(v.key != "webhook:api.partner.example" for v in t.limits.list())
    page.no_console_errors()


def test_current_use_and_a_hostile_key_shown_as_text(
        served: tuple[str, Node], browser: WebDriver, shots: Path) -> None:
    db_url, node = served
    with Tidings(db_url) as t:
        t.limits.set("export", concurrency=3)
        t.limits.set(HOSTILE, rate="5/min")
        now = t.clock.now_ms()
        rule = KeyRule("export:c-1", None, None, 3, "export")
        [granted] = t.store.acquire_limits([LimitClaim("job-1", (rule,), now + 600_000)], now)
        assert granted.granted  # a job of tenant c-1 holds a slot (its lease: 10 min)
    page = Page(browser, node.url, shots)
    page.open("/ui/limits")
    assert row(browser, "export:c-1")[4] == "1"  # in use now, on every node
    assert row(browser, HOSTILE)[0] == HOSTILE  # its text, as written
    assert browser.execute_script("return window.pwned === undefined")
    browser.find_element(By.ID, "limit-key").send_keys("bad key!")
    browser.find_element(By.ID, "limit-rate").send_keys("5/s")
    page.click("#set-limit button")
    assert page.flash().startswith("Failed:")
    page.screenshot("limits")
    page.no_console_errors()
