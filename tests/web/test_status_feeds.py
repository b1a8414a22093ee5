"""A status page's feeds, ``GET /status/<slug>/feed.atom`` and ``feed.rss``
(docs/status-pages.md, Feeds): parsed with ``feedparser``, they list the page's incidents
with their public updates and its maintenance, newest first, at most 50, with stable ids
under ``--public-url``, nothing private, the page's cache headers and its 404. Real app
on real Postgres (the seeded page of :mod:`tests.web.status_helpers`); the clock (wall
and cache) is injected, an hour after the real now. A time limit inside each test.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import feedparser
import pytest
import trio

from store import Database
from tests.api import Api, EngineLike
from tests.web import test_status_public
from tests.web.helpers import create_monitor, expect, sql
from tests.web.status_helpers import SECRETS, Clock, fetch, parse, seed, status_deps
from web.http.deps import Dependencies
from web.process.app import create_app

if TYPE_CHECKING:
    from quart.typing import TestClientProtocol

PUBLIC_URL = "https://status.example.com"
FEEDS = (
    ("feed.atom", "application/atom+xml; charset=utf-8"),
    ("feed.rss", "application/rss+xml; charset=utf-8"),
)


clock = test_status_public.clock
"""The page's clock (wall and cache, an hour after the real now)."""


@pytest.fixture
def deps(db: Database, engine: EngineLike, clock: Clock) -> Dependencies:
    plain = status_deps(db, engine, clock)
    settings = dataclasses.replace(plain.settings, public_url=PUBLIC_URL)
    return dataclasses.replace(plain, settings=settings)


async def _feed(client: TestClientProtocol, path: str) -> Any:
    status, headers, body = await fetch(client, path)
    assert status == 200, body
    parsed = feedparser.parse(body)
    assert not parsed.bozo, parsed.bozo_exception
    return parsed, headers, body


async def _page(api: Api, name: str, monitor: str, component: str) -> None:
    """POST the status page ``acme`` named ``name`` over one component."""
    components = [{"monitor": monitor, "name": component}]
    page = {"name": name, "slug": "acme", "components": components}
    expect(await api.post("/status-pages", json=page), 201)


async def test_both_feeds_list_incidents_updates_and_maintenance_and_nothing_private(
    api: Api, db: Database, client: TestClientProtocol, clock: Clock
) -> None:
    with trio.fail_after(30):
        t = int(clock())
        seeded = await seed(api, db, t - 3000)
        window = expect(
            await api.post(
                "/maintenance-windows",
                json={
                    "title": "Database upgrade",
                    "description": "The primary moves to new hardware.",
                    "monitors": [seeded.monitors["web"]],
                    "starts_at": t + 3600,
                    "ends_at": t + 7200,
                    "metadata": {"ticket": "OPS-SECRET-5150"},
                },
            ),
            201,
        )
        for title, start in (("Router swap", t - 7200), ("Long ago", t - 15 * 86_400)):
            ended = expect(
                await api.post(
                    "/maintenance-windows",
                    json={
                        "title": title,
                        "monitors": [seeded.monitors["api"]],
                        "starts_at": t + 600,
                        "ends_at": t + 1200,
                    },
                ),
                201,
            )
            await sql(  # ended in the past (the API takes no window in the past)
                db,
                "UPDATE maintenance_occurrences SET starts_at = $2, ends_at = $3, "
                "start_handled = true, end_handled = true WHERE window_id = $1",
                ended["id"],
                start,
                start + 3600,
            )
        incidents = expect(await api.get("/incidents", query={"limit": "100"}))["data"]
        private = (
            *SECRETS,
            "OPS-SECRET-5150",
            window["id"],
            seeded.page["id"],
            *seeded.monitors.values(),
            *(i["id"] for i in incidents),
            "Unrelated incident",  # on a monitor the page does not show
        )
        page_url = f"{PUBLIC_URL}/status/acme-status"
        for path, content_type in FEEDS:
            feed, headers, body = await _feed(client, f"/status/acme-status/{path}")
            assert headers["Content-Type"] == content_type
            assert feed.feed.title == "Acme status"
            assert feed.feed.link == page_url
            for secret in private:
                assert secret not in body, (path, secret)
            titles = [e.title for e in feed.entries]
            assert set(titles) == {  # not the maintenance ended over 14 days ago
                "Maintenance: Database upgrade",
                "Maintenance: Router swap",
                "Public API is down",
                "Website is down",
                "Slow responses",
            }, path
            if path == "feed.atom":  # RSS items have no updated time, only pubDate
                updated = [e.updated_parsed for e in feed.entries]
                assert updated == sorted(updated, reverse=True)
            assert titles[0] == "Maintenance: Database upgrade"  # starts in an hour
            by_title = {e.title: e for e in feed.entries}
            api_down = by_title["Public API is down"]
            text = api_down.content[0].value if path == "feed.atom" else api_down.description
            assert "We are looking into it." in text and "Identified" in text
            assert "Affects: Public API" in text
            assert "Fixed the cache." in by_title["Slow responses"].description
            maintenance = by_title["Maintenance: Database upgrade"].description
            assert "The primary moves to new hardware." in maintenance
            assert "Affects: Website" in maintenance and "Scheduled" in maintenance
            router = by_title["Maintenance: Router swap"].description
            assert "Completed" in router and "Affects: Public API" in router
            ids = [e.id for e in feed.entries]
            assert len(set(ids)) == len(ids)
            assert all(i.startswith(f"{page_url}#") for i in ids), ids

        # stable: the same ids in both feeds and on the next render
        atom_ids = [e.id for e in (await _feed(client, "/status/acme-status/feed.atom"))[0].entries]
        clock.t += 11
        rss_ids = [e.id for e in (await _feed(client, "/status/acme-status/feed.rss"))[0].entries]
        assert atom_ids == rss_ids


