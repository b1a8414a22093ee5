"""The public status page ``GET /status/<slug>`` and its ``summary.json``
(docs/status-pages.md, The public page): content, daily bars from rollups, what never leaks,
the cache and its headers, 404s. Real app on real Postgres, status moves written by the
store's batch path; the clock (wall and cache) is injected, so nothing sleeps. A time limit
inside each test.
"""

from __future__ import annotations

import gzip
import json
import re
import time
from typing import TYPE_CHECKING, Any

import pytest
import trio

from store import Database
from tests.api import Api, EngineLike
from tests.web.helpers import expect, sql
from tests.web.status_helpers import SECRETS, Clock, fetch, parse, seed, status_deps
from web.http.deps import Dependencies

if TYPE_CHECKING:
    from quart.typing import TestClientProtocol

DAY = 86_400


@pytest.fixture
def clock() -> Clock:
    """Wall clock and cache clock at once: an hour after the real now (monitors made by
    the API get the real time as ``created``, so moves can be written after it)."""
    return Clock(float(int(time.time()) + 3600))


@pytest.fixture
def deps(db: Database, engine: EngineLike, clock: Clock) -> Dependencies:
    return status_deps(db, engine, clock)


async def test_page_shows_overall_state_components_bars_and_incidents(
    api: Api, db: Database, client: TestClientProtocol, clock: Clock
) -> None:
    with trio.fail_after(30):
        base = int(clock()) - 3000
        await seed(api, db, base)
        status, headers, html = await fetch(client, "/status/acme-status")
        assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
        assert "<script" not in html and "http://" not in html and "https://" not in html
        page = parse(html)
        main = page.one("status-page")
        # one of two monitored components down, and an open major incident
        assert main.attrs["data-state"] == "partial_outage"
        assert "Partial outage" in page.one("overall-label").words
        assert page.one("page-name").words == "Acme status"

        states = {
            c.one("component-name").words: (c.attrs["data-state"], c.one("component-state").words)
            for c in page.find("component")
        }
        assert states == {
            "Website": ("operational", "✓ Operational"),
            "Public API": ("major_outage", "✕ Major outage"),
            "Background jobs": ("paused", "‖ Not monitored"),
        }
        (backend,) = [g for g in page.find("component-group") if g.attrs.get("data-group")]
        assert backend.attrs["data-group"] == "Backend"
        assert [c.one("component-name").words for c in backend.find("component")] == [
            "Public API",
            "Background jobs",
        ]
        for component in page.find("component"):
            bars = component.find("bar")
            assert len(bars) == 90
            for bar in bars:
                assert re.fullmatch(r"\d{4}-\d\d-\d\d: (\d+\.\d\d% uptime|no data)", bar.words)
                assert bar.attrs.keys() == {"class", "data-level"}  # the label once, as text
                assert bar.attrs["data-level"] in ("none", "full", "partial", "low")
        today = time.strftime("%Y-%m-%d", time.gmtime(clock()))
        website = page.find("component")[0]
        assert website.find("bar")[-1].words.startswith(f"{today}: ")
        outage_day = time.strftime("%Y-%m-%d", time.gmtime(base + 100))  # 60 s down
        (bar,) = [b for b in website.find("bar") if b.words.startswith(f"{outage_day}: ")]
        assert bar.attrs["data-level"] == "low" and not bar.words.endswith("100.00% uptime")

        (open_incident,) = page.one("incidents-open").find("incident")
        assert open_incident.one("incident-title").words == "Public API is down"
        assert open_incident.attrs["data-status"] == "identified"
        timeline = open_incident.find("incident-update")  # newest first
        assert [u.attrs["data-status"] for u in timeline] == ["identified", "investigating"]
        assert timeline[0].one("update-message").words == "We are looking into it."
        assert timeline[1].find("update-message") == []  # the description stays private
        resolved = page.one("incidents-resolved").find("incident")
        titles = [i.one("incident-title").words for i in resolved]
        assert sorted(titles) == ["Slow responses", "Website is down"]
        messages = [m.words for i in resolved for m in i.find("update-message")]
        assert "Fixed the cache." in messages
        assert any(re.fullmatch(r"Website is up again after 1m 0s", m) for m in messages)
        assert "Unrelated incident" not in html


