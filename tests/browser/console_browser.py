"""Fixtures of the browser tests (imported by each test module; not a conftest.py, whose
name would shadow the suite's own `conftest` module): a real `tidings serve` and a real
headless Chromium (Debian's `chromium` and
`chromium-driver`, which scripts/test installs), driven by Selenium.

Screenshots go to TIDINGS_TEST_SCREENSHOTS when it is set (`docs/screenshots` to refresh
the committed ones), otherwise to the test's temporary folder.

TIDINGS_TEST_NOW (ISO 8601 with an offset, e.g. `2026-12-03T15:05:00Z`) runs the seed and
the node as if each module started then: both read one stepped clock (the node's test-only
TIDINGS_CLOCK_OFFSET_FILE), so a test whose outcome could depend on the hour of the run can
be tried at any hour. The browser's own clock is not moved.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from conftest import BACKENDS, module_pg_schema, pg_url
from tidings.clock import Clock, SteppedClock, to_ms

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Node:
    """`tidings serve` as its own process; `stop()` ends it."""

    def __init__(self, db_url: str, folder: Path, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        clean = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
        self.log = folder / f"serve-{self.port}.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tidings", "serve", "--db", db_url, "--port",
                 str(self.port)], cwd=folder, env={**clean, **(env or {})}, stdout=out,
                stderr=out)
        deadline = time.monotonic() + 90  # a loaded 2-core machine starts Python slowly
        while True:
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"tidings serve did not start: {self.log.read_text()}")
            time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="session")
def browser() -> Iterator[WebDriver]:
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.fail("the browser tests need Debian's chromium and chromium-driver "
                    "(apt-get install chromium chromium-driver; ./scripts/test does it)")
    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900", "--force-device-scale-factor=1",
                "--disable-extensions", "--no-first-run"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="session")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get("TIDINGS_TEST_SCREENSHOTS")
    folder = Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class Page:
    """The browser pointed at one node, with the checks every page gets."""

    def __init__(self, driver: WebDriver, base: str, shots: Path) -> None:
        self.d = driver
        self.base = base
        self.shots = shots
        driver.delete_all_cookies()

    def open(self, path: str) -> None:
        self.d.get(self.base + path)
        self.d.get_log("browser")  # (clears the log of what the previous page said)
        self.d.get(self.base + path)
        self.no_console_errors()

    def no_console_errors(self) -> None:
        """Nothing went wrong in the page: no script error, no CSP violation, no 404."""
        severe = [e for e in self.d.get_log("browser") if e["level"] == "SEVERE"]
        assert severe == [], severe

    def text(self) -> str:
        return str(self.d.find_element(By.TAG_NAME, "body").text)

    def click(self, css: str, *, confirm: bool = False) -> None:
        """Click what submits a form, and wait for the page it leads to (the old page is
        gone, the new one loaded): reading the old page's flash would be a race."""
        from selenium.common.exceptions import WebDriverException

        element = self.d.find_element(By.CSS_SELECTOR, css)
        # A mark on the old document's window: gone once the new page is there. (Asking
        # chromedriver whether the old <html> went stale can fail mid-navigation with an
        # "unhandled inspector error" instead of answering.)
        self.d.execute_script("window.__tidingsOldPage = true")
        element.click()
        if confirm:
            WebDriverWait(self.d, 10).until(lambda d: d.switch_to.alert).accept()
        WebDriverWait(self.d, 30, ignored_exceptions=(WebDriverException,)).until(
            lambda d: d.execute_script(
                "return window.__tidingsOldPage === undefined"
                " && document.readyState === 'complete'"))

    def flash(self) -> str:
        return str(self.d.find_element(By.CSS_SELECTOR, ".flash").text)

    def until(self, check: Callable[[], Any], timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            assert time.monotonic() < deadline, "condition not met in time"
            time.sleep(0.2)
            self.d.refresh()

    def screenshot(self, name: str, *, themes: tuple[str, ...] = ("light", "dark"),
                   width: int = 1280) -> None:
        """Full-page screenshots of the current page, once per theme."""
        for theme in themes:
            self.d.add_cookie({"name": "tidings_theme", "value": theme, "path": "/ui"})
            self.d.refresh()
            height = int(self.d.execute_script(
                "return Math.min(document.documentElement.scrollHeight, 2400)"))
            self.d.set_window_size(width, max(height, 500))
            self.d.save_screenshot(str(self.shots / f"{name}-{theme}.png"))
        self.d.delete_cookie("tidings_theme")
        self.d.set_window_size(1280, 900)
        self.d.refresh()

    def tab_reaches(self, css: str, limit: int = 200) -> set[str]:
        """Press Tab from the top of the page; the ids (or texts) of the elements matching
        `css` that keyboard focus reached."""
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.keys import Keys

        wanted = {self._key(e) for e in self.d.find_elements(By.CSS_SELECTOR, css)}
        self.d.execute_script("document.activeElement && document.activeElement.blur();"
                              "window.scrollTo(0, 0)")
        reached: set[str] = set()
        for _ in range(limit):
            ActionChains(self.d).send_keys(Keys.TAB).perform()
            active = self.d.switch_to.active_element
            reached.add(self._key(active))
            if wanted <= reached:
                break
        return wanted - reached

    def _key(self, element: Any) -> str:
        return str(self.d.execute_script(
            "const e = arguments[0]; const f = e.closest('form');"
            "return e.tagName + '|' + (e.id || e.name || e.textContent.trim()) + '|' +"
            " (f ? f.getAttribute('action') : e.getAttribute('href'));", element))


def simulated_clock(folder: Path) -> tuple[Clock | None, dict[str, str]]:
    """(the seed's clock, the node's environment) for TIDINGS_TEST_NOW, if it is set: one
    offset file both read, from now to the chosen instant."""
    chosen = os.environ.get("TIDINGS_TEST_NOW")
    if not chosen:
        return None, {}
    from datetime import datetime

    offset = folder / "clock-offset-ms"
    offset.write_text(str(to_ms(datetime.fromisoformat(chosen), "TIDINGS_TEST_NOW")
                          - time.time_ns() // 1_000_000))
    return SteppedClock(str(offset)), {"TIDINGS_CLOCK_OFFSET_FILE": str(offset)}


@pytest.fixture(scope="module", params=BACKENDS)
def served(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Node]]:
    """One seeded database and one `tidings serve` over it for a whole test module, on
    each backend: tests that change something change their own queue, schedule or
    campaign, so they can share it (starting a node costs seconds)."""
    import seed

    folder = tmp_path_factory.mktemp("console")
    with contextlib.ExitStack() as stack:
        if request.param == "sqlite":
            url = f"sqlite:///{folder}/console.db"
        else:
            url = pg_url(stack.enter_context(module_pg_schema()))
        clock, env = simulated_clock(folder)
        seed.everything(url, clock)
        node = Node(url, folder, env)
        try:
            yield url, node
        finally:
            node.stop()
