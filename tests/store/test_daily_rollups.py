"""The daily seconds (``daily_rollups``; ``store.rollups``, Daily seconds): written in the
statements that write the hourly rollups (a batch of checks, a pause, a resume), always
the sum of a day's hourly rows, backfilled by migration 0029 from the hourly rows before
it, and purged with them (a day the cutoff cuts keeps the hours that stay)."""

from __future__ import annotations

from typing import Any

import asyncpg
import trio
import trio_asyncio

from store import (
    CheckRecord,
    Database,
    apply_migrations,
    checks,
    monitors,
)
from store.maintenance import MaintenanceSettings, maintain
from tests.store import test_quorum as quorum_tests
from tests.store.helpers import change_of, new_monitor, one_check

DAY = 86_400
D = 1_790_035_200  # a midnight UTC (2026-09-22)
assert D % DAY == 0


async def _days(db: Database, monitor_id: str) -> dict[int, tuple[int, int, int]]:
    """The monitor's daily rows, ``day -> (up, down, paused)`` seconds."""

    async def read(connection: Any) -> list[Any]:
        return list(
            await connection.fetch(
                "SELECT day, up_seconds, down_seconds, paused_seconds FROM daily_rollups "
                "WHERE monitor_id = $1",
                monitor_id,
            )
        )

    return {int(r[0]): (int(r[1]), int(r[2]), int(r[3])) for r in await db.run(read)}


async def _hourly_by_day(db: Database, monitor_id: str) -> dict[int, tuple[int, int, int]]:
    """The monitor's hourly rows summed per UTC day (what a page read before 0029)."""

    async def read(connection: Any) -> list[Any]:
        return list(
            await connection.fetch(
                "SELECT hour - hour % 86400, sum(up_seconds), sum(down_seconds), "
                "sum(paused_seconds) FROM check_rollups WHERE monitor_id = $1 GROUP BY 1",
                monitor_id,
            )
        )

    return {int(r[0]): (int(r[1]), int(r[2]), int(r[3])) for r in await db.run(read)}


async def _history(db: Database) -> str:
    """A monitor up from ``D - 3000``, down ``D + 600`` to ``D + 1200`` and up again, all
    written by one batch whose periods cross midnight ``D``."""
    monitor = await new_monitor(db, created=D - 7200, interval_seconds=3600)
    await db.run(checks.ensure_partitions, D - DAY, D + DAY, DAY)
    first = one_check(monitor.id, "up", D - 3000)
    second = one_check(monitor.id, "down", D + 600)
    third = one_check(monitor.id, "up", D + 1200)
    await db.transaction(
        checks.write_check_batch,
        [first, second, third],
        [
            change_of(first, "pending", "up"),
            change_of(second, "up", "down"),
            change_of(third, "down", "up"),
        ],
    )
    return monitor.id


async def test_one_batch_across_midnight_writes_each_day_its_seconds(db: Database) -> None:
    with trio.fail_after(10):
        monitor_id = await _history(db)
        expected = {D - DAY: (3000, 0, 0), D: (600, 600, 0)}
        assert await _days(db, monitor_id) == expected
        assert await _hourly_by_day(db, monitor_id) == expected


async def test_a_retried_batch_adds_nothing_twice(db: Database) -> None:
    with trio.fail_after(10):
        monitor_id = await _history(db)
        before = await _days(db, monitor_id)
        rows = await db.run(
            lambda c: c.fetch(
                "SELECT id, status, created FROM checks WHERE monitor_id = $1 ORDER BY created",
                monitor_id,
            )
        )
        again = [
            CheckRecord(
                id=r["id"],
                monitor_id=monitor_id,
                status=r["status"],
                response_time_ms=1.5,
                status_code=None,
                error_code=None,
                error_message=None,
                created=int(r["created"]),
            )
            for r in rows
        ]
        changes = [
            change_of(again[0], "pending", "up"),
            change_of(again[1], "up", "down"),
            change_of(again[2], "down", "up"),
        ]
        await db.transaction(checks.write_check_batch, again, changes)
        assert await _days(db, monitor_id) == before


async def _paused_and_resumed(db: Database) -> str:
    """:func:`_history`, then paused at ``D + 3000`` and resumed at ``D + DAY + 100``."""
    monitor_id = await _history(db)
    account = await db.run(
        lambda c: c.fetchval("SELECT account_id FROM monitors WHERE id = $1", monitor_id)
    )
    # the up period from D + 1200 closes at the pause, the paused one at the resume
    await db.transaction(monitors.pause_monitor, account, monitor_id, D + 3000)
    await db.transaction(monitors.resume_monitor, account, monitor_id, D + DAY + 100)
    return monitor_id