async def test_at_most_50_entries_newest_first_of_60_incidents(
    api: Api, db: Database, client: TestClientProtocol, clock: Clock
) -> None:
    with trio.fail_after(60):
        t = int(clock())
        monitor = (await create_monitor(api, name="secret-name-web-7f3a"))["id"]
        for k in range(60):
            incident = expect(
                await api.post(
                    "/incidents", json={"title": f"Incident {k}", "monitors": [monitor]}
                ),
                201,
            )
            at = t - 7200 + k * 60  # incident k is the k-th oldest
            await sql(db, "UPDATE incidents SET created = $2 WHERE id = $1", incident["id"], at)
            await sql(
                db,
                "UPDATE incident_updates SET created = $2 WHERE incident_id = $1",
                incident["id"],
                at,
            )
        await _page(api, "Acme", monitor, "Website")
        for path, _ in FEEDS:
            feed = (await _feed(client, f"/status/acme/{path}"))[0]
            assert [e.title for e in feed.entries] == [f"Incident {k}" for k in range(59, 9, -1)]


async def test_cache_headers_and_a_304_like_the_page(
    api: Api, db: Database, client: TestClientProtocol, clock: Clock
) -> None:
    with trio.fail_after(30):
        await seed(api, db, int(clock()) - 3000)
        for path, content_type in FEEDS:
            status, headers, _ = await fetch(client, f"/status/acme-status/{path}")
            assert status == 200
            assert headers["Cache-Control"] == "public, max-age=10"
            assert headers["Vary"] == "Accept-Encoding"
            assert headers["Access-Control-Allow-Origin"] == "*"
            etag = headers["ETag"]
            again = await fetch(client, f"/status/acme-status/{path}", {"If-None-Match": etag})
            assert again[0] == 304 and again[2] == ""
            zipped = await client.get(
                f"/status/acme-status/{path}", headers={"Accept-Encoding": "gzip"}
            )
            assert zipped.headers["Content-Encoding"] == "gzip"
            assert zipped.headers["Content-Type"] == content_type
        # a new render an unchanged page: the same ETag (the feed's times are its entries')
        clock.t += 11
        status, headers, _ = await fetch(client, "/status/acme-status/feed.atom")
        assert status == 200
        first = await fetch(client, "/status/acme-status/feed.atom")
        assert headers["ETag"] == first[1]["ETag"]


