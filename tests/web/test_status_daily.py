"""The public page reads its 90 days from the daily seconds (``daily_rollups``;
``store.rollups``, Daily seconds) and renders, byte for byte, the page the hourly rollups
summed per day give (how the page read them before): over a history written by the
store's own paths with up, down, paused and resumed periods, unknown spans (no check for
more than two intervals), moves and periods across midnight UTC, an open period into
today's partial day, a monitor never checked and one under maintenance. Real app on real
Postgres; the page's clock is injected, so nothing sleeps."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import TYPE_CHECKING, Any

import trio
from markupsafe import escape

from store import CheckRecord, Database, checks, monitors, new_check_id, status_pages
from tests.api import Api
from tests.web import test_status_public
from tests.web.helpers import create_monitor, expect, set_times
from tests.web.status_helpers import Clock, fetch, move
from web.public.status_pages import _groups, _render
from web.public.status_view import format_percent, summary

if TYPE_CHECKING:
    from quart.typing import TestClientProtocol

DAY = 86_400
clock = test_status_public.clock
deps = test_status_public.deps
"""The page's clock (wall and cache) and the app using it."""


async def _checked(db: Database, monitor_id: str, status: str, at: int) -> None:
    """One check at ``at`` (epoch seconds) that moves nothing, through the batch path."""
    await db.run(checks.ensure_partitions, at, at, DAY)
    check = CheckRecord(
        id=new_check_id(at),
        monitor_id=monitor_id,
        status=status,
        response_time_ms=12.0,
        status_code=None,
        error_code=None if status == "up" else "connection_refused",
        error_message=None if status == "up" else "Connection refused",
        created=at,
    )
    await db.transaction(checks.write_check_batch, [check], [])


def _bar_by_bar(days: list[dict[str, Any]]) -> str:
    """A component's bars as the page writes them (docs/status-pages.md, HTML hooks), each
    bar built and escaped on its own: what the builder, which escapes each distinct
    level, label and date once a page, must give byte for byte."""
    parts = []
    for d in days:
        percent = d["uptime_percent"]
        label = f"{d['date']}: {format_percent(percent)}" + ("" if percent is None else " uptime")
        parts.append(
            f'<li class="bar" data-level="{escape(d["level"])}"><span>{escape(label)}</span></li>'
        )
    return "".join(parts)


async def _hourly_by_day(db: Database, first: int) -> dict[tuple[str, int], tuple[int, int]]:
    """The page's read before the daily seconds: hourly rows summed per UTC day."""

    async def read(connection: Any) -> list[Any]:
        return list(
            await connection.fetch(
                "SELECT monitor_id, hour - hour % 86400 AS day, sum(up_seconds) AS up, "
                "sum(down_seconds) AS down FROM check_rollups WHERE hour >= $1 GROUP BY 1, 2",
                first,
            )
        )

    return {
        (r["monitor_id"], int(r["day"])): (int(r["up"]), int(r["down"])) for r in await db.run(read)
    }


async def _daily(db: Database, first: int) -> dict[tuple[str, int], tuple[int, int]]:
    async def read(connection: Any) -> list[Any]:
        return list(
            await connection.fetch(
                "SELECT monitor_id, day, up_seconds, down_seconds FROM daily_rollups "
                "WHERE day >= $1",
                first,
            )
        )

    return {(r[0], int(r[1])): (int(r[2]), int(r[3])) for r in await db.run(read)}


