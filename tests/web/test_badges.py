"""The public badges and their key (docs/badges.md): ``POST`` and ``DELETE
/monitors/:id/badge-key``, and ``/badges/<badge_key>/status.svg``, ``uptime.svg`` and
``response-time.svg`` through the real app on a real database, with the app's clock (and
the public cache's) held by the test, over a history written through the store's batch
path. Each badge is parsed with the standard library's XML parser."""

from __future__ import annotations

import json
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import pytest
import trio

from store import Database
from tests.api import Api, EngineLike
from tests.store.helpers import known_history
from tests.web.helpers import assert_error, expect
from tests.web.status_helpers import Clock, fetch, status_deps
from tests.web.test_status_public_hostile import down_client
from web.http.deps import Dependencies
from web.public.badge_svg import (
    badge,
    format_ms,
    format_uptime,
    response_time_colour,
    text_width,
    uptime_colour,
)

if TYPE_CHECKING:
    from quart.typing import TestClientProtocol

__all__ = ["down_client"]  # the app on a database that is not there (a fixture)

HOUR = 3600
NOW = int(time.time())
SVG_NS = "{http://www.w3.org/2000/svg}"
NAME = 'api <&> "x"'


@pytest.fixture
def clock() -> Clock:
    return Clock(float(NOW))


@pytest.fixture
def deps(db: Database, engine: EngineLike, clock: Clock) -> Dependencies:
    """The app's dependencies with ``clock`` as its wall clock and the public cache's."""
    return status_deps(db, engine, clock)


async def _history(db: Database) -> str:
    """:func:`~tests.store.helpers.known_history` created 3 h ago with 120 ms checks: over
    any range holding its 2 h, uptime is 6600 / 7200 s and p95 about 120 ms."""
    return await known_history(db, NOW - 3 * HOUR, response_time_ms=120.0)


def _parse(body: str) -> dict[str, Any]:
    """A badge's SVG parsed: its root attributes, title, and drawn texts."""
    root = ET.fromstring(body)
    assert root.tag == f"{SVG_NS}svg" and root.get("role") == "img"
    title = root.find(f"{SVG_NS}title")
    assert title is not None
    texts = [t.text for t in root.iter(f"{SVG_NS}text")]
    return {"aria": root.get("aria-label"), "title": title.text, "texts": texts, "root": root}


async def _badge(api: Api, path: str) -> tuple[int, Any, str]:
    return await fetch(api.client, path)


async def test_badges_show_status_uptime_and_p95(api: Api, db: Database, clock: Clock) -> None:
    with trio.fail_after(20):
        mid = await _history(db)
        expect(await api.patch(f"/monitors/{mid}", json={"name": NAME}))
        assert expect(await api.get(f"/monitors/{mid}"))["badge_key"] is None
        key = expect(await api.post(f"/monitors/{mid}/badge-key"))["badge_key"]
        assert re.fullmatch("[0-9a-f]{32}", key)

        status, headers, body = await _badge(api, f"/badges/{key}/status.svg")
        assert status == 200, body
        assert headers["Content-Type"] == "image/svg+xml"
        assert headers["Cache-Control"] == "public, max-age=10" and headers["ETag"]
        shown = _parse(body)
        assert shown["aria"] == shown["title"] == f"{NAME}: up"
        assert shown["texts"] == [NAME, NAME, "up", "up"]
        assert "&lt;&amp;&gt;" in body  # the name is text, escaped
        for secret in (mid, "127.0.0.1", "mon_", key):
            assert secret not in body
        again = await fetch(
            api.client, f"/badges/{key}/status.svg", {"If-None-Match": headers["ETag"]}
        )
        assert again[0] == 304

        # 6600 s up, 600 s down: 91.666...%, cut (never rounded up) to 91.66%, red
        for days in ("1", "7", "30", "90"):
            status, headers, body = await _badge(api, f"/badges/{key}/uptime.svg?days={days}")
            assert status == 200 and headers["Content-Type"] == "image/svg+xml", body
            shown = _parse(body)
            assert shown["aria"] == shown["title"] == f"uptime {days}d: 91.66%"
            assert shown["texts"][2:] == ["91.66%", "91.66%"]
            assert 'fill="#e05d44"' in body
        default = _parse((await _badge(api, f"/badges/{key}/uptime.svg"))[2])
        assert default["title"] == "uptime 30d: 91.66%"

        status, headers, body = await _badge(api, f"/badges/{key}/response-time.svg")
        assert status == 200 and headers["Content-Type"] == "image/svg+xml", body
        shown = _parse(body)
        value = shown["texts"][2]
        assert shown["title"] == f"p95 24h: {value}" and value.endswith(" ms")
        assert abs(int(value.removesuffix(" ms")) - 120) <= 6  # the histogram: within 5 %

        # a monitor with no history in range: no data, grey
        clock.t = NOW + 40 * 86_400
        empty = _parse((await _badge(api, f"/badges/{key}/uptime.svg?days=1"))[2])
        assert empty["title"] == "uptime 1d: no data"


