"""The public status pages (docs/status-pages.md, The public page): ``GET /status/<slug>``
(HTML) and ``GET /status/<slug>/summary.json``, no authentication.

They are plain Quart routes beside the API, like the operational ones (:mod:`web.process.ops`):
outside ``/openapi.json``, and none of the API's middlewares runs for them, so the
per-token and per-account rate limits never apply (they count tokens; a reader has
none) and an API client's limits are never spent by readers. Abuse protection is the
cache itself: whatever the request rate, a page costs the database one read per 10 s
per process (:mod:`web.http.page_cache`), a malformed slug costs nothing, and an unknown
one is cached like a page. Put a CDN or a per-IP limit at the proxy in front if the
bandwidth itself must be bounded.

Responses:

- 200 with the page (``text/html; charset=utf-8``) or the summary
  (``application/json``), gzipped for a reader that accepts it (``Vary:
  Accept-Encoding``; kept gzipped in the cache), ``ETag`` (strong: a hash of the body,
  ``-gzip`` added for the gzip one), ``Cache-Control: public, max-age=10``; a request
  whose ``If-None-Match`` holds that ETag (or ``*``) gets a 304 with no body. The HTML
  carries a ``Content-Security-Policy`` that allows no script and nothing from
  elsewhere (only its inline style), and forms only to this service (the subscribe form,
  :mod:`web.public.subscriptions`).
- 404 for a slug that names no page: an HTML page, or the API's error object
  (``resource_missing``, ``param`` ``slug``) for ``summary.json``; cached 10 s too.
- ``summary.json`` answers every response with ``Access-Control-Allow-Origin: *``.
- 503 (``Retry-After: 5``, ``Cache-Control: no-store``) when the page cannot be read
  (the database is down) and no copy of it is cached: an HTML page saying so, or the
  API's error object (``status_page_unavailable``) for ``summary.json``; with a copy,
  the copy is served.

Rendering (:func:`render_page`) reads the page with ``store.status_pages.public_page``
(rollups, incidents and maintenance, never raw checks; bounded, docs/status-pages.md,
Bounds), then on a worker thread (``trio.to_thread``, at most
``deps.status_render_limiter`` at once: 2) shapes it with
:func:`web.public.status_view.summary`, renders the Jinja2 template
``web/public/templates/status_page.html`` (autoescaped) and the JSON, and gzips and hashes
both: the CPU work of a big page never holds the event loop that runs probes and the API
(only the GIL's switch interval, 5 ms, separates them).
"""

from __future__ import annotations

import json
import time
from typing import Any

import trio
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape
from pydantic_core import to_json
from quart import Response, g
from quart_trio import QuartTrio

from store import StoreError, status_pages

from ..api.status_pages import valid_slug
from ..http.conditional import answer
from ..http.deps import Dependencies
from ..http.errors import ApiError, error_body
from ..http.page_cache import MISSING, Rendered, RenderFailed
from .status_view import format_percent, summary

__all__ = [
    "CACHE_CONTROL",
    "CSP",
    "HTML",
    "PAGE_HEADERS",
    "TEMPLATES",
    "add_status_page_routes",
    "json_error",
    "missing_page",
    "render_page",
    "summary_json",
    "unavailable_page",
]

CACHE_CONTROL = "public, max-age=10"
CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; base-uri 'none'; "
    "form-action 'self'"
)
HTML = "text/html; charset=utf-8"
PAGE_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff"}
"""Headers of every answer of ``GET /status/<slug>``, whatever its status."""


def _utc(epoch: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(epoch))


