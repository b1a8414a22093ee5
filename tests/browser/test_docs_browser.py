"""The API reference at ``/docs`` in a real browser: Debian's headless Chromium, driven
by selenium, on a network where every host but 127.0.0.1 resolves to nothing
(tests/browser/chromium.py), loads the page from the app served by Hypercorn in this
test, as ``uptrio serve`` serves it.

Swagger UI must render every operation of ``/openapi.json`` from the service's own
files: no request leaves loopback, and the console shows no error (a script or style the
page's Content-Security-Policy refused would be one). A screenshot goes to
``tests/artifacts/browser/docs-1440.png`` (ignored by git).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser.chromium import off_loopback, open_chromium, requested_urls
from tests.web.helpers import ROOT, serve_live
from web.http.deps import Dependencies
from web.process.app import create_app
from web.routes import ROUTES

ARTIFACTS = ROOT / "tests" / "artifacts" / "browser"


@pytest.fixture
async def base_url(deps: Dependencies) -> AsyncIterator[str]:
    """The app served by Hypercorn's trio worker on 127.0.0.1 (a port the OS picks)."""
    async with serve_live(create_app(deps)) as base:
        yield base


_READ = """
return {
  title: document.querySelector('.info .title') && document.querySelector('.info .title').innerText,
  operations: [...document.querySelectorAll('.opblock')].map(o => ({
    method: o.querySelector('.opblock-summary-method').innerText,
    path: o.querySelector('.opblock-summary-path').getAttribute('data-path'),
    summary: (o.querySelector('.opblock-summary-description') || {}).innerText,
  })),
  authorize: !!document.querySelector('.btn.authorize'),
};
"""


def _read_docs(url: str) -> dict[str, Any]:
    """Load ``url``, wait for Swagger UI to render every operation; what the browser saw
    (blocking)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with open_chromium(1440, 900) as driver:
        driver.get(url)
        WebDriverWait(driver, 15).until(
            lambda d: len(d.find_elements("css selector", ".opblock")) >= len(ROUTES)
        )
        seen: dict[str, Any] = driver.execute_script(_READ)
        driver.save_screenshot(str(ARTIFACTS / "docs-1440.png"))
        seen["console"] = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        seen["requests"] = requested_urls(driver)
    return seen


async def test_swagger_ui_renders_every_operation_from_local_files(base_url: str) -> None:
    with trio.fail_after(40):
        seen = await trio.to_thread.run_sync(_read_docs, f"{base_url}/docs", abandon_on_cancel=True)
    print(f"\nscreenshot: {ARTIFACTS}/docs-1440.png")
    assert seen["title"].startswith("Uptrio"), seen["title"]
    shown = {(o["method"], o["path"], o["summary"]) for o in seen["operations"]}
    expected = {(r.method, re.sub(r"<(\w+)>", r"{\1}", r.path), r.summary) for r in ROUTES}
    assert shown == expected
    assert seen["authorize"], "no Authorize button for the bearer token"
    assert not seen["console"], seen["console"]
    assert not off_loopback(seen["requests"]), seen["requests"]
    assert f"{base_url}/openapi.json" in seen["requests"]