async def test_nothing_private_reaches_the_page_or_the_summary(
    api: Api, db: Database, client: TestClientProtocol, clock: Clock
) -> None:
    with trio.fail_after(30):
        await seed(api, db, int(clock()) - 3000)
        _, _, html = await fetch(client, "/status/acme-status")
        _, _, body = await fetch(client, "/status/acme-status/summary.json")
        for secret in SECRETS:
            assert secret not in html, secret
            assert secret not in body, secret
        assert "Connection refused" not in html + body
        assert "Website" in html and "Website" in body


async def test_daily_bars_come_from_rollups_plus_the_open_period_split_by_day(
    api: Api, db: Database, client: TestClientProtocol, clock: Clock
) -> None:
    with trio.fail_after(30):
        now = int(clock()) // DAY * DAY + 12 * 3600  # noon UTC
        clock.t = now
        today = now - 12 * 3600
        up = (await _monitor(api))["id"]
        down = (await _monitor(api))["id"]
        rollups = [
            # (monitor, hour, up seconds, down seconds): closed periods only
            (up, today - 2 * DAY + 3600, 3000, 600),  # two days ago: 83.33 %
            (up, today - DAY, 86_400 - 864, 864),  # yesterday: 99.00 %
            (up, today + 5 * 3600, 0, 3600),  # today 05:00-06:00 down, up since 06:00: 6 h
            (down, today - DAY, 18 * 3600, 0),  # yesterday up until 18:00, down since
        ]
        for monitor_id, hour, up_s, down_s in rollups:
            await sql(
                db,
                "INSERT INTO check_rollups (monitor_id, hour, up_seconds, down_seconds) "
                "VALUES ($1, $2, $3, $4)",
                monitor_id,
                hour,
                up_s,
                down_s,
            )
        await sql(  # the daily seconds the store's writes keep beside them
            db,
            "INSERT INTO daily_rollups (monitor_id, day, up_seconds, down_seconds) "
            "SELECT monitor_id, hour - hour % 86400, sum(up_seconds), sum(down_seconds) "
            "FROM check_rollups GROUP BY 1, 2",
        )
        for monitor_id in (up, down):  # both checked a minute ago: still watched
            await sql(
                db,
                "INSERT INTO check_rollups (monitor_id, hour, checks, last_check) "
                "VALUES ($1, $2, 1, $3)",
                monitor_id,
                now - 3600,
                now - 60,
            )
        await sql(
            db,
            "UPDATE monitors SET status = 'up', status_since = $2 WHERE id = $1",
            up,
            today + 6 * 3600,
        )
        await sql(
            db,
            "UPDATE monitors SET status = 'down', status_since = $2 WHERE id = $1",
            down,
            today - 6 * 3600,
        )
        components = [{"monitor": up, "name": "Up"}, {"monitor": down, "name": "Down"}]
        expect(
            await api.post(
                "/status-pages", json={"name": "Bars", "slug": "bars", "components": components}
            ),
            201,
        )
        _, _, body = await fetch(client, "/status/bars/summary.json")
        summary = json.loads(body)
        up_days, down_days = (c["days"] for c in summary["components"])
        assert [d["uptime_percent"] for d in up_days[-4:]] == [None, 83.333, 99.0, 85.714]
        assert [d["level"] for d in up_days[-4:]] == ["none", "low", "partial", "low"]
        assert [d["uptime_percent"] for d in down_days[-2:]] == [75.0, 0.0]
        assert up_days[-1]["date"] == time.strftime("%Y-%m-%d", time.gmtime(today))
        assert len(up_days) == 90 and all(d["uptime_percent"] is None for d in up_days[:-3])
        _, _, html = await fetch(client, "/status/bars")
        labels = [b.words for b in parse(html).find("component")[0].find("bar")[-4:]]
        assert labels[1:] == [
            f"{up_days[-3]['date']}: 83.33% uptime",
            f"{up_days[-2]['date']}: 99.00% uptime",
            f"{up_days[-1]['date']}: 85.71% uptime",
        ]
        assert labels[0].endswith(": no data")