async def test_the_key_rotates_and_turns_off(api: Api, db: Database) -> None:
    with trio.fail_after(20):
        mid = await _history(db)
        first = expect(await api.post(f"/monitors/{mid}/badge-key"))["badge_key"]
        assert (await _badge(api, f"/badges/{first}/status.svg"))[0] == 200
        unknown = await _badge(api, f"/badges/{'0' * 32}/status.svg")
        assert unknown[0] == 404 and unknown[1]["Cache-Control"] == "public, max-age=10"
        error = json.loads(unknown[2])["error"]
        assert (error["code"], error["param"]) == ("resource_missing", "badge_key")
        second = expect(await api.post(f"/monitors/{mid}/badge-key"))["badge_key"]
        assert second != first and re.fullmatch("[0-9a-f]{32}", second)
        # the old key's cached badge is dropped at once (on this node), not served 10 s more
        old = await _badge(api, f"/badges/{first}/status.svg")
        assert (old[0], old[2]) == (404, unknown[2].replace(_rid(unknown[2]), _rid(old[2])))
        paths = ("status.svg", "uptime.svg?days=7", "response-time.svg")
        for path in paths:
            assert (await _badge(api, f"/badges/{second}/{path}"))[0] == 200
        off = expect(await api.delete(f"/monitors/{mid}/badge-key"))
        assert off["badge_key"] is None and off["id"] == mid
        for path in paths:
            assert (await _badge(api, f"/badges/{second}/{path}"))[0] == 404
        for malformed in ("nothex", second.upper(), second + "0"):
            assert (await _badge(api, f"/badges/{malformed}/status.svg"))[0] == 404
        # no event carries the key
        events = expect(await api.get("/events", query={"type": "monitor.*"}))["data"]
        assert first not in str(events) and second not in str(events)


def _rid(body: str) -> str:
    """The ``request_id`` of an error body (the only part two 404s may differ in)."""
    return str(json.loads(body)["error"]["request_id"])


async def test_bad_days_and_permissions(
    api: Api, db: Database, api_for: Callable[..., Awaitable[Api]]
) -> None:
    with trio.fail_after(20):
        mid = await _history(db)
        key = expect(await api.post(f"/monitors/{mid}/badge-key"))["badge_key"]
        for bad in ("2", "30d", "", "-1", "7&days=30"):
            status, _, body = await _badge(api, f"/badges/{key}/uptime.svg?days={bad}")
            assert status == 400, (bad, body)
            error = json.loads(body)["error"]
            assert (error["code"], error["param"]) == ("invalid_parameter", "days")
        reader = await api_for(permissions=["monitors.read"])
        assert_error(await reader.post(f"/monitors/{mid}/badge-key"), 403, "missing_permission")
        assert_error(await reader.delete(f"/monitors/{mid}/badge-key"), 403, "missing_permission")
        other = await api_for(account="other")
        assert_error(await other.post(f"/monitors/{mid}/badge-key"), 404, "resource_missing")
        assert expect(await api.get(f"/monitors/{mid}"))["badge_key"] == key


@pytest.mark.parametrize(
    ("percent", "shown", "colour"),
    [
        (100.0, "100%", "#4c1"),
        (99.999, "99.99%", "#4c1"),
        (99.9, "99.90%", "#4c1"),
        (99.89, "99.89%", "#97ca00"),
        (98.5, "98.50%", "#a4a61d"),
        (97.0, "97.00%", "#dfb317"),
        (95.0, "95.00%", "#fe7d37"),
        (94.99, "94.99%", "#e05d44"),
        (None, "no data", "#9f9f9f"),
    ],
)
def test_uptime_is_cut_and_coloured_by_the_documented_thresholds(
    percent: float | None, shown: str, colour: str
) -> None:
    assert (format_uptime(percent), uptime_colour(percent)) == (shown, colour)


def test_p95_colours_and_text_widths() -> None:
    shown = [(format_ms(ms), response_time_colour(ms)) for ms in (200, 499.6, 1000, 2000, 2500)]
    assert shown == [
        ("200 ms", "#4c1"),
        ("500 ms", "#97ca00"),
        ("1.00 s", "#dfb317"),
        ("2.00 s", "#fe7d37"),
        ("2.50 s", "#e05d44"),
    ]
    assert (format_ms(None), response_time_colour(None)) == ("no data", "#9f9f9f")
    # wider letters make a wider badge; a long name is cut to 60 characters
    assert text_width("WWW") > text_width("iii") > 0
    long = badge("x" * 200, "up", "#4c1")
    assert len(long.label) == 60 and long.label.endswith("…")
    assert badge("a\x01b", "up", "#4c1").label == "a?b"  # XML cannot hold \x01


async def test_with_the_database_down_a_badge_is_a_503(down_client: TestClientProtocol) -> None:
    with trio.fail_after(30):
        for path in ("status.svg", "uptime.svg?days=7", "response-time.svg"):
            response = await down_client.get(f"/badges/{'a' * 32}/{path}")
            body = json.loads(await response.get_data())
            assert_error(
                (response.status_code, body, response.headers),
                503,
                "badge_unavailable",
                param=None,
                type="api_error",
            )
            assert response.headers["Retry-After"] == "5"
            assert response.headers["Cache-Control"] == "no-store"