async def test_the_page_from_daily_seconds_is_the_page_from_hourly_rollups(
    api: Api, db: Database, client: TestClientProtocol, clock: Clock
) -> None:
    with trio.fail_after(60):
        real = int(clock())
        today = real // DAY * DAY - DAY  # a day before: every write is in the past
        now = today + 12 * 3600
        clock.t = now
        ids = {}
        for name in ("web", "api", "jobs", "new"):
            every = DAY if name == "web" else 3600  # web's checks a day apart are no gap
            monitor = await create_monitor(api, name=name, interval_seconds=every)
            ids[name] = monitor["id"]
            created = now - DAY if name == "new" else today - 6 * DAY
            await set_times(db, "monitors", ids[name], created=created, updated=created)
        web, api_id, jobs = ids["web"], ids["api"], ids["jobs"]
        account = await db.run(
            lambda c: c.fetchval("SELECT account_id FROM monitors WHERE id = $1", web)
        )

        # web (checked daily): up, down across midnight, up; no check for over two days
        # (unknown), then today's checks: its open period counts to now
        await move(db, web, "up", today - 6 * DAY + 100)
        await _checked(db, web, "up", today - 5 * DAY)
        await _checked(db, web, "up", today - 4 * DAY)
        await move(db, web, "down", today - 3 * DAY - 600)  # 99.3 % the day before
        await move(db, web, "up", today - 3 * DAY + 5400)
        await _checked(db, web, "up", today - 2 * DAY)
        await _checked(db, web, "up", today + 6 * 3600)
        await _checked(db, web, "up", today + 11 * 3600 + 1800)
        # api (hourly): up, unknown from an hour after each check to the next, down since
        # yesterday evening into today, in a window now
        await move(db, api_id, "up", today - 6 * DAY + 100)
        await move(db, api_id, "down", today - 6400)
        await _checked(db, api_id, "down", today + 11 * 3600)
        expect(
            await api.post(
                "/maintenance-windows",
                json={
                    "title": "Database upgrade",
                    "monitors": [api_id],
                    "starts_at": now - 3600,
                    "ends_at": real + 3600,  # open at now, and not ended in real time
                },
            ),
            201,
        )
        # jobs: up, paused for two days, resumed, up, paused again since this morning
        await move(db, jobs, "up", today - 5 * DAY)
        await db.transaction(monitors.pause_monitor, account, jobs, today - 4 * DAY + 300)
        await db.transaction(monitors.resume_monitor, account, jobs, today - 2 * DAY)
        await move(db, jobs, "up", today - 2 * DAY + 600)
        await db.transaction(monitors.pause_monitor, account, jobs, today + 3 * 3600)

        components = [
            {"monitor": web, "name": "Website"},
            {"monitor": api_id, "name": "API", "group": "Backend"},
            {"monitor": jobs, "name": "Jobs", "group": "Backend"},
            {"monitor": ids["new"], "name": "New"},
        ]
        body = {"name": "Mixed", "slug": "mixed", "components": components}
        expect(await api.post("/status-pages", json=body), 201)

        first = today - (status_pages.DAYS - 1) * DAY
        hourly, daily = await _hourly_by_day(db, first), await _daily(db, first)
        assert {k: daily.get(k, (0, 0)) for k in hourly | daily} == {
            k: hourly.get(k, (0, 0)) for k in hourly | daily
        }

        data = await db.run(status_pages.public_page, "mixed", now)
        assert data is not None
        # the page as the hourly rows give it: the closed periods' seconds of each day
        # replaced by the hourly sums (the open period, added on read, stays)
        old_days = {
            m: [
                (
                    up - daily.get((m, start), (0, 0))[0] + hourly.get((m, start), (0, 0))[0],
                    down - daily.get((m, start), (0, 0))[1] + hourly.get((m, start), (0, 0))[1],
                )
                for start, (up, down) in zip(data.day_starts, days, strict=True)
            ]
            for m, days in data.days.items()
        }
        old = _render(dataclasses.replace(data, days=old_days))
        new = _render(data)
        assert new.html == old.html and new.json == old.json
        _, _, served = await fetch(client, "/status/mixed")
        assert served.encode() == old.html

        # the history is the varied one it means to be: every level, today partial
        shown = json.loads(old.json)["components"]
        assert {d["level"] for c in shown for d in c["days"]} == {"none", "full", "partial", "low"}
        assert [c["state"] for c in shown] == [
            "operational",
            "under_maintenance",
            "paused",
            "unknown",
        ]

        # the bars, bar by bar, and the summary as json.dumps writes it
        written = re.findall(r'<ol class="bars"[^>]*>\s*(.*?)\s*</ol>', new.html.decode(), re.S)
        grouped = [c for group in _groups(shown) for c in group["components"]]
        assert written == [_bar_by_bar(c["days"]) for c in grouped]
        dumped = json.dumps(summary(data), separators=(",", ":"), ensure_ascii=False)
        assert new.json == dumped.encode()
