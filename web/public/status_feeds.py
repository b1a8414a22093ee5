"""A public status page's feeds (docs/status-pages.md, Feeds): ``GET
/status/<slug>/feed.atom`` (Atom 1.0, RFC 4287) and ``GET /status/<slug>/feed.rss`` (RSS
2.0), no authentication, built with ``feedgen``.

**What they list**: what the page shows, shaped as the page shapes it
(:mod:`web.public.status_view`), nothing more: its incidents (open ones and those
resolved in the last 14 days) with their public timelines, and the occurrences of
maintenance windows covering its components that are in progress or start within 7
days; plus the occurrences of those windows that ended in the last 14 days
(``store.page_maintenance.ended``: title, description and times are public). Newest
first (by each entry's ``updated``), at most :data:`MAX_ENTRIES`. An incident's entry is
updated at its latest shown timeline entry (else its creation); a maintenance
occurrence's at its start, or at its end once ended.

**Entry ids** are stable and say nothing private: ``<page URL>#incident-<h>`` (``<h>``:
80 bits of a SHA-256 of the slug and the incident's id, which is never shown) and
``<page URL>#maintenance-<key>`` (the occurrence's opaque key, made from its window's id
and its start in the store). The page URL is ``--public-url`` plus ``/status/<slug>``;
without ``--public-url``, the base URL of the request.

**Caching** is the page's (:mod:`web.http.page_cache`): both feeds are rendered together,
at most once per 10 s per process, into the same cache as the pages under the key
``<slug>/feeds`` (a slug holds no ``/``), plus the base URL when ``--public-url`` is
unset (so a request's ``Host`` never reaches another reader's copy); ``ETag``, gzip,
304 and ``Cache-Control: public, max-age=10`` as the page. The feeds' own times
(``updated``, ``lastBuildDate``) are the newest entry's, so an unchanged page keeps its
ETag across renders.

Answers: 200 ``application/atom+xml; charset=utf-8`` or ``application/rss+xml;
charset=utf-8``, with ``Access-Control-Allow-Origin: *`` as ``summary.json`` (a web feed
reader or a widget reads them from another origin); an unknown or malformed slug gets the
page's 404 HTML page, and an unreadable page without a cached copy its 503 page
(:mod:`web.public.status_pages`).
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import trio
from feedgen.feed import FeedGenerator
from markupsafe import escape
from quart import Response, request
from quart_trio import QuartTrio

from store import Connection, StoreError, page_maintenance, status_pages

from ..api.status_pages import valid_slug
from ..http.conditional import answer
from ..http.deps import Dependencies
from ..http.page_cache import MISSING, Rendered, RenderFailed
from .status_pages import CACHE_CONTROL, missing_page, unavailable_page
from .status_view import public_maintenance, summary

__all__ = [
    "ATOM",
    "MAX_ENTRIES",
    "RSS",
    "PublicFeed",
    "add_status_feed_routes",
    "feed_entries",
    "render_feeds",
]

ATOM = "application/atom+xml; charset=utf-8"
"""The Atom feed's media type (RFC 4287, 7)."""
RSS = "application/rss+xml; charset=utf-8"
"""The RSS feed's media type."""
MAX_ENTRIES = 50
"""At most this many entries per feed, the newest (docs/status-pages.md, Feeds)."""
_HEADERS = {"Access-Control-Allow-Origin": "*", "X-Content-Type-Options": "nosniff"}
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
"""Characters XML 1.0 cannot carry (its ``Char`` production, 2.2), even escaped."""


def _xml(text: str) -> str:
    """``text`` without the characters XML cannot carry: a title or a message the API
    took with a control character still makes a well-formed feed (lxml refuses them)."""
    return _NOT_XML.sub("", text)


