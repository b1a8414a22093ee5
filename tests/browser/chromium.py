"""Debian's headless Chromium, driven by selenium through Debian's ``chromium-driver``.

``make test-tools`` installs both (``/usr/bin/chromium``, ``/usr/bin/chromedriver``);
selenium is in the ``test`` extra. Selenium is given both paths, so Selenium Manager
never looks for (or downloads) a browser or a driver of its own.

Chromium starts as this machine needs it (root, no display, a closed network): headless,
no sandbox, no GPU, no QUIC, none of its background connections, a new empty profile.
Every host name but 127.0.0.1 resolves to nothing (``--host-resolver-rules``), so a page
that names an outside asset cannot reach it; `requested_urls` still lists the request,
so a test can tell that it was made.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.chrome.webdriver import WebDriver

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
)
PAGE_LOAD_SECONDS = 20


@contextmanager
def open_chromium(width: int = 1440, height: int = 900) -> Iterator[WebDriver]:
    """A headless Chromium with a ``width`` x ``height`` viewport and a profile of its own,
    recording its network log; quit on exit. Page loads and scripts have time limits."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    assert not missing, f"{missing} missing: `make test-tools` installs Debian's packages"
    with tempfile.TemporaryDirectory(prefix="uptrio-chromium-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
        driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
        try:
            driver.set_page_load_timeout(PAGE_LOAD_SECONDS)
            driver.set_script_timeout(10)
            driver.get("about:blank")
            requested_urls(driver)  # drop what the browser loaded for itself
            yield driver
        finally:
            driver.quit()


def requested_urls(driver: WebDriver) -> list[str]:
    """The URLs of the requests the browser sent since the last call (its network log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def off_loopback(urls: list[str]) -> list[str]:
    """The ``urls`` that would leave this machine: any network scheme to a host other
    than 127.0.0.1, localhost or ::1 (``data:`` and ``about:`` stay inside)."""
    return [
        url
        for url in urls
        if urlsplit(url).scheme not in ("data", "about", "blob")
        and urlsplit(url).hostname not in ("127.0.0.1", "localhost", "::1")
    ]


def set_viewport(driver: WebDriver, width: int, height: int) -> None:
    """Make the viewport exactly ``width`` x ``height`` CSS pixels (Chromium's device
    metrics override: the window's own size leaves room for browser chrome)."""
    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)


def fit_viewport(driver: WebDriver, width: int) -> tuple[int, int]:
    """Make the viewport ``width`` wide and as tall as the page (so that a screenshot
    shows the whole page); returns the document's (scrollWidth, clientWidth)."""
    set_viewport(driver, width, 800)
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    set_viewport(driver, width, max(height, 400))
    scroll, client = driver.execute_script(
        "const d = document.documentElement; return [d.scrollWidth, d.clientWidth]"
    )
    return int(scroll), int(client)
