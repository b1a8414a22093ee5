"""Maintenance on the public status page (docs/status-pages.md, Maintenance and
States): a component in an open occurrence shows ``under_maintenance`` whatever its
monitor says, the page's state follows, and the windows of the next 7 days are listed in
the HTML and in ``summary.json`` with their public part only. Windows are made through the
API; the page's clock (wall and cache) is injected, an hour after the real now.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import trio

from store import Database
from tests.api import Api
from tests.web import test_status_public
from tests.web.helpers import create_monitor, expect
from tests.web.status_helpers import SECRETS, Clock, fetch, move, parse, seed
from web.http.deps import Dependencies

if TYPE_CHECKING:
    from quart.typing import TestClientProtocol

DAY = 86_400
PRIVATE = ("secret-window-meta-77", "OPS-SECRET-5150", "mnt_")
"""What a window holds that no public response may show (metadata; its id)."""
clock = test_status_public.clock
deps = test_status_public.deps
"""The page's clock (wall and cache, an hour after the real now) and the app using it."""


async def _window(api: Api, monitors: list[str], title: str, **fields: Any) -> dict[str, Any]:
    body = {
        "title": title,
        "monitors": monitors,
        "metadata": {"ticket": "OPS-SECRET-5150", "note": "secret-window-meta-77"},
        **fields,
    }
    return expect(await api.post("/maintenance-windows", json=body), 201)  # type: ignore[no-any-return]


async def test_a_component_under_maintenance_and_the_windows_of_the_next_7_days(
    api: Api, db: Database, client: TestClientProtocol, clock: Clock
) -> None:
    with trio.fail_after(30):
        t = int(clock())
        web = (await create_monitor(api, name="secret-name-web-7f3a"))["id"]
        database = (await create_monitor(api, name="secret-name-db-3c2e"))["id"]
        await _window(
            api,
            [database],
            "Database upgrade",
            description="The primary moves to new hardware.",
            starts_at=t - 600,
            ends_at=t + 1800,
        )
        await _window(api, [web, database], "Network work", starts_at=t + DAY, ends_at=t + DAY + 60)
        await _window(api, [web], "Much later", starts_at=t + 8 * DAY, ends_at=t + 8 * DAY + 60)
        await move(db, web, "up", t - 3000)
        await move(db, database, "up", t - 3000)
        await move(db, database, "down", t - 300)  # in the window: held back, no incident
        components = [
            {"monitor": database, "name": "Database", "group": "Backend"},
            {"monitor": web, "name": "Website"},
        ]
        expect(
            await api.post(
                "/status-pages", json={"name": "Acme", "slug": "acme", "components": components}
            ),
            201,
        )

        summary = json.loads((await fetch(client, "/status/acme/summary.json"))[2])
        states = {c["name"]: (c["state"], c["state_label"]) for c in summary["components"]}
        # down, but the work is planned: no outage, and the page says maintenance
        assert states == {
            "Database": ("under_maintenance", "Under maintenance"),
            "Website": ("operational", "Operational"),
        }
        assert (summary["state"], summary["state_label"]) == (
            "under_maintenance",
            "Under maintenance",
        )
        assert summary["incidents"]["open"] == []
        assert summary["scheduled_maintenances"] == [
            {
                "title": "Database upgrade",
                "description": "The primary moves to new hardware.",
                "status": "in_progress",
                "starts_at": t - 600,
                "ends_at": t + 1800,
                "components": ["Database"],
            },
            {
                "title": "Network work",
                "description": None,
                "status": "scheduled",
                "starts_at": t + DAY,
                "ends_at": t + DAY + 60,
                "components": ["Database", "Website"],  # the page's order
            },
        ]

        html = (await fetch(client, "/status/acme"))[2]
        page = parse(html)
        assert page.one("status-page").attrs["data-state"] == "under_maintenance"
        assert page.one("overall-label").words == "Under maintenance"
        (component,) = [c for c in page.find("component") if c.attrs["data-state"] != "operational"]
        assert component.one("component-name").words == "Database"
        assert component.one("component-state").words == "⚙ Under maintenance"
        section = page.one("maintenance")
        assert "Scheduled maintenance" in section.words
        first, second = section.find("maintenance-window")
        assert first.attrs["data-status"] == "in_progress"
        assert first.one("maintenance-title").words == "Database upgrade"
        assert first.one("maintenance-description").words == "The primary moves to new hardware."
        start, end = (
            time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(x)) for x in (t - 600, t + 1800)
        )
        assert first.one("maintenance-meta").words == f"In progress · {start} to {end}"
        assert first.one("maintenance-start").attrs["datetime"] == time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(t - 600)
        )
        assert first.one("maintenance-components").words == "Affects: Database"
        assert second.attrs["data-status"] == "scheduled"
        assert second.find("maintenance-description") == []
        assert second.one("maintenance-components").words == "Affects: Database, Website"
        assert "Much later" not in html

        # once the occurrence is over, the component is down again, and says so
        clock.t = t + 1800 + 10
        summary = json.loads((await fetch(client, "/status/acme/summary.json"))[2])
        assert summary["components"][0]["state"] == "major_outage"
        assert [m["title"] for m in summary["scheduled_maintenances"]] == ["Network work"]