async def test_a_pause_and_a_resume_add_the_periods_they_close(db: Database) -> None:
    with trio.fail_after(10):
        monitor_id = await _paused_and_resumed(db)
        expected = {D - DAY: (3000, 0, 0), D: (2400, 600, DAY - 3000), D + DAY: (0, 0, 100)}
        assert await _days(db, monitor_id) == expected
        assert await _hourly_by_day(db, monitor_id) == expected


async def test_the_purge_drops_whole_days_and_keeps_the_hours_that_stay(db: Database) -> None:
    with trio.fail_after(20):
        monitor_id = await _paused_and_resumed(db)
        settings = MaintenanceSettings(rollup_retention_days=1)
        # cutoff D + 7200: day D - DAY goes whole; day D loses its hours 00 and 01 (up,
        # down and the first 4,200 paused seconds) and keeps the paused hours after them
        await maintain(db, settings, partition_seconds=DAY, now=D + DAY + 7200)
        expected = {D: (0, 0, DAY - 7200), D + DAY: (0, 0, 100)}
        assert await _days(db, monitor_id) == expected
        assert await _hourly_by_day(db, monitor_id) == expected


_BEFORE = """
INSERT INTO accounts (id, name, created) VALUES ('acct_1', 'acme', {d});
INSERT INTO check_rollups (monitor_id, hour, checks, up_seconds, down_seconds, paused_seconds)
VALUES ('mon_1', {d} - 3600, 60, 3000, 600, 0),
       ('mon_1', {d} - 7200, 60, 3600, 0, 0),
       ('mon_1', {d}, 10, 0, 0, 3600),
       ('mon_2', {d} + 3600, 60, 1800, 1800, 0);
"""


async def test_0029_backfills_the_days_from_the_hourly_rollups(empty_database_url: str) -> None:
    async def on_asyncio() -> list[Any]:
        conn = await asyncpg.connect(empty_database_url)
        try:
            await apply_migrations(conn, up_to=28)
            await conn.execute(_BEFORE.format(d=D))
            assert await apply_migrations(conn, up_to=29) == ["0029_daily_rollups.sql"]
            return list(
                await conn.fetch(
                    "SELECT monitor_id, day, up_seconds, down_seconds, paused_seconds "
                    "FROM daily_rollups ORDER BY 1, 2"
                )
            )
        finally:
            await conn.close()

    with trio.fail_after(30):
        rows = await trio_asyncio.aio_as_trio(on_asyncio)()
    assert [tuple(r) for r in rows] == [
        ("mon_1", D - DAY, 6600, 600, 0),
        ("mon_1", D, 0, 0, 3600),
        ("mon_2", D, 1800, 1800, 0),
    ]


async def test_a_deleted_monitor_takes_its_days_with_it(db: Database) -> None:
    with trio.fail_after(10):
        monitor_id = await _history(db)
        account = await db.run(
            lambda c: c.fetchval("SELECT account_id FROM monitors WHERE id = $1", monitor_id)
        )
        assert await _days(db, monitor_id)
        assert await db.transaction(monitors.delete_monitor, account, monitor_id, D + DAY)
        assert await _days(db, monitor_id) == {}


async def test_a_monitor_with_regions_keeps_the_quorum_seconds_by_day(db: Database) -> None:
    with trio.fail_after(20):
        monitor_id = await quorum_tests._monitor(db)  # three regions, quorum 2
        write = quorum_tests._write
        for region in quorum_tests.REGIONS:
            await write(db, monitor_id, region, "up", D - 30, moved_from="pending")
        await write(db, monitor_id, "eu-west", "down", D - 20, moved_from="up")
        await write(db, monitor_id, "us-east", "down", D - 10, moved_from="up")  # 2 of 3
        await write(db, monitor_id, "ap-south", "up", D + 2)
        await write(db, monitor_id, "eu-west", "up", D + 5, moved_from="down")  # 1 of 3
        days = await _days(db, monitor_id)
        hourly = await _hourly_by_day(db, monitor_id)
        assert days == {k: v for k, v in hourly.items() if v != (0, 0, 0)}
        assert days[D - DAY][0] > 0 and days[D - DAY][1] > 0 and days[D][1] > 0, days
