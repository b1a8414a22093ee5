"""The public status page in a real browser: Debian's headless Chromium, driven by
selenium, reads ``GET /status/<slug>`` of the real service (``uptrio serve`` with its
engine, a subprocess) as a person would, on a 375 px phone and a 1440 px desktop.

The page covers four monitors of local targets on 127.0.0.1: one up, one down (its
target answers 500, so the engine opens an incident, which gets an update through the
API), one paused and one up in a maintenance window in progress, with another window
scheduled for tomorrow. The test checks the texts a person reads (the overall state, each
component's state, "Under maintenance", the 90 daily bars' dates and percentages, the
open incident and its timeline, the scheduled maintenance), that nothing scrolls sideways
at 375 px, that the text column stays readable
at 1440 px, and that the browser requested nothing off loopback. It saves a screenshot
at each width in ``tests/artifacts/browser/`` (ignored by git; the path is printed).
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import trio
from selenium.webdriver.common.action_chains import ActionChains

from tests.browser.chromium import fit_viewport, off_loopback, open_chromium, requested_urls
from tests.postgres import stop_leftover_server
from tests.targets import open_http_target
from tests.web.helpers import CLI, ROOT, service_env

ARTIFACTS = ROOT / "tests" / "artifacts" / "browser"
_TOKEN = re.compile(r"\n\n(ey[\w-]+\.[\w-]+\.[\w-]+)\n")
_FAST = {"type": "http", "interval_seconds": 1, "timeout_seconds": 1, "failure_threshold": 1}


@asynccontextmanager
async def _service(data_dir: Path) -> AsyncIterator[tuple[str, str]]:
    """``uptrio serve`` with its engine on a loopback port the OS picks: (base URL,
    first token); stopped on exit with SIGTERM (its embedded server stops with it), or
    killed after 10 s, its embedded server then stopped by the test."""
    command = [*CLI, "serve", "--host", "127.0.0.1", "--port", "0"]
    command += ["--data-dir", str(data_dir), "--shutdown-seconds", "2"]
    process = await trio.lowlevel.open_process(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=service_env(), cwd=ROOT
    )
    try:
        assert process.stdout is not None
        out = ""
        with trio.fail_after(30):
            while "listening on" not in out or not _TOKEN.search(out):
                chunk = await process.stdout.receive_some(4096)
                assert chunk, out
                out += chunk.decode()
        base = re.search(r"listening on (http://127\.0\.0\.1:\d+)", out)
        token = _TOKEN.search(out)
        assert base and token, out
        yield base.group(1), token.group(1)
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
                with trio.move_on_after(10):
                    await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
            await stop_leftover_server(data_dir)


async def _ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


async def _wait_status(http: httpx.AsyncClient, monitor: str, status: str) -> None:
    while (await _ok(await http.get(f"/monitors/{monitor}")))["status"] != status:
        await trio.sleep(0.2)


async def _arrange(http: httpx.AsyncClient, up_url: str, down_url: str) -> dict[str, Any]:
    """Four monitors (up, down, paused, up in a window in progress), the incident the down
    one opened with one more update, a window for tomorrow, and a status page over them;
    what the page should show."""
    up = await _ok(await http.post("/monitors", json={"name": "m-up", "url": up_url, **_FAST}), 201)
    down = await _ok(
        await http.post("/monitors", json={"name": "m-down", "url": down_url, **_FAST}), 201
    )
    paused = await _ok(
        await http.post("/monitors", json={"name": "m-paused", "url": up_url, **_FAST}), 201
    )
    search = await _ok(
        await http.post("/monitors", json={"name": "m-search", "url": up_url, **_FAST}), 201
    )
    await _ok(await http.post(f"/monitors/{paused['id']}/pause"))
    await _wait_status(http, up["id"], "up")
    await _wait_status(http, search["id"], "up")
    now = int(time.time())
    windows = [
        {
            "title": "Search index rebuild",
            "description": "Search results may be incomplete.",
            "monitors": [search["id"]],
            "starts_at": now - 60,
            "ends_at": now + 3600,
            "metadata": {"ticket": "OPS-secret-4242"},
        },
        {
            "title": "Network upgrade",
            "monitors": [down["id"], search["id"]],
            "starts_at": now + 86_400,
            "ends_at": now + 86_400 + 1800,
        },
    ]
    for window in windows:
        await _ok(await http.post("/maintenance-windows", json=window), 201)
    await _wait_status(http, down["id"], "down")
    # Today's bar counts whole seconds of each status period: one that began within the
    # second the page renders would show "no data" instead of a figure.
    await trio.sleep(1.5)
    incidents = await _ok(await http.get("/incidents"))
    (incident,) = [i for i in incidents["data"] if i["monitor"] == down["id"]]
    update = "We are restoring the database from a replica."
    await _ok(
        await http.post(f"/incidents/{incident['id']}/updates", json={"message": update}), 201
    )
    components = [
        {"monitor": up["id"], "name": "Website", "group": None},
        {"monitor": down["id"], "name": "Database", "group": None},
        {"monitor": paused["id"], "name": "Legacy API", "group": None},
        {"monitor": search["id"], "name": "Search", "group": None},
    ]
    page = {"name": "Acme status", "slug": "acme-status", "components": components}
    await _ok(await http.post("/status-pages", json=page), 201)
    return {"slug": "acme-status", "incident": incident, "update": update, "windows": windows}


_READ = """
const text = (root, css) => { const e = root.querySelector(css); return e ? e.innerText : null; };
return {
  overall: text(document, '.overall'),
  components: [...document.querySelectorAll('.component')].map(c => ({
    name: text(c, '.component-name'),
    state: text(c, '.component-state'),
    bars: [...c.querySelectorAll('.bars .bar')].map(b => ({
      title: b.getAttribute('title'), text: b.textContent.trim()})),
  })),
  open: [...document.querySelectorAll('.incidents-open .incident')].map(i => ({
    title: text(i, '.incident-title'),
    updates: [...i.querySelectorAll('.incident-timeline li')].map(u => u.innerText),
  })),
  maintenance: [...document.querySelectorAll('.maintenance-window')].map(m => ({
    status: m.dataset.status,
    title: text(m, '.maintenance-title'),
    meta: text(m, '.maintenance-meta'),
    description: text(m, '.maintenance-description'),
    components: text(m, '.maintenance-components'),
  })),
};
"""


def _hover_last_bar(driver: Any) -> dict[str, Any]:
    """Hover the first component's last bar: its label's text, box and the viewport's
    width, as the browser lays them out (blocking)."""
    bar = driver.find_elements("css selector", ".bars .bar")[89]
    ActionChains(driver).move_to_element(bar).perform()
    return driver.execute_script(
        "const s = arguments[0].querySelector('span'); const r = s.getBoundingClientRect();"
        " return {text: s.innerText, width: r.width, left: r.left, right: r.right,"
        " bottom: r.bottom, bar_top: arguments[0].getBoundingClientRect().top,"
        " viewport: document.documentElement.clientWidth}",
        bar,
    )


def _read_page(url: str) -> dict[str, Any]:
    """Load ``url`` at 375 and 1440 px; screenshots; what the browser saw (blocking)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    seen: dict[str, Any] = {}
    with open_chromium(375, 800) as driver:
        driver.get(url)
        seen["title"] = driver.title
        seen["text"] = driver.find_element("tag name", "body").text
        seen["page"] = driver.execute_script(_READ)
        seen["hover"] = _hover_last_bar(driver)
        seen["scroll_375"] = fit_viewport(driver, 375)
        driver.save_screenshot(str(ARTIFACTS / "status-page-375.png"))
        seen["scroll_1440"] = fit_viewport(driver, 1440)
        seen["widest_text_px"] = driver.execute_script(
            "let w = 0; for (const e of document.querySelectorAll('p, li, h1, h2, h3'))"
            " { w = Math.max(w, e.getBoundingClientRect().width); } return w"
        )
        seen["font_px"] = driver.execute_script(
            "return parseFloat(getComputedStyle(document.body).fontSize)"
        )
        driver.save_screenshot(str(ARTIFACTS / "status-page-1440.png"))
        seen["requests"] = requested_urls(driver)
    return seen