async def _monitor(api: Api) -> dict[str, Any]:
    return expect(
        await api.post(
            "/monitors", json={"name": "m", "url": "https://example.com/", "type": "http"}
        ),
        201,
    )


async def test_summary_json_shape_cors_and_cache_headers(
    api: Api, db: Database, client: TestClientProtocol, clock: Clock
) -> None:
    with trio.fail_after(30):
        await seed(api, db, int(clock()) - 3000)
        status, headers, body = await fetch(client, "/status/acme-status/summary.json")
        assert status == 200 and headers["Content-Type"] == "application/json"
        assert headers["Access-Control-Allow-Origin"] == "*"
        assert headers["Cache-Control"] == "public, max-age=10"
        summary = json.loads(body)
        assert set(summary) == {
            "object",
            "generated_at",
            "page",
            "state",
            "state_label",
            "components",
            "incidents",
            "scheduled_maintenances",
        }
        assert summary["object"] == "status_page_summary" and summary["state"] == "partial_outage"
        assert summary["page"] == {
            "name": "Acme status",
            "slug": "acme-status",
            "description": "Live state of Acme's services.",
        }
        for component in summary["components"]:
            assert set(component) == {
                "name",
                "group",
                "state",
                "state_label",
                "uptime_percent",
                "days",
            }
            assert len(component["days"]) == 90
            assert set(component["days"][0]) == {"date", "uptime_percent", "level"}
        (incident,) = summary["incidents"]["open"]
        assert set(incident) == {
            "title",
            "status",
            "severity",
            "created",
            "updated",
            "resolved_at",
            "components",
            "updates",
            "updates_omitted",
        }
        assert incident["components"] == ["Public API"] and incident["severity"] == "major"
        assert incident["updates_omitted"] == 0
        assert [u["message"] for u in incident["updates"]] == [None, "We are looking into it."]
        assert len(summary["incidents"]["resolved"]) == 2


async def test_etag_and_if_none_match_give_304(
    api: Api, db: Database, client: TestClientProtocol, clock: Clock
) -> None:
    with trio.fail_after(30):
        await seed(api, db, int(clock()) - 3000)
        for path in ("/status/acme-status", "/status/acme-status/summary.json"):
            status, headers, body = await fetch(client, path)
            etag = headers["ETag"]
            assert status == 200 and re.fullmatch(r'"[0-9a-f]{32}"', etag)
            assert headers["Cache-Control"] == "public, max-age=10"
            for sent in (etag, f"W/{etag}", f'"other", {etag}', "*"):
                status, again, empty = await fetch(client, path, {"If-None-Match": sent})
                assert status == 304 and empty == "" and again["ETag"] == etag
            status, _, same = await fetch(client, path, {"If-None-Match": '"other"'})
            assert status == 200 and same == body