async def test_no_private_part_of_a_window_reaches_the_page_or_the_summary(
    api: Api, db: Database, client: TestClientProtocol, clock: Clock
) -> None:
    with trio.fail_after(30):
        t = int(clock())
        seeded = await seed(api, db, t - 3000)
        # covers a component's monitor and one the page does not show (private name)
        window = await _window(
            api,
            [seeded.monitors["other"], seeded.monitors["api"]],
            "Scheduled database work",
            starts_at=t - 60,
            ends_at=t + 3600,
        )
        html = (await fetch(client, "/status/acme-status"))[2]
        body = (await fetch(client, "/status/acme-status/summary.json"))[2]
        for secret in (*SECRETS, *PRIVATE, window["id"], "unlisted"):
            assert secret not in html, secret
            assert secret not in body, secret
        (shown,) = json.loads(body)["scheduled_maintenances"]
        assert set(shown) == {
            "title",
            "description",
            "status",
            "starts_at",
            "ends_at",
            "components",
        }
        assert shown["components"] == ["Public API"]
        assert "Scheduled database work" in html


async def test_a_window_made_through_the_api_shows_once_the_10_seconds_are_over(
    api: Api, db: Database, client: TestClientProtocol, clock: Clock, deps: Dependencies
) -> None:
    with trio.fail_after(30):
        t = int(clock())
        web = (await create_monitor(api))["id"]
        await move(db, web, "up", t - 3000)
        components = [{"monitor": web, "name": "Website"}]
        expect(
            await api.post(
                "/status-pages", json={"name": "Acme", "slug": "acme", "components": components}
            ),
            201,
        )
        assert "Scheduled maintenance" not in (await fetch(client, "/status/acme"))[2]
        window = await _window(api, [web], "Patching", starts_at=t - 60, ends_at=t + 3600)
        clock.t += 9.9  # the cached copy stands for 10 s (docs/status-pages.md)
        assert "Scheduled maintenance" not in (await fetch(client, "/status/acme"))[2]
        clock.t += 0.1
        page = parse((await fetch(client, "/status/acme"))[2])
        assert page.one("component").attrs["data-state"] == "under_maintenance"
        assert page.one("maintenance-title").words == "Patching"
        # a window canceled before it starts, or deleted, leaves the page within 10 s too
        await _window(api, [web], "Later", starts_at=t + DAY, ends_at=t + DAY + 60)
        dropped = await _window(api, [web], "Dropped", starts_at=t + 2 * DAY, ends_at=t + 3 * DAY)
        expect(await api.post(f"/maintenance-windows/{dropped['id']}/cancel"))
        clock.t += 10
        summary = json.loads((await fetch(client, "/status/acme/summary.json"))[2])
        assert [m["title"] for m in summary["scheduled_maintenances"]] == ["Patching", "Later"]
        expect(await api.delete(f"/maintenance-windows/{window['id']}"), 204)
        clock.t += 10
        summary = json.loads((await fetch(client, "/status/acme/summary.json"))[2])
        assert [m["title"] for m in summary["scheduled_maintenances"]] == ["Later"]
        assert summary["components"][0]["state"] == "operational"
        assert deps.status_cache.statistics().renders == 4
