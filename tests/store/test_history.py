"""History (docs/history.md): partitioned checks, rollups written with the checks, status
periods, availability, retention, and the migration that moves old checks.

Histories are built through the real store (``write_check_batch``, pause and resume) at
chosen epoch seconds, and the figures asserted exactly; percentiles are compared with a
brute-force nearest-rank computation over the raw checks. Real embedded Postgres, a
fresh database per test.
"""

from __future__ import annotations

import math
import random
from typing import Any

import trio

from store import (
    Database,
    MaintenanceSettings,
    StatusChange,
    apply_migrations,
    checks,
    maintain,
    monitors,
    open_database,
    rollups,
)
from tests.store.helpers import (
    DAY,
    H0,
    HOUR,
    T0,
    check_records,
    new_monitor,
    read_availability,
    run_epoch,
    seconds_of,
    write_checks,
)


async def _monitor(db: Database, created: int = T0) -> str:
    return (await new_monitor(db, created=created)).id


async def test_sql_and_python_agree_on_histogram_buckets(db: Database) -> None:
    with trio.fail_after(10):
        values = [0.0, 0.0005, 0.001, 0.00111, 0.2, 0.25, 1.0, 3.3, 99.9, 1234.5, 60_000.0, 1e9]

        async def buckets(connection: Any) -> list[int]:
            rows = await connection.fetch(
                "SELECT histogram_bucket(v) AS b FROM unnest($1::float8[]) WITH ORDINALITY "
                "AS u(v, o) ORDER BY o",
                values,
            )
            return [r["b"] for r in rows]

        assert await db.run(buckets) == [rollups.bucket_of(v) for v in values]


async def test_up_99_minutes_down_1_is_exact_in_seconds_checks_and_series(db: Database) -> None:
    with trio.fail_after(15):
        mid = await _monitor(db)
        await write_checks(db, mid, [T0], moved_from="pending")
        await write_checks(db, mid, [T0 + 60 * k for k in range(1, 99)])
        await write_checks(db, mid, [T0 + 99 * 60], status="down", moved_from="up")
        await write_checks(db, mid, [T0 + 100 * 60], moved_from="down")
        now = T0 + 100 * 60
        whole, _ = await read_availability(db, mid, T0, now, now=now)
        assert seconds_of(whole) == (5940, 60, 0, 0)
        assert whole.uptime_percent == 99.0
        # The check at `now` is outside [T0, now): 100 checks, one of them failed.
        assert (whole.checks, whole.failed_checks, whole.longest_down_seconds) == (100, 1, 60)
        whole, series = await read_availability(db, mid, T0, now, now=now, granularity="hour")
        assert [(p.start, p.end) for p in series] == [
            (T0, H0 + HOUR),
            (H0 + HOUR, now),
        ]
        assert [seconds_of(p) for p in series] == [(3000, 0, 0, 0), (2940, 60, 0, 0)]
        assert [p.checks for p in series] == [50, 50]
        assert sum(p.checks for p in series) == whole.checks

        # The rollups' closed periods alone: the down minute sits in the second hour.
        async def rows(connection: Any) -> list[Any]:
            return list(
                await connection.fetch(
                    "SELECT hour, up_seconds, down_seconds, checks FROM check_rollups "
                    "WHERE monitor_id = $1 ORDER BY hour",
                    mid,
                )
            )

        assert [tuple(r) for r in await db.run(rows)] == [
            (H0, 3000, 0, 50),
            (H0 + HOUR, 2940, 60, 51),
        ]


async def test_a_pause_in_the_middle_counts_paused_and_pending_is_unknown(db: Database) -> None:
    with trio.fail_after(15):
        mid = await _monitor(db)
        record = await db.run(monitors.get_monitor, None, mid)
        assert record is not None
        await write_checks(db, mid, [T0], moved_from="pending")
        await write_checks(db, mid, list(range(T0 + 60, T0 + 1800, 60)))  # checked until paused
        await db.transaction(monitors.pause_monitor, record.account_id, mid, T0 + 1800)
        await db.transaction(monitors.resume_monitor, record.account_id, mid, T0 + 3000)
        await write_checks(db, mid, [T0 + 3010], moved_from="pending")
        now = T0 + 5400
        await write_checks(db, mid, list(range(T0 + 3070, now, 60)))
        whole, _ = await read_availability(db, mid, T0, now, now=now)
        assert seconds_of(whole) == (1800 + 2390, 0, 1200, 10)
        assert whole.uptime_percent == 100.0
        # A late result of the paused run writes no status: the epoch moved on.
        whole, _ = await read_availability(db, mid, T0 + 1800, T0 + 3000, now=now)
        assert seconds_of(whole) == (0, 0, 1200, 0) and whole.uptime_percent is None