async def test_a_reader_that_accepts_gzip_gets_the_cached_gzip_copy(
    api: Api, db: Database, client: TestClientProtocol, clock: Clock
) -> None:
    with trio.fail_after(30):
        await seed(api, db, int(clock()) - 3000)
        for path in ("/status/acme-status", "/status/acme-status/summary.json"):
            response = await client.get(path)
            plain = await response.get_data()
            assert "Content-Encoding" not in response.headers
            assert response.headers["Vary"] == "Accept-Encoding"
            for accept in ("gzip", "br, gzip;q=0.8", "deflate, GZIP"):
                zipped = await client.get(path, headers={"Accept-Encoding": accept})
                assert zipped.headers["Content-Encoding"] == "gzip"
                assert zipped.headers["Vary"] == "Accept-Encoding"
                raw = await zipped.get_data()
                assert gzip.decompress(raw) == plain and len(raw) < len(plain)
                etag = zipped.headers["ETag"]
                assert etag == response.headers["ETag"][:-1] + '-gzip"'
                again = await client.get(
                    path, headers={"Accept-Encoding": accept, "If-None-Match": etag}
                )
                assert again.status_code == 304
            refused = await client.get(path, headers={"Accept-Encoding": "gzip;q=0, br"})
            assert "Content-Encoding" not in refused.headers
            assert await refused.get_data() == plain


async def test_unknown_or_malformed_slug_is_a_404(client: TestClientProtocol) -> None:
    with trio.fail_after(15):
        for slug in ("nobody-here", "UPPER", "a", "x" * 61):
            status, headers, html = await fetch(client, f"/status/{slug}")
            assert status == 404 and headers["Content-Type"] == "text/html; charset=utf-8"
            assert "Status page not found" in html and (len(slug) < 3 or slug not in html)
            status, headers, body = await fetch(client, f"/status/{slug}/summary.json")
            assert status == 404 and headers["Access-Control-Allow-Origin"] == "*"
            error = json.loads(body)["error"]
            assert error["code"] == "resource_missing" and error["param"] == "slug"
            assert error["request_id"] == headers["Request-Id"]


async def test_public_pages_need_no_token_and_spend_no_rate_limit(
    api: Api, db: Database, client: TestClientProtocol, clock: Clock
) -> None:
    with trio.fail_after(30):
        await seed(api, db, int(clock()) - 3000)
        for _ in range(30):
            status, headers, _ = await fetch(
                client, "/status/acme-status", {"Authorization": "Bearer forged"}
            )
            assert status == 200 and "X-RateLimit-Limit" not in headers
        _, headers, _ = await fetch(client, "/status/acme-status")
        assert "default-src 'none'" in headers["Content-Security-Policy"]


async def test_a_change_shows_once_the_10_seconds_are_over(
    api: Api, db: Database, client: TestClientProtocol, clock: Clock, deps: Dependencies
) -> None:
    with trio.fail_after(30):
        seeded = await seed(api, db, int(clock()) - 3000)
        assert parse((await fetch(client, "/status/acme-status"))[2]).one("page-name").words == (
            "Acme status"
        )
        expect(await api.patch(f"/status-pages/{seeded.page['id']}", json={"name": "Renamed"}))
        clock.t += 9.9
        assert "Acme status" in (await fetch(client, "/status/acme-status"))[2]
        clock.t += 0.1
        assert "Renamed" in (await fetch(client, "/status/acme-status"))[2]
        assert deps.status_cache.statistics().renders == 2
        expect(await api.delete(f"/status-pages/{seeded.page['id']}"), 204)
        clock.t += 10
        assert (await fetch(client, "/status/acme-status"))[0] == 404


async def test_concurrent_readers_cause_one_render_per_10_seconds(
    api: Api, db: Database, client: TestClientProtocol, clock: Clock, deps: Dependencies
) -> None:
    with trio.fail_after(60):
        await seed(api, db, int(clock()) - 3000)
        statuses: list[int] = []
        bodies: set[str] = set()

        async def read(path: str) -> None:
            status, _, body = await fetch(client, path)
            statuses.append(status)
            bodies.add(body)

        for burst in range(3):
            async with trio.open_nursery() as nursery:
                for k in range(40):
                    path = "/status/acme-status" + ("/summary.json" if k % 2 else "")
                    nursery.start_soon(read, path)
            assert deps.status_cache.statistics().renders == burst + 1
            clock.t += 10
        assert statuses == [200] * 120
        stats = deps.status_cache.statistics()
        assert stats.waited + stats.stale + stats.fresh == 117