def _iso(epoch: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _words(value: str) -> str:
    return value.replace("_", " ").capitalize()


_ENV = Environment(
    loader=PackageLoader("web.public", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


def _bars(
    days: list[dict[str, Any]],
    cells: dict[tuple[str, float | None], tuple[str, str]],
    dates: dict[str, str],
) -> Markup:
    """The ``<li>`` of a component's daily bars (``days``: its ``days`` in
    :func:`web.public.status_view.summary`), built here rather than in the template: for
    9,000 bars (100 components x 90 days) a template loop took 43 ms, and a cold render
    must stay small (docs/status-pages.md, Built for the stampede; bench/RESULTS.md, Status
    pages). Each bar is
    ``<li class="bar" data-level="LEVEL"><span>DATE: PERCENT uptime</span></li>``
    (docs/status-pages.md, HTML hooks): its date and percentage once, as text
    (docs/status-pages.md, The public page: not by colour alone; what a screen reader
    reads), visually hidden and shown above the bars while the bar is hovered (the page's
    style). Dates, levels and percentages are made by :mod:`web.public.status_view` from
    numbers; they are escaped all the same, each distinct one once a page: ``cells`` maps
    a ``(level, uptime_percent)`` to its escaped level and label, ``dates`` a date to its
    escaped text (both shared by the page's components; a page has a few distinct cells
    and 90 dates, against 9,000 bars)."""
    parts = []
    for d in days:
        date = d["date"]
        text = dates.get(date)
        if text is None:
            text = dates[date] = str(escape(date))
        key = (d["level"], d["uptime_percent"])
        cell = cells.get(key)
        if cell is None:
            percent = key[1]
            label = format_percent(percent) + ("" if percent is None else " uptime")
            cell = cells[key] = (str(escape(key[0])), str(escape(label)))
        parts.append(f'<li class="bar" data-level="{cell[0]}"><span>{text}: {cell[1]}</span></li>')
    return Markup("".join(parts))


def _count(number: int) -> str:
    return f"{number:,}"


_ENV.filters.update(utc=_utc, iso=_iso, words=_words, percent=format_percent, count=_count)
TEMPLATES = _ENV
"""The public pages' Jinja2 environment (``web/public/templates``, autoescaped, with the
filters above: ``utc``, ``iso``, ``words``...), shared by the acknowledge pages
(:mod:`web.public.alert_ack`)."""
_PAGE = _ENV.get_template("status_page.html")
_MISSING_HTML = _ENV.get_template("status_missing.html").render().encode()
_UNAVAILABLE_HTML = _ENV.get_template("status_unavailable.html").render().encode()


def _groups(components: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Components grouped by ``group`` in order of first appearance; ungrouped ones
    form their own unnamed groups where they stand."""
    groups: list[dict[str, Any]] = []
    named: dict[str, dict[str, Any]] = {}
    for c in components:
        name = c["group"]
        if name is None:
            if not groups or groups[-1]["name"] is not None:
                groups.append({"name": None, "components": []})
            groups[-1]["components"].append(c)
        elif name in named:
            named[name]["components"].append(c)
        else:
            named[name] = {"name": name, "components": [c]}
            groups.append(named[name])
    return groups


async def render_page(deps: Dependencies, slug: str) -> Rendered:
    """Read and render the page of ``slug`` now (``deps.clock``): its HTML and its
    summary JSON, or :data:`~web.http.page_cache.MISSING`. The rendering runs on a worker
    thread of ``deps.status_render_limiter`` (module docstring); a reader cancelled
    meanwhile waits for it (tens of milliseconds: the page is bounded).

    Raises:
        StoreError: the page could not be read.
    """
    data = await deps.db.run(status_pages.public_page, slug, int(deps.clock()))
    if data is None:
        return MISSING
    return await trio.to_thread.run_sync(_render, data, limiter=deps.status_render_limiter)


def _render(data: status_pages.PublicPage) -> Rendered:
    """The page of ``data`` rendered (pure CPU work; run on a worker thread)."""
    shown = summary(data)
    cells: dict[tuple[str, float | None], tuple[str, str]] = {}
    dates: dict[str, str] = {}
    components = [{**c, "bars": _bars(c["days"], cells, dates)} for c in shown["components"]]
    html = _PAGE.render(s=shown, groups=_groups(components))
    return Rendered.page(html.encode(), summary_json(shown))


def summary_json(shown: dict[str, Any]) -> bytes:
    """``shown`` (a :func:`web.public.status_view.summary`) as the body of
    ``summary.json``: compact UTF-8 JSON, the bytes ``json.dumps(shown, separators=(",",
    ":"), ensure_ascii=False)`` gives, written by pydantic-core's serializer (Rust) in
    about a fifth of the time (a 100-component page's 9,000 days: 19 ms against 3.6 ms,
    measured on the bench's page). Its floats are the summary's percentages, multiples of
    0.001 from 0 to 100, written alike by both (``tests/web/test_status_view.py`` checks
    every one of them)."""
    return to_json(shown)


def add_status_page_routes(app: QuartTrio, deps: Dependencies) -> None:
    """Add ``/status/<slug>`` and ``/status/<slug>/summary.json`` to ``app`` (module
    docstring), served from ``deps.status_cache``."""

    async def rendered(slug: str) -> Rendered:
        if not valid_slug(slug):
            return MISSING
        return await deps.status_cache.get(slug, lambda s: render_page(deps, s))

    @app.route("/status/<slug>", methods=["GET"], provide_automatic_options=False)
    async def status_page(slug: str) -> Response:
        try:
            page = await rendered(slug)
        except (RenderFailed, StoreError):
            return unavailable_page()
        if not page.found:
            return missing_page()
        return answer(
            page.html,
            page.html_gzip,
            page.html_etag,
            HTML,
            PAGE_HEADERS,
            cache_control=CACHE_CONTROL,
        )

    @app.route("/status/<slug>/summary.json", methods=["GET"], provide_automatic_options=False)
    async def status_summary(slug: str) -> Response:
        cors = {"Access-Control-Allow-Origin": "*", "X-Content-Type-Options": "nosniff"}
        try:
            page = await rendered(slug)
        except (RenderFailed, StoreError):
            error = ApiError(
                "status_page_unavailable", "the page cannot be read right now; retry later"
            )
            return json_error(error, {**cors, "Retry-After": "5", "Cache-Control": "no-store"})
        if not page.found:
            error = ApiError("resource_missing", "no such status page", param="slug")
            return json_error(error, {**cors, "Cache-Control": CACHE_CONTROL})
        return answer(
            page.json,
            page.json_gzip,
            page.json_etag,
            "application/json",
            cors,
            cache_control=CACHE_CONTROL,
        )


def missing_page() -> Response:
    """The 404 page of a slug that names no status page (``main.status-missing``),
    cached like a page (module docstring); also the answer of its feeds
    (:mod:`web.public.status_feeds`)."""
    headers = {"Cache-Control": CACHE_CONTROL, **PAGE_HEADERS}
    return Response(_MISSING_HTML, status=404, headers=headers, content_type=HTML)


def unavailable_page() -> Response:
    """The 503 page (``main.status-unavailable``, ``Retry-After: 5``, never cached) of a
    page that cannot be read and has no cached copy (module docstring)."""
    headers = {"Retry-After": "5", "Cache-Control": "no-store", **PAGE_HEADERS}
    return Response(_UNAVAILABLE_HTML, status=503, headers=headers, content_type=HTML)


def json_error(error: ApiError, headers: dict[str, str]) -> Response:
    """``error`` in the API's error shape (``application/json``), with ``headers``; the
    public surfaces' error response (status pages' ``summary.json``, badges)."""
    body = json.dumps(error_body(error, g.request_id), separators=(",", ":"))
    return Response(body, status=error.status, headers=headers, content_type="application/json")