async def test_a_range_before_creation_and_past_retention_is_unknown(db: Database) -> None:
    with trio.fail_after(15):
        mid = await _monitor(db)
        await write_checks(db, mid, [T0], moved_from="pending")
        now = T0 + 2 * HOUR
        await write_checks(db, mid, list(range(T0 + 60, now, 60)))
        whole, _ = await read_availability(db, mid, T0 - HOUR, T0 + HOUR, now=now)
        assert seconds_of(whole) == (HOUR, 0, 0, HOUR)
        whole, _ = await read_availability(
            db, mid, T0 - HOUR, T0 + HOUR, now=now, rollup_cutoff=T0 + 900
        )
        assert seconds_of(whole) == (HOUR - 900, 0, 0, HOUR + 900)
        whole, _ = await read_availability(db, mid, now - 600, now + 600, now=now)
        assert seconds_of(whole) == (600, 0, 0, 600), "the future is unknown"


async def test_a_down_period_across_an_hour_and_a_day_is_split_by_the_hour(db: Database) -> None:
    with trio.fail_after(15):
        day = H0 - 5 * HOUR + DAY  # the next midnight, UTC
        created = day - 2 * HOUR - 600
        mid = await _monitor(db, created)
        now = day + 2 * HOUR
        await write_checks(db, mid, [created], moved_from="pending")
        await write_checks(db, mid, list(range(created + 60, day - 300, 60)))
        await write_checks(db, mid, [day - 300], status="down", moved_from="up")
        await write_checks(db, mid, list(range(day - 240, day + 180, 60)), status="down")
        await write_checks(db, mid, [day + 180], moved_from="down")
        await write_checks(db, mid, list(range(day + 240, now, 60)))
        whole, days = await read_availability(db, mid, created, now, now=now, granularity="day")
        assert seconds_of(whole) == (now - created - 480, 480, 0, 0)
        assert whole.longest_down_seconds == 480
        assert [(p.down_seconds, p.longest_down_seconds) for p in days] == [(300, 300), (180, 180)]
        _, hours = await read_availability(
            db, mid, day - HOUR, day + HOUR, now=now, granularity="hour"
        )
        assert [seconds_of(p) for p in hours] == [(HOUR - 300, 300, 0, 0), (HOUR - 180, 180, 0, 0)]


def _nearest_rank(values: list[float], percent: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(percent / 100 * len(ordered))) - 1]


async def test_percentiles_are_within_5_percent_of_the_raw_checks(db: Database) -> None:
    with trio.fail_after(20):
        rng = random.Random(7)
        mid = await _monitor(db)
        times = [T0 + 15 * k for k in range(3 * 240)]  # three hours, every 15 s
        latencies = [rng.lognormvariate(-1.0, 0.9) for _ in times]
        await write_checks(db, mid, times[:1], moved_from="pending", response_ms=latencies[:1])
        for k in range(1, len(times), 100):
            await write_checks(db, mid, times[k : k + 100], response_ms=latencies[k : k + 100])
        now = times[-1] + 60
        start, end = T0 + 1234, T0 + 3 * HOUR - 777  # edges from raw checks, hours from rollups
        inside = [ms for t, ms in zip(times, latencies, strict=True) if start <= t < end]
        whole, _ = await read_availability(db, mid, start, end, now=now)
        assert whole.checks == len(inside)
        figures = whole.response_time_ms()
        mean = figures["mean"]
        assert mean is not None and abs(mean - sum(inside) / len(inside)) < 0.001
        for name, percent in (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99)):
            exact, read = _nearest_rank(inside, percent), figures[name]
            assert read is not None and abs(read - exact) <= 0.05 * exact, (name, read, exact)


async def test_a_retried_batch_counts_nothing_twice(db: Database) -> None:
    with trio.fail_after(15):
        mid = await _monitor(db)
        await write_checks(db, mid, [T0], moved_from="pending")
        records = check_records(mid, [T0 + 60, T0 + 120], status="down")
        change = StatusChange(
            monitor_id=mid,
            check_id=records[0].id,
            from_status="up",
            to_status="down",
            run_epoch=await run_epoch(db, mid),
            created=T0 + 60,
        )
        for _ in range(2):  # the second as after a lost commit acknowledgement
            await db.transaction(checks.write_check_batch, records, [change])
        whole, _ = await read_availability(db, mid, T0, T0 + 180, now=T0 + 180)
        assert (whole.checks, whole.failed_checks) == (3, 2)
        assert seconds_of(whole) == (60, 120, 0, 0)


