"""A real headless browser for end-to-end tests: Debian's `chromium` driven through its
`chromium-driver` by Selenium. Nothing is downloaded at run time: Selenium is given both binaries,
so its driver manager never runs.

`ConsolePage` drives the web console the way a user does and keeps a screenshot of each step in
an artifact folder (printed at the end of the run).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

# What works as root on a machine without a display or a GPU, with nothing phoning home.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1440,1000",
)
WAIT_SECONDS = 30.0


def browser_binaries() -> tuple[str, str]:
    """(chromium, chromedriver); skips when either is missing, fails instead under CI=true."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if chromium and driver:
        return chromium, driver
    reason = (
        "the console's browser tests need Debian's chromium and chromium-driver "
        "(apt-get install chromium chromium-driver)"
    )
    if os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(f"{reason} (required under CI=true)", pytrace=False)
    pytest.skip(reason)


def start_chromium(chromium: str, driver: str) -> webdriver.Chrome:
    """A fresh headless Chromium with a profile of its own (removed with the process's temp dir)."""
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tempfile.mkdtemp(prefix='agentmesh-chromium-')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))


class ConsolePage:
    """The web console in one browser, with helpers that wait for what a user would see."""

    def __init__(self, driver: webdriver.Chrome, base_url: str, artifacts: Path, test_name: str) -> None:
        self.driver = driver
        self.base_url = base_url
        self.artifacts = artifacts
        self.test_name = test_name
        self._shots = 0

    def open(self, fragment: str = "") -> None:
        self.driver.get(f"{self.base_url}/{fragment}")

    def shot(self, name: str) -> Path:
        """Saves a screenshot of the whole page as `<test>-<n>-<name>.png`."""
        self._shots += 1
        path = self.artifacts / f"{self.test_name}-{self._shots:02d}-{name}.png"
        # The full page, not only the window: set the window to the document's height first.
        height = self.driver.execute_script("return Math.max(document.body.scrollHeight, 1000)")
        self.driver.set_window_size(1440, min(int(height), 4000))
        self.driver.save_screenshot(str(path))
        self.driver.set_window_size(1440, 1000)
        return path

    def wait(
        self, condition: Callable[[webdriver.Chrome], Any], what: str, timeout: float = WAIT_SECONDS
    ) -> Any:
        """Polls `condition` until it returns something truthy. The console redraws live views
        as events arrive, so an element found a moment ago may be gone: that counts as not yet."""
        waiting = WebDriverWait(
            self.driver, timeout, poll_frequency=0.05, ignored_exceptions=(StaleElementReferenceException,)
        )
        return waiting.until(condition, message=what)

    def text(self, css: str, what: str | None = None) -> str:
        """The text of the first displayed element matching `css`, read in one go."""
        return self.wait(lambda _: self.find(css, what).text, what or f"{css} readable")

    def click(self, css: str, what: str | None = None) -> None:
        def clicked(_: webdriver.Chrome) -> bool:
            self.find(css, what).click()
            return True

        self.wait(clicked, what or f"{css} clicked")

    def find(self, css: str, what: str | None = None, timeout: float = WAIT_SECONDS) -> WebElement:
        """The first element matching `css` once it is displayed."""

        def shown(driver: webdriver.Chrome) -> WebElement | bool:
            for element in driver.find_elements(By.CSS_SELECTOR, css):
                if element.is_displayed():
                    return element
            return False

        return self.wait(shown, what or f"{css} shown", timeout)

    def all(self, css: str) -> list[WebElement]:
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def texts(self, css: str) -> list[str]:
        return [element.text for element in self.all(css)]

    def sign_in(self, email: str, password: str) -> None:
        self.find("input[name=email]", "the sign-in form").clear()
        self.find("input[name=email]").send_keys(email)
        self.find("input[name=password]").clear()
        self.find("input[name=password]").send_keys(password)
        self.find("button[type=submit]").click()

    def script_errors(self) -> list[str]:
        """Errors the page's scripts logged; refused requests (a 400 the test provoked) are not."""
        return [
            entry["message"]
            for entry in self.driver.get_log("browser")
            if entry["level"] == "SEVERE" and "Failed to load resource" not in entry["message"]
        ]

    def loaded_urls(self) -> list[str]:
        """Every URL the page has loaded (its document, scripts, styles, images, API calls)."""
        return self.driver.execute_script(
            "return [location.href, ...performance.getEntriesByType('resource').map(e => e.name)]"
        )


@contextlib.contextmanager
def console_page(
    binaries: tuple[str, str], base_url: str, artifacts: Path, test_name: str
) -> Iterator[ConsolePage]:
    """A fresh browser on the console at `base_url`; once the test is done, it must have logged no
    script error and loaded nothing from another origin. Its last screen is kept either way."""
    driver = start_chromium(*binaries)
    page = ConsolePage(driver, base_url, artifacts, test_name)
    try:
        yield page
        assert page.script_errors() == []
        foreign = [url for url in page.loaded_urls() if not url.startswith(base_url + "/")]
        assert foreign == [], "the console loaded something from elsewhere"
    finally:
        page.shot("last")
        driver.quit()
