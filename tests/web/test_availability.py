"""GET /monitors/:id/availability and the new filters of GET /monitors/:id/checks
(docs/history.md, Availability), through the real app on a real database, with the app's
clock fixed so a history written through the store has exact figures."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from typing import Any

import trio

from store import (
    Database,
)
from tests.api import Api
from tests.conftest import MakeToken
from tests.store.helpers import known_history, new_monitor, write_checks
from tests.web.status_helpers import Clock
from web.api.history import AvailabilityObject, CheckList
from web.http.deps import Dependencies
from web.http.page_cache import PageCache
from web.process.app import create_app

HOUR = 3600
_SECONDS = ("up_seconds", "down_seconds", "paused_seconds", "unknown_seconds")


async def _history(db: Database, created: int) -> str:
    """:func:`~tests.store.helpers.known_history` of 1.5 ms checks, with metadata that
    must never leave."""
    return await known_history(db, created, response_time_ms=1.5, metadata={"secret": "x"})


async def test_availability_of_a_known_history(
    db: Database, deps: Dependencies, make_token: MakeToken
) -> None:
    with trio.fail_after(20):
        now = int(time.time())
        created = now - 3 * HOUR
        mid = await _history(db, created)
        app = create_app(dataclasses.replace(deps, clock=lambda: float(now)))
        async with app.test_app() as test_app:
            api = Api(test_app.test_client(), await make_token())
            end = created + 2 * HOUR
            code, body, _ = await api.get(
                f"/monitors/{mid}/availability", query={"start": created, "end": end}
            )
            assert code == 200, body
            AvailabilityObject.model_validate(body)
            assert (body["object"], body["monitor"], body["start"], body["end"]) == (
                "availability",
                mid,
                created,
                end,
            )
            figures = [body[k] for k in ("up_seconds", "down_seconds", "paused_seconds")]
            assert figures == [2 * HOUR - 600, 600, 0] and body["unknown_seconds"] == 0
            assert body["uptime_percent"] == (2 * HOUR - 600) * 100 / (2 * HOUR)
            assert (body["checks"], body["failed_checks"]) == (24, 2)
            # the down opened an incident (docs/incidents.md, Incidents opened by monitors),
            # counted where it opened
            assert body["longest_down_seconds"] == 600 and body["incidents"] == 1
            assert body["response_time_ms"]["mean"] == 1.5
            assert abs(body["response_time_ms"]["p99"] - 1.5) <= 0.075
            assert "series" not in body and "secret" not in str(body)

            code, body, _ = await api.get(
                f"/monitors/{mid}/availability",
                query={"start": created, "end": end, "granularity": "hour"},
            )
            assert code == 200 and len(body["series"]) in (2, 3)
            assert sum(p["down_seconds"] for p in body["series"]) == 600
            assert sum(p["checks"] for p in body["series"]) == 24
            opened_in = [p for p in body["series"] if p["incidents"]]
            assert len(opened_in) == 1 and opened_in[0]["incidents"] == 1
            assert opened_in[0]["start"] <= created + 3000 < opened_in[0]["end"]
            code, later, _ = await api.get(
                f"/monitors/{mid}/availability", query={"start": created + 3001, "end": end}
            )
            assert code == 200 and later["incidents"] == 0
            assert body["series"][0]["start"] == created and body["series"][-1]["end"] == end

            code, body, _ = await api.get(f"/monitors/{mid}/availability")  # the last 30 days
            assert code == 200 and (body["start"], body["end"]) == (now - 30 * 86_400, now)
            # Its last check was at created + 2 h - 300 s (interval 300 s): the hour since
            # then has no check, so it is unknown (docs/history.md, Availability), not up.
            assert body["unknown_seconds"] == 30 * 86_400 - 2 * HOUR
            code, body, _ = await api.get(
                f"/monitors/{mid}/availability", query={"granularity": "day"}
            )
            assert code == 200 and len(body["series"]) in (30, 31)


async def test_a_maintenance_window_made_through_the_api_counts_apart(
    db: Database, deps: Dependencies, make_token: MakeToken
) -> None:
    with trio.fail_after(20):
        # The window routes write occurrences from the wall clock on: the history lies
        # ahead of it, read by an app whose clock is past it.
        created = int(time.time()) + 60
        now = created + 3 * HOUR
        mid = await _history(db, created)  # down [created + 3000, created + 3600)
        app = create_app(dataclasses.replace(deps, clock=lambda: float(now)))
        async with app.test_app() as test_app:
            api = Api(test_app.test_client(), await make_token())
            window = {"title": "db upgrade", "monitors": [mid]}
            for starts_at, ends_at, exclude in (
                (created + 2700, created + 3300, True),  # 300 s up, 300 s down
                (created + 3000, created + 3200, True),  # inside the first
                (created + 4000, created + 5000, False),  # counts nothing
            ):
                code, body, _ = await api.post(
                    "/maintenance-windows",
                    json=window
                    | {
                        "starts_at": starts_at,
                        "ends_at": ends_at,
                        "exclude_from_availability": exclude,
                    },
                )
                assert code == 201, body
            query = {"start": created, "end": created + 2 * HOUR, "granularity": "hour"}
            code, body, _ = await api.get(f"/monitors/{mid}/availability", query=query)
            assert code == 200, body
            AvailabilityObject.model_validate(body)
            figures = [body[k] for k in (*_SECONDS, "maintenance_seconds")]
            assert figures == [2 * HOUR - 900, 300, 0, 0, 600]
            assert body["uptime_percent"] == (2 * HOUR - 900) * 100 / (2 * HOUR - 600)
            assert body["longest_down_seconds"] == 300
            assert (body["checks"], body["failed_checks"]) == (24, 2)
            for part in body["series"]:
                seconds = [part[k] for k in (*_SECONDS, "maintenance_seconds")]
                assert sum(seconds) == part["end"] - part["start"]
            assert sum(p["maintenance_seconds"] for p in body["series"]) == 600


async def test_availability_refuses_bad_ranges_naming_the_parameter(
    db: Database, api: Api, api_for: Any
) -> None:
    with trio.fail_after(20):
        mid = await _history(db, int(time.time()) - 3 * HOUR)
        for query, param in (
            ({"start": "yesterday"}, "start"),
            ({"start": 100, "end": 100}, "end"),
            ({"start": 200, "end": 100}, "end"),
            ({"start": 0, "end": 401 * 86_400}, "end"),
            ({"granularity": "week"}, "granularity"),
            ({"granularity": ""}, "granularity"),
            ({"end": -5}, "end"),
            ({"from": 1}, "from"),
        ):
            code, body, _ = await api.get(f"/monitors/{mid}/availability", query=query)
            assert code == 400, (query, body)
            assert body["error"]["param"] == param, (query, body)
        code, body, _ = await api.get(
            f"/monitors/{mid}/availability", query={"start": 0, "end": 400 * 86_400}
        )
        assert code == 200 and body["unknown_seconds"] == 400 * 86_400
        other = await api_for(account="other")
        code, body, _ = await other.get(f"/monitors/{mid}/availability")
        assert code == 404 and body["error"]["code"] == "resource_missing"
        reader = await api_for(permissions=["incidents.read"])
        code, body, _ = await reader.get(f"/monitors/{mid}/availability")
        assert code == 403


async def test_check_filters_and_ending_before(db: Database, api: Api) -> None:
    with trio.fail_after(20):
        created = int(time.time()) - 3 * HOUR
        mid = await _history(db, created)
        code, page, _ = await api.get(
            f"/monitors/{mid}/checks", query={"status": "down", "limit": 100}
        )
        assert code == 200
        CheckList.model_validate(page)
        assert [c["created"] for c in page["data"]] == [created + 3300, created + 3000]
        code, page, _ = await api.get(
            f"/monitors/{mid}/checks",
            query={"created[gte]": created + 600, "created[lt]": created + 1500},
        )
        assert [c["created"] for c in page["data"]] == [
            created + 1200,
            created + 900,
            created + 600,
        ]
        code, page, _ = await api.get(
            f"/monitors/{mid}/checks",
            query={"created[gt]": created + 600, "created[lte]": created + 1500},
        )
        assert [c["created"] for c in page["data"]] == [
            created + 1500,
            created + 1200,
            created + 900,
        ]
        _, everything, _ = await api.get(f"/monitors/{mid}/checks", query={"limit": 100})
        ids = [c["id"] for c in everything["data"]]
        assert len(ids) == 24
        # Walk back up from the oldest with ending_before: pages in list order.
        walked: list[str] = []
        before = ids[-1]
        while True:
            _, page, _ = await api.get(
                f"/monitors/{mid}/checks", query={"ending_before": before, "limit": 5}
            )
            walked = [c["id"] for c in page["data"]] + walked
            if not page["has_more"]:
                break
            before = page["data"][0]["id"]
        assert walked == ids[:-1]
        code, body, _ = await api.get(
            f"/monitors/{mid}/checks", query={"ending_before": ids[0], "starting_after": ids[1]}
        )
        assert code == 400 and body["error"]["code"] == "cursor_conflict"


async def test_the_endpoint_the_rollups_and_the_status_page_agree(
    db: Database, deps: Dependencies, make_token: MakeToken
) -> None:
    with trio.fail_after(30):
        # Every 300 s, failure threshold 3. The first failure is 5 minutes before
        # midnight, the move into down comes after it (down from 23:55, so yesterday has
        # 300 s down); recovered at 00:25; checked until 04:05, stopped until 06:00
        # (unknown), checked since.
        day = int(time.time()) // 86_400 * 86_400 + 86_400
        created, now = day - 6 * HOUR, day + 8 * HOUR
        record = await new_monitor(db, created=created, interval_seconds=300, failure_threshold=3)
        mid = record.id
        await write_checks(db, mid, list(range(created, day - 300, 300)), moved_from="pending")
        for k, t in enumerate(range(day - 300, day + 1500, 300)):
            await write_checks(db, mid, [t], status="down", moved_from="up" if k == 2 else None)
        await write_checks(
            db, mid, list(range(day + 1500, day + 4 * HOUR + 1, 300)), moved_from="down"
        )
        await write_checks(db, mid, list(range(day + 6 * HOUR, now, 300)))
        page = {"name": "Honest", "slug": "honest", "components": [{"monitor": mid, "name": "Web"}]}
        # Read now, and an hour later with no check since (the service stopped again):
        # that hour is unknown, in the endpoint and in today's bar alike.
        for at, unknown_today in ((now, 6900), (now + HOUR, 6900 + HOUR)):
            clock = Clock(float(at))
            app = create_app(
                dataclasses.replace(deps, clock=clock, status_cache=PageCache(clock=clock))
            )
            async with app.test_app() as test_app:
                client = test_app.test_client()
                api = Api(client, await make_token())
                if at == now:  # the page is made once
                    assert (await api.post("/status-pages", json=page))[0] == 201
                code, body, _ = await api.get(
                    f"/monitors/{mid}/availability",
                    query={"start": day - 86_400, "end": at, "granularity": "day"},
                )
                assert code == 200, body
                yesterday, today = body["series"]
                assert [yesterday[k] for k in ("up_seconds", "down_seconds")] == [21_300, 300]
                assert [today[k] for k in _SECONDS] == [20_400, 1500, 0, unknown_today]
                response = await client.get("/status/honest/summary.json")
                bars = json.loads(await response.get_data())["components"][0]["days"]
            # The bars say what the endpoint says, day by day.
            for bar, figures in zip(bars[-2:], (yesterday, today), strict=True):
                percent = figures["uptime_percent"]
                assert bar["uptime_percent"] == math.floor(percent * 1000) / 1000

        # The rollups hold the closed periods: all of yesterday; today until the stop
        # (the open period since 06:00 is added when read).
        async def per_day(connection: Any) -> list[Any]:
            return list(
                await connection.fetch(
                    "SELECT hour - hour % 86400 AS day, sum(up_seconds) AS up, "
                    "sum(down_seconds) AS down FROM check_rollups WHERE monitor_id = $1 "
                    "GROUP BY 1 ORDER BY 1",
                    mid,
                )
            )

        assert [tuple(r) for r in await db.run(per_day)] == [
            (day - 86_400, 21_300, 300),
            (day, 20_400 - 2 * HOUR, 1500),
        ]