async def test_retention_drops_whole_partitions_and_keeps_their_number_flat(
    db: Database,
) -> None:
    with trio.fail_after(30):
        mid = await _monitor(db, T0 - 3 * DAY)
        settings = MaintenanceSettings(check_retention_days=1, partitions_ahead=2)
        width = HOUR  # a test-sized partition

        async def partitions(connection: Any) -> list[str]:
            rows = await connection.fetch("SELECT name FROM check_partition_bounds()")
            return sorted(r["name"] for r in rows)

        async def stored(connection: Any) -> int:
            return int(await connection.fetchval("SELECT count(*) FROM checks"))

        counts: list[int] = []
        written: list[int] = []  # every check's `created`, every round's
        for step in range(4):  # four rounds, an hour apart: each crosses a boundary
            now = T0 + step * HOUR
            times = list(range(now - 2 * DAY, now, 600))
            written += times
            await db.run(checks.ensure_partitions, min(times), max(times), width)
            await db.transaction(
                checks.write_check_batch,
                check_records(mid, times),
                [],
            )
            report = await maintain(db, settings, partition_seconds=width, now=now)
            assert report.dropped_partitions, "every round has partitions past retention"
            names = await db.run(partitions)
            counts.append(len(names))
            first = min(int(n.removeprefix("checks_p")) for n in names)
            assert first + width > now - DAY, "nothing older than the retention is kept"
            assert await db.run(stored) == len([t for t in written if t >= first])
        assert len(set(counts)) == 1, counts  # flat: one dropped for one made


async def test_the_migration_moves_existing_checks_and_rolls_them_up(
    empty_database_url: str,
) -> None:
    with trio.fail_after(30):
        async with open_database(empty_database_url, min_size=1, max_size=2) as db:
            await db.run(apply_migrations, 2)
            mid = "mon_old"

            async def old_checks(connection: Any) -> None:
                # Rows as schema 2 held them (the code of today writes schema 4's).
                await connection.execute(
                    "INSERT INTO accounts (id, name, created) VALUES ('acct_old', 'old', $1)", T0
                )
                await connection.execute(
                    "INSERT INTO monitors (id, account_id, name, url, type, status, "
                    "interval_seconds, timeout_seconds, created, updated) VALUES ($1, "
                    "'acct_old', 'm', '127.0.0.1:1', 'tcp', 'pending', 60, 5, $2, $2)",
                    mid,
                    T0,
                )
                await connection.execute(
                    "INSERT INTO checks (id, monitor_id, status, response_time_ms, created) "
                    "SELECT 'chk_old' || k, $1, CASE WHEN k % 10 = 0 THEN 'down' ELSE 'up' "
                    "END, k, $2 + k * 60 FROM generate_series(1, 3000) AS k",
                    mid,
                    T0,
                )

            await db.run(old_checks)
            assert await db.run(apply_migrations, 3) == ["0003_history.sql"]

            async def figures(connection: Any) -> tuple[int, int, int]:
                row = await connection.fetchrow(
                    "SELECT (SELECT count(*) FROM checks) AS n, "
                    "(SELECT sum(checks) FROM check_rollups) AS rolled, "
                    "(SELECT sum(failed_checks) FROM check_rollups) AS failed"
                )
                return int(row["n"]), int(row["rolled"]), int(row["failed"])

            assert await db.run(figures) == (3000, 3000, 300)
            await db.run(apply_migrations)  # today's code reads today's schema
            page, _ = await db.run(checks.list_checks, mid, limit=2, starting_after="chk_old3000")
            assert [c.id for c in page] == ["chk_old2999", "chk_old2998"]

            async def last_checks(connection: Any) -> list[Any]:
                rows = await connection.fetch(
                    "SELECT last_check FROM check_rollups WHERE monitor_id = $1 "
                    "ORDER BY hour DESC LIMIT 2",
                    mid,
                )
                return [r["last_check"] for r in rows]

            # Migration 0013: the newest hour knows its last check; older ones need not.
            assert await db.run(last_checks) == [T0 + 3000 * 60, None]