def _utc(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def _words(value: str) -> str:
    return value.replace("_", " ").capitalize()


def _when(epoch: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(epoch))


def _digest(*parts: object) -> str:
    """80 bits of SHA-256 over ``parts`` (hex): an entry's stable, opaque key."""
    text = "\x1f".join(str(p) for p in parts)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _incident_entry(shown: dict[str, Any], key: str) -> dict[str, Any]:
    """An incident of :func:`web.public.status_view.summary` as a feed entry."""
    updates = shown["updates"]
    latest = max([shown["created"], *(u["created"] for u in updates)])
    lines = [
        f"<p>{escape(_words(shown['status']))} · {escape(_words(shown['severity']))} severity"
        f" · started {_when(shown['created'])}"
        + (f" · resolved {_when(shown['resolved_at'])}" if shown["resolved_at"] else "")
        + "</p>"
    ]
    if shown["components"]:
        lines.append(f"<p>Affects: {escape(', '.join(shown['components']))}</p>")
    items = [
        f"<li><strong>{escape(_words(u['status']))}</strong> · {_when(u['created'])}"
        + (f"<br>{escape(u['message'])}" if u["message"] else "")
        + "</li>"
        for u in reversed(updates)
    ]
    if items:
        lines.append("<ul>" + "".join(items) + "</ul>")
    if shown["updates_omitted"]:
        lines.append(f"<p>{shown['updates_omitted']:,} earlier updates are not shown.</p>")
    return {
        "id": f"incident-{key}",
        "title": shown["title"],
        "published": shown["created"],
        "updated": latest,
        "category": shown["status"],
        "content": "".join(lines),
    }


_MAINTENANCE_STATUS = {
    "scheduled": "Scheduled",
    "in_progress": "In progress",
    "completed": "Completed",
}


def _maintenance_entry(shown: dict[str, Any], key: str) -> dict[str, Any]:
    """An occurrence shaped by :func:`web.public.status_view.public_maintenance` as a
    feed entry (``key``: the occurrence's, ``store.page_maintenance``)."""
    status = shown["status"]
    lines = [
        f"<p>{_MAINTENANCE_STATUS[status]} · {_when(shown['starts_at'])} to "
        f"{_when(shown['ends_at'])}</p>"
    ]
    if shown["description"]:
        lines.append(f"<p>{escape(shown['description'])}</p>")
    if shown["components"]:
        lines.append(f"<p>Affects: {escape(', '.join(shown['components']))}</p>")
    return {
        "id": f"maintenance-{key}",
        "title": f"Maintenance: {shown['title']}",
        "published": shown["starts_at"],
        "updated": shown["ends_at"] if status == "completed" else shown["starts_at"],
        "category": "maintenance",
        "content": "".join(lines),
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class PublicFeed:
    """What a page's feeds are rendered from: ``page``, all the page shows
    (``store.status_pages.public_page``), and ``ended``, the maintenance occurrences that
    ended in the last 14 days (``store.page_maintenance.ended``)."""

    page: status_pages.PublicPage
    ended: list[page_maintenance.PublicMaintenance]


async def _read(connection: Connection, slug: str, now: int) -> PublicFeed | None:
    """The :class:`PublicFeed` of ``slug`` at ``now`` (epoch seconds), or None: no such
    page. Runs on the store's side (``deps.db.run``); the page is read without its daily
    figures (a feed shows none: no rollup is read)."""
    data = await status_pages.public_page(connection, slug, now, bars=False)
    if data is None:
        return None
    past = await page_maintenance.ended(connection, data.page.account_id, list(data.monitors), now)
    return PublicFeed(page=data, ended=past)


def feed_entries(feed: PublicFeed) -> list[dict[str, Any]]:
    """The entries of the page read in ``feed``, newest first (by ``updated``, then
    ``published``), at most :data:`MAX_ENTRIES`: ``{"id": fragment of the page URL,
    "title", "published", "updated": epoch s, "category", "content": HTML}``."""
    data = feed.page
    shown = summary(data)
    slug = data.page.slug
    records = [i for i in data.incidents if i.resolved_at is None]
    records += [i for i in data.incidents if i.resolved_at is not None]
    incidents = shown["incidents"]["open"] + shown["incidents"]["resolved"]
    entries = [
        _incident_entry(i, _digest(slug, record.id))
        for record, i in zip(records, incidents, strict=True)
    ]
    components = [c for c in data.page.components if c["monitor"] in data.monitors]
    entries += [
        _maintenance_entry(public_maintenance(m, components, data.now), m.key)
        for m in [*data.maintenance.listed, *feed.ended]
    ]
    entries.sort(key=lambda e: (e["updated"], e["published"], e["id"]), reverse=True)
    return entries[:MAX_ENTRIES]


def _render(feed: PublicFeed, base: str) -> Rendered:
    """Both feeds of ``feed`` with links under ``base`` (pure CPU work; run on a worker
    thread): a :class:`Rendered` whose ``html`` holds the Atom feed and ``json`` the
    RSS one (the cache's two bodies)."""
    page = feed.page.page
    page_url = f"{base.rstrip('/')}/status/{page.slug}"
    entries = feed_entries(feed)
    newest = _utc(entries[0]["updated"] if entries else page.created)
    fg = FeedGenerator()
    fg.id(page_url)
    fg.title(_xml(page.name))
    fg.subtitle(_xml(page.description or f"Incidents and maintenance of {page.name}"))
    fg.generator("Uptrio")
    fg.language("en")
    fg.updated(newest)
    fg.lastBuildDate(newest)
    for e in entries:
        fe = fg.add_entry(order="append")
        url = f"{page_url}#{e['id']}"
        fe.id(url)
        fe.guid(url, permalink=False)
        fe.title(_xml(e["title"]))
        fe.link(href=page_url)
        fe.published(_utc(e["published"]))
        fe.updated(_utc(e["updated"]))
        fe.category(term=e["category"])
        content = _xml(e["content"])
        fe.description(content)  # RSS <description>; before content(), which it overwrites
        fe.content(content, type="html")
    alternate = {"href": page_url, "rel": "alternate", "type": "text/html"}
    # feedgen's RSS <link> is the last link given: the page, after the feed itself
    fg.link([{"href": f"{page_url}/feed.atom", "rel": "self"}, alternate], replace=True)
    atom: bytes = fg.atom_str(pretty=True)
    fg.link([{"href": f"{page_url}/feed.rss", "rel": "self"}, alternate], replace=True)
    rss: bytes = fg.rss_str(pretty=True)
    return Rendered.page(atom, rss)


async def render_feeds(deps: Dependencies, slug: str, base: str) -> Rendered:
    """Read the page of ``slug`` now (``deps.clock``) and render its two feeds with links
    under ``base``, or :data:`~web.http.page_cache.MISSING` (on a worker thread of
    ``deps.status_render_limiter``, like the page).

    Raises:
        StoreError: the page could not be read.
    """
    feed = await deps.db.run(_read, slug, int(deps.clock()))
    if feed is None:
        return MISSING
    return await trio.to_thread.run_sync(_render, feed, base, limiter=deps.status_render_limiter)


def add_status_feed_routes(app: QuartTrio, deps: Dependencies) -> None:
    """Add ``/status/<slug>/feed.atom`` and ``/status/<slug>/feed.rss`` to ``app``
    (module docstring), served from ``deps.status_cache``."""

    async def feeds(slug: str, as_atom: bool) -> Response:
        if not valid_slug(slug):
            return missing_page()
        base = deps.settings.public_url or request.host_url
        key = f"{slug}/feeds" + ("" if deps.settings.public_url else f" {base}")
        try:
            rendered = await deps.status_cache.get(key, lambda _: render_feeds(deps, slug, base))
        except (RenderFailed, StoreError):
            return unavailable_page()
        if not rendered.found:
            return missing_page()
        if as_atom:
            body = (rendered.html, rendered.html_gzip, rendered.html_etag, ATOM)
        else:
            body = (rendered.json, rendered.json_gzip, rendered.json_etag, RSS)
        return answer(*body, _HEADERS, cache_control=CACHE_CONTROL)

    @app.route("/status/<slug>/feed.atom", methods=["GET"], provide_automatic_options=False)
    async def status_feed_atom(slug: str) -> Response:
        return await feeds(slug, True)

    @app.route("/status/<slug>/feed.rss", methods=["GET"], provide_automatic_options=False)
    async def status_feed_rss(slug: str) -> Response:
        return await feeds(slug, False)