async def test_an_unknown_slug_is_the_page_404(client: TestClientProtocol) -> None:
    with trio.fail_after(30):
        page_status, page_headers, page_body = await fetch(client, "/status/no-such-page")
        assert page_status == 404
        for slug in ("no-such-page", "Not_A_Slug"):
            for path, _ in FEEDS:
                status, headers, body = await fetch(client, f"/status/{slug}/{path}")
                assert status == 404
                assert headers["Content-Type"] == page_headers["Content-Type"]
                assert headers["Cache-Control"] == page_headers["Cache-Control"]
                assert body == page_body
                assert parse(body).find("status-missing")


async def test_the_page_links_its_feeds(
    api: Api, db: Database, client: TestClientProtocol, clock: Clock
) -> None:
    with trio.fail_after(30):
        await seed(api, db, int(clock()) - 3000)
        html = (await fetch(client, "/status/acme-status"))[2]
        links = [
            e.attrs
            for e in _walk(parse(html))
            if e.tag == "link" and e.attrs.get("rel") == "alternate"
        ]
        assert {(a["type"], a["href"]) for a in links} == {
            ("application/atom+xml", "/status/acme-status/feed.atom"),
            ("application/rss+xml", "/status/acme-status/feed.rss"),
        }


def _walk(element: Any) -> list[Any]:
    return [element, *(d for c in element.children for d in _walk(c))]


async def test_markup_and_control_characters_in_texts_keep_the_feeds_well_formed(
    api: Api, db: Database, client: TestClientProtocol, clock: Clock
) -> None:
    with trio.fail_after(30):
        monitor = (await create_monitor(api, name="secret-name-web-7f3a"))["id"]
        title = '<b>Slow</b> & "odd" \x01\x0b\ufffe\''
        incident = expect(
            await api.post("/incidents", json={"title": title, "monitors": [monitor]}), 201
        )
        message = "<script>alert(1)</script> & \x1f\x08 done"
        expect(
            await api.post(f"/incidents/{incident['id']}/updates", json={"message": message}),
            201,
        )
        await _page(api, "A & <B>", monitor, "Web <site> & \x02")
        for path, _ in FEEDS:
            feed, _, body = await _feed(client, f"/status/acme/{path}")
            assert feed.feed.title == "A & <B>"
            (entry,) = feed.entries
            assert entry.title == '<b>Slow</b> & "odd" \''  # as text, control characters out
            html = entry.content[0]
            assert html.type == "text/html"
            assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp;  done" in html.value
            assert "Affects: Web &lt;site&gt; &amp; <" in html.value
            assert "<script" not in body


async def test_without_public_url_a_forged_host_never_reaches_another_reader(
    api: Api, db: Database, engine: EngineLike, clock: Clock
) -> None:
    with trio.fail_after(30):
        monitor = (await create_monitor(api, name="secret-name-web-7f3a"))["id"]
        await _page(api, "Acme", monitor, "Website")
        app = create_app(status_deps(db, engine, clock))  # no --public-url
        client = app.test_client()
        forged = await client.get("/status/acme/feed.atom", headers={"Host": "evil.example"})
        assert "http://evil.example/status/acme" in (await forged.get_data()).decode()
        honest = await client.get("/status/acme/feed.atom", headers={"Host": "status.acme.test"})
        body = (await honest.get_data()).decode()
        assert "evil.example" not in body and "http://status.acme.test/status/acme" in body


async def test_a_page_with_nothing_to_tell_has_empty_well_formed_feeds(
    api: Api, client: TestClientProtocol
) -> None:
    with trio.fail_after(30):
        monitor = (await create_monitor(api, name="secret-name-web-7f3a"))["id"]
        await _page(api, "Acme", monitor, "Website")
        for path, _ in FEEDS:
            feed = (await _feed(client, f"/status/acme/{path}"))[0]
            assert feed.feed.title == "Acme" and feed.entries == []