async def test_a_person_reads_the_status_page_in_chromium(tmp_path: Path) -> None:
    with trio.fail_after(55):
        async with (
            open_http_target() as up_target,
            open_http_target(mode="error") as down_target,
            _service(tmp_path / "data") as (base, token),
        ):
            headers = {"Authorization": f"Bearer {token}"}
            async with httpx.AsyncClient(base_url=base, headers=headers, timeout=10) as http:
                with trio.fail_after(20):
                    expected = await _arrange(
                        http,
                        f"http://127.0.0.1:{up_target.port}/",
                        f"http://127.0.0.1:{down_target.port}/",
                    )
            url = f"{base}/status/{expected['slug']}"
            seen = await trio.to_thread.run_sync(_read_page, url, abandon_on_cancel=True)
    print(f"\nscreenshots: {ARTIFACTS}/status-page-375.png, status-page-1440.png")
    text, page = seen["text"], seen["page"]
    assert seen["title"] == "Acme status: Partial outage"
    assert "Acme status" in text and "Partial outage" in page["overall"]
    # each state in words, after an icon that screen readers skip (not colour alone)
    states = {c["name"]: c["state"].strip().split(" ", 1)[-1] for c in page["components"]}
    assert states == {
        "Website": "Operational",
        "Database": "Major outage",
        "Legacy API": "Not monitored",
        "Search": "Under maintenance",  # up, but in a window: planned work, not an outage
    }, states
    today = datetime.now(UTC).date()
    days = [str(today - timedelta(days=89 - k)) for k in range(90)]
    for component in page["components"]:
        bars = component["bars"]
        assert [b["text"].split(":")[0] for b in bars] == days, component["name"]
        for bar in bars:  # the date and the percentage as text, once
            assert bar["title"] is None
            assert re.fullmatch(r"\d{4}-\d\d-\d\d: (\d+\.\d\d% uptime|no data)", bar["text"])
    uptime = {
        c["name"]: re.search(r"([\d.]+)% uptime", c["bars"][-1]["text"]) for c in page["components"]
    }
    assert uptime["Website"] and float(uptime["Website"].group(1)) == 100.0
    assert uptime["Database"] and float(uptime["Database"].group(1)) < 100.0
    (incident,) = page["open"]
    assert incident["title"] == "Database is down"  # the component's name, not the monitor's
    assert expected["update"] in incident["updates"][0]  # newest first
    assert len(incident["updates"]) == 2 and "Investigating" in incident["updates"][1]
    assert "m-down" not in text and "m-up" not in text, "a monitor's own name leaked"
    assert "Scheduled maintenance" in text
    in_progress, tomorrow = page["maintenance"]
    windows = expected["windows"]
    when = "%Y-%m-%d %H:%M UTC"
    start, end = (time.strftime(when, time.gmtime(windows[0][k])) for k in ("starts_at", "ends_at"))
    assert in_progress == {
        "status": "in_progress",
        "title": "Search index rebuild",
        "meta": f"In progress · {start} to {end}",
        "description": "Search results may be incomplete.",
        "components": "Affects: Search",
    }, in_progress
    assert tomorrow["status"] == "scheduled" and tomorrow["title"] == "Network upgrade"
    assert tomorrow["meta"].startswith("Scheduled · ") and tomorrow["description"] is None
    assert tomorrow["components"] == "Affects: Database, Search"
    assert "m-search" not in text and "OPS-secret-4242" not in text
    hover = seen["hover"]  # the hovered bar shows its label above the bars, on screen
    assert hover["text"] == page["components"][0]["bars"][-1]["text"], hover
    assert hover["width"] > 50 and hover["left"] >= 0 and hover["right"] <= hover["viewport"]
    assert hover["bottom"] <= hover["bar_top"], hover
    scroll, client = seen["scroll_375"]
    assert scroll <= client, f"horizontal scroll at 375 px: {scroll} > {client}"
    scroll, client = seen["scroll_1440"]
    assert scroll <= client
    assert seen["font_px"] >= 14
    assert 0 < seen["widest_text_px"] <= 1100, "lines too long to read at 1440 px"
    assert not off_loopback(seen["requests"]), seen["requests"]
    assert any(u.startswith(url) for u in seen["requests"])
