"""The maintenance a public status page reads (``store.page_maintenance``;
docs/status-pages.md, Maintenance): the monitors under maintenance now, and the
occurrences of the next 7 days listed in order, without canceled, ended, completed or
unrelated ones; one statement on the indexes, however many components. Real Postgres;
times are explicit epoch seconds."""

from __future__ import annotations

from typing import Any

import trio

from store import Connection, Database, new_id, page_maintenance, status_pages, windows
from tests.store.helpers import new_heartbeat, new_monitor, new_window
from tests.store.test_windows import DAILY_UTC as NIGHTLY
from tests.store.test_windows import DAY, T0
from tests.store.test_windows import _two_am as two_am


async def _read(db: Database, account: str, ids: list[str], at: int) -> Any:
    return await db.run(page_maintenance.read, account, ids, at)


async def test_the_page_lists_the_next_7_days_in_order_and_nothing_else(db: Database) -> None:
    with trio.fail_after(20):
        a = await new_monitor(db, created=T0 - DAY)
        b = await new_monitor(db, created=T0 - DAY)
        off_page = await new_monitor(db, created=T0 - DAY)
        beat = await new_heartbeat(db, created=T0 - DAY)
        account = a.account_id
        before = T0 - 1_000  # when the windows were written

        async def window(resources: list[str], title: str, **fields: Any) -> str:
            made = await new_window(db, account, resources, now=before, title=title, **fields)
            return made.id

        await window([a.id], "Upgrade", starts_at=T0 - 600, ends_at=T0 + 600, description="d")
        await window([off_page.id, b.id], "Move", starts_at=T0 + 2 * DAY, ends_at=T0 + 2 * DAY + 60)
        await window([a.id], "Last in", starts_at=T0 + 7 * DAY - 1, ends_at=T0 + 7 * DAY + 60)
        await window([b.id], "Too late", starts_at=T0 + 7 * DAY, ends_at=T0 + 7 * DAY + 60)
        await window([b.id], "Next month", starts_at=T0 + 8 * DAY, ends_at=T0 + 8 * DAY + 60)
        await window([a.id], "Completed", starts_at=T0 - 7_200, ends_at=T0 - 3_600)
        ended = await window([a.id], "Ended", starts_at=T0 - 900, ends_at=T0 + 3_600)
        await db.transaction(windows.end_window, account, ended, T0 - 50)
        canceled = await window([b.id], "Canceled", recurrence=NIGHTLY)
        await db.transaction(windows.cancel_window, account, canceled, T0 - 10)
        await window([b.id], "Nightly", recurrence=NIGHTLY)
        await window([off_page.id], "Elsewhere", starts_at=T0 - 60, ends_at=T0 + 60)
        await window([beat.id], "Backup job", starts_at=T0 - 60, ends_at=T0 + 60)

        found = await _read(db, account, [a.id, b.id], T0)
        assert found.under_maintenance == {a.id}
        listed = [(m.title, m.starts_at, m.ends_at, m.monitors) for m in found.listed]
        nightly = [("Nightly", two_am(k), two_am(k) + 3_600, [b.id]) for k in range(1, 8)]
        assert (
            listed
            == [
                ("Upgrade", T0 - 600, T0 + 600, [a.id]),
                *nightly[:2],
                ("Move", T0 + 2 * DAY, T0 + 2 * DAY + 60, [b.id]),  # only the page's monitors
                *nightly[2:],
                ("Last in", T0 + 7 * DAY - 1, T0 + 7 * DAY + 60, [a.id]),
            ]
        )
        assert found.listed[0].description == "d" and found.listed[1].description is None

        # an occurrence is in progress on [starts_at, ends_at) and gone once it ends
        assert (await _read(db, account, [a.id, b.id], T0 - 901)).under_maintenance == set()
        later = await _read(db, account, [a.id, b.id], T0 + 600)
        assert later.under_maintenance == set() and later.listed[0].title == "Nightly"
        night = await _read(db, account, [a.id, b.id], two_am(1))
        assert night.under_maintenance == {b.id}
        assert (await _read(db, account, [], T0)).listed == []


async def test_a_busy_page_lists_50_occurrences_in_progress_first(db: Database) -> None:
    with trio.fail_after(20):
        a = await new_monitor(db, created=T0 - DAY)
        hourly = {**NIGHTLY, "rrule": "FREQ=HOURLY", "duration_seconds": 600}
        await new_window(db, a.account_id, [a.id], now=T0 - 1_000, recurrence=hourly)
        await new_window(db, a.account_id, [a.id], now=T0 - 1_000, starts_at=T0 - 5, ends_at=T0 + 5)
        found = await _read(db, a.account_id, [a.id], T0)
        assert len(found.listed) == page_maintenance.MAX_LISTED
        assert found.listed[0].starts_at == T0 - 5 and found.under_maintenance == {a.id}
        starts = [m.starts_at for m in found.listed[1:]]
        assert starts == sorted(starts) and all(s > T0 for s in starts)


class _Counting:
    """A connection that counts the statements sent through it (the real one runs them)."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.statements = 0

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.connection, name)
        if name in ("fetch", "fetchrow", "fetchval", "execute"):
            self.statements += 1
        return method


async def test_one_statement_on_the_indexes_whatever_the_number_of_components(
    db: Database,
) -> None:
    with trio.fail_after(60):
        first = await new_monitor(db, created=T0 - DAY)
        account = first.account_id
        ids = [first.id] + [(await new_monitor(db, created=T0 - DAY)).id for _ in range(99)]
        for k, monitor_id in enumerate(ids):
            starts = T0 - 60 if k % 3 else T0 + (k + 1) * 600
            await new_window(
                db, account, [monitor_id], now=T0 - 1_000, starts_at=starts, ends_at=T0 + DAY
            )

        async def statements(page_ids: list[str]) -> tuple[int, int]:
            components = [
                {"monitor": m, "name": f"c{k}", "group": None} for k, m in enumerate(page_ids)
            ]
            values = {
                "id": new_id("stp"),
                "account_id": account,
                "name": "p",
                "slug": f"page-{len(page_ids)}",
                "description": None,
                "components": components,
                "created": T0,
                "updated": T0,
                "metadata": {},
            }
            await db.transaction(status_pages.insert_status_page, values)

            async def count(connection: Connection) -> tuple[int, int]:
                counting = _Counting(connection)
                page = await status_pages.public_page(counting, values["slug"], T0)  # type: ignore[arg-type]
                assert page is not None
                return counting.statements, len(page.maintenance.under_maintenance)

            return await db.run(count)

        assert await statements(ids[:1]) == (5, 0)  # no incident: query 5 is not sent
        # 66 under maintenance, more than a page lists: each is told all the same
        assert await statements(ids) == (5, 66)

        async def plan(connection: Connection) -> str:
            await connection.execute("SET LOCAL enable_seqscan = off")
            rows = await connection.fetch(
                "EXPLAIN " + page_maintenance._SQL, ids, T0, T0 + 7 * DAY, account
            )
            return "\n".join(r[0] for r in rows)

        text = await db.transaction(plan)
        assert "maintenance_window_resources_by_resource" in text, text
        assert "maintenance_occurrences_by_end" in text, text
