"""A real headless browser for tests that look at a page as a person does: Debian's Chromium driven by
Selenium through Debian's chromedriver (nothing is downloaded: the browser comes from `apt-get install
chromium chromium-driver`, which `.ci/run` does). A missing browser fails the test, never skips it.

`open_page` loads a local file and returns what the page did: the URL of every request it made (from
Chrome's performance log) and its console errors, so a test can require a page to be offline.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
# Without the background-networking flags Chromium keeps trying hosts this closed network refuses.
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=1400,1000")


@dataclass
class Page:
    driver: Any  # selenium WebDriver
    requests: list[str]
    console_errors: list[str]

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)


@contextmanager
def chromium(profile_dir: Path) -> Iterator[Any]:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).is_file()]
    if missing:
        pytest.fail(f"headless browser tests need Debian's Chromium: apt-get install -y chromium chromium-driver "
                    f"(missing: {', '.join(missing)})")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile_dir}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def open_page(driver: Any, path: Path) -> Page:
    """Load `path` (file://), wait until it and its images finished loading, collect requests and errors."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get_log("performance")  # drop what an earlier page left
    driver.get(Path(path).resolve().as_uri())
    WebDriverWait(driver, 30).until(lambda d: d.execute_script(
        "return document.readyState === 'complete' && Array.from(document.images).every(i => i.complete)"))
    requests = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            requests.append(message["params"]["request"]["url"])
    errors = [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    return Page(driver, requests, errors)


# the browser's own pages and resources (its start page, fonts of its UI), not the page's
INTERNAL = ("chrome:", "chrome-untrusted:", "chrome-extension:", "about:", "devtools:")


def offline_problems(page: Page) -> list[str]:
    """Requests that left the machine's files (anything but file: and data: URLs, the browser's own
    resources aside) and console errors."""
    return [f"request {url}" for url in page.requests if not url.startswith(("file:", "data:", *INTERNAL))] + \
        [f"console {message}" for message in page.console_errors]


def file_requests(page: Page) -> list[str]:
    return [url for url in page.requests if url.startswith("file:")]
