"""Maintenance time in availability (docs/history.md, Maintenance): the occurrences of
windows with ``exclude_from_availability`` covering a monitor count as
``maintenance_seconds``, taken from the status each second had (up, down, paused or
unknown), so the five seconds fields still add up to the range and ``uptime_percent`` leaves
them out. Histories are written through the store actor's real batch path at chosen epoch
seconds, windows through ``store.windows``; real embedded Postgres, a fresh database per
test.
"""

from __future__ import annotations

import random
from typing import Any

import trio

from store import Database, history, monitors, windows
from store.maintenance_spans import merge
from tests.store.helpers import (
    DAY,
    H0,
    HOUR,
    T0,
    new_monitor,
    new_window,
    read_availability,
    write_checks,
)


def five(a: history.Availability) -> tuple[int, int, int, int, int]:
    """``(up, down, paused, unknown, maintenance)`` seconds of ``a``, checked to be whole:
    none negative, and they add up to ``end - start``."""
    figures = (
        a.up_seconds,
        a.down_seconds,
        a.paused_seconds,
        a.unknown_seconds,
        a.maintenance_seconds,
    )
    assert min(figures) >= 0, figures
    assert sum(figures) == a.end - a.start, (figures, a.end - a.start)
    return figures


async def _up_monitor(db: Database, until: int, *, created: int = T0) -> Any:
    """A monitor created at ``created``, checked up every 60 s until ``until``."""
    record = await new_monitor(db, created=created)
    await write_checks(db, record.id, list(range(created, until, 60)), moved_from="pending")
    return record


async def _one_off(db: Database, record: Any, starts_at: int, ends_at: int, **fields: Any) -> Any:
    """A one-off window over ``record`` written at its creation (before the history)."""
    return await new_window(
        db,
        record.account_id,
        [record.id],
        now=record.created,
        starts_at=starts_at,
        ends_at=ends_at,
        **fields,
    )


async def test_a_window_inside_one_hour_is_maintenance_not_up(db: Database) -> None:
    with trio.fail_after(20):
        now = T0 + 3 * HOUR
        record = await _up_monitor(db, now)
        await _one_off(db, record, H0 + HOUR + 600, H0 + HOUR + 1800)
        whole, hours = await read_availability(db, record.id, T0, now, now=now, granularity="hour")
        assert five(whole) == (3 * HOUR - 1200, 0, 0, 0, 1200)
        assert whole.uptime_percent == 100.0
        assert [five(p) for p in hours] == [
            (3000, 0, 0, 0, 0),
            (2400, 0, 0, 0, 1200),
            (3600, 0, 0, 0, 0),
            (600, 0, 0, 0, 0),
        ]
        # Checks in it still count: they were made.
        assert whole.checks == 180


async def test_a_window_across_hour_boundaries_and_partly_outside_the_range(
    db: Database,
) -> None:
    with trio.fail_after(20):
        now = T0 + 4 * HOUR
        record = await _up_monitor(db, now)
        await _one_off(db, record, H0 + HOUR - 900, H0 + 3 * HOUR + 300)
        whole, hours = await read_availability(db, record.id, T0, now, now=now, granularity="hour")
        assert five(whole) == (4 * HOUR - 8400, 0, 0, 0, 8400)
        assert [p.maintenance_seconds for p in hours] == [900, 3600, 3600, 300, 0]
        assert [five(p)[0] for p in hours] == [2100, 0, 0, 3300, 600]
        # A range that begins inside the window and ends inside it (edges, not whole hours).
        whole, _ = await read_availability(db, record.id, H0 + HOUR + 100, H0 + 3 * HOUR, now=now)
        assert five(whole) == (0, 0, 0, 0, 2 * HOUR - 100)
        whole, _ = await read_availability(db, record.id, T0 + 60, H0 + HOUR + 60, now=now)
        assert five(whole) == (3000 - 60 - 900, 0, 0, 0, 960)
        # A range that ends before the window starts has none of it.
        whole, _ = await read_availability(db, record.id, T0, H0 + HOUR - 900, now=now)
        assert five(whole) == (3000 - 900, 0, 0, 0, 0)


async def test_overlapping_windows_count_each_second_once(db: Database) -> None:
    with trio.fail_after(20):
        now = T0 + 3 * HOUR
        record = await _up_monitor(db, now)
        x = H0 + HOUR + 300
        await _one_off(db, record, x, x + 1200)
        await _one_off(db, record, x + 600, x + 1800)
        await _one_off(db, record, x + 100, x + 200)  # inside the first
        whole, hours = await read_availability(db, record.id, T0, now, now=now, granularity="hour")
        assert five(whole) == (3 * HOUR - 1800, 0, 0, 0, 1800)
        assert sum(p.maintenance_seconds for p in hours) == 1800


async def test_a_window_over_a_down_period_takes_it_out_of_down_and_uptime(db: Database) -> None:
    with trio.fail_after(20):
        record = await new_monitor(db, created=T0)
        mid = record.id
        down = H0 + HOUR + 1200
        await write_checks(db, mid, list(range(T0, down, 60)), moved_from="pending")
        await write_checks(
            db, mid, list(range(down, down + 1200, 60)), status="down", moved_from="up"
        )
        now = down + 1800
        await write_checks(db, mid, list(range(down + 1200, now, 60)), moved_from="down")
        whole, _ = await read_availability(db, mid, T0, now, now=now)
        assert five(whole) == (now - T0 - 1200, 1200, 0, 0, 0)
        assert whole.longest_down_seconds == 1200
        # The window covers the first 900 s of the down period and 300 s before it.
        await _one_off(db, record, down - 300, down + 900)
        whole, hours = await read_availability(db, mid, T0, now, now=now, granularity="hour")
        up = now - T0 - 1200 - 300
        assert five(whole) == (up, 300, 0, 0, 1200)
        assert whole.uptime_percent == up * 100.0 / (up + 300)
        assert whole.longest_down_seconds == 300, "the down time outside maintenance"
        assert sum(p.down_seconds for p in hours) == 300
        assert [p.longest_down_seconds for p in hours] == [0, 300]
        # A window over the whole down period: none of it counts.
        await _one_off(db, record, down + 900, down + 1200)
        whole, _ = await read_availability(db, mid, T0, now, now=now)
        assert five(whole) == (up, 0, 0, 0, 1500)
        assert whole.longest_down_seconds == 0 and whole.uptime_percent == 100.0


async def test_a_window_over_an_unknown_span_and_a_pause(db: Database) -> None:
    with trio.fail_after(20):
        record = await new_monitor(db, created=T0)
        mid = record.id
        last = T0 + 1200  # the service stops after this check
        back = last + 660  # unknown [last + 60, back)
        await write_checks(db, mid, list(range(T0, last + 1, 60)), moved_from="pending")
        await write_checks(db, mid, list(range(back, back + 600, 60)))
        await db.transaction(monitors.pause_monitor, record.account_id, mid, back + 600)
        now = back + 1800
        whole, _ = await read_availability(db, mid, T0, now, now=now)
        assert five(whole) == (1260 + 600, 0, 1200, 600, 0)
        # One window over the last 300 s of the unknown span and the first 60 s up after it,
        # one over the last 200 s of the pause and 100 s of the future.
        await _one_off(db, record, back - 300, back + 60)
        await _one_off(db, record, now - 200, now + 100)
        whole, _ = await read_availability(db, mid, T0, now + 100, now=now)
        assert five(whole) == (1260 + 540, 0, 1000, 300 + 100, 560)


async def test_a_window_without_exclude_from_availability_counts_nothing(db: Database) -> None:
    with trio.fail_after(20):
        now = T0 + 2 * HOUR
        record = await _up_monitor(db, now)
        await _one_off(db, record, T0 + 600, T0 + 1800, exclude_from_availability=False)
        whole, _ = await read_availability(db, record.id, T0, now, now=now)
        assert five(whole) == (2 * HOUR, 0, 0, 0, 0)


async def test_a_daily_window_in_a_daily_series_adds_up_day_by_day(db: Database) -> None:
    with trio.fail_after(30):
        created = H0 - 5 * HOUR  # midnight UTC
        now = created + 3 * DAY + 6 * HOUR
        record = await new_monitor(db, created=created, interval_seconds=300)
        await write_checks(db, record.id, list(range(created, now, 300)), moved_from="pending")
        daily = {
            "rrule": "FREQ=DAILY",
            "time_zone": "UTC",
            "start": "2026-01-01T23:30:00",
            "duration_seconds": 3600,
        }
        await new_window(db, record.account_id, [record.id], now=created, recurrence=daily)
        whole, days = await read_availability(
            db, record.id, created, now, now=now, granularity="day"
        )
        # 23:30-00:30 each night (the one open at the window's creation included): 1800 s
        # at each end of each whole day, the first 1800 s of the last.
        assert [five(d) for d in days] == [
            (DAY - 3600, 0, 0, 0, 3600),
            (DAY - 3600, 0, 0, 0, 3600),
            (DAY - 3600, 0, 0, 0, 3600),
            (6 * HOUR - 1800, 0, 0, 0, 1800),
        ]
        assert five(whole)[4] == 3 * 3600 + 1800


async def test_end_and_cancel_keep_the_past_and_delete_gives_it_back(db: Database) -> None:
    with trio.fail_after(20):
        now = T0 + 3 * HOUR
        record = await _up_monitor(db, now)
        window = await _one_off(db, record, T0 + 600, T0 + 2400)
        account = record.account_id
        await db.transaction(windows.end_window, account, window.id, T0 + 1000)
        whole, _ = await read_availability(db, record.id, T0, now, now=now)
        assert five(whole)[4] == 400, "an ended occurrence counts until its end"
        daily = {
            "rrule": "FREQ=HOURLY",
            "time_zone": "UTC",
            "start": "2026-01-01T00:00:00",
            "duration_seconds": 60,
        }
        hourly = await new_window(db, account, [record.id], now=T0, recurrence=daily)
        await db.transaction(windows.cancel_window, account, hourly.id, H0 + HOUR + 1)
        whole, _ = await read_availability(db, record.id, T0, now, now=now)
        assert five(whole)[4] == 400 + 60, "what began before the cancel stays"
        await db.transaction(windows.delete_window, account, window.id, now)
        whole, _ = await read_availability(db, record.id, T0, now, now=now)
        assert five(whole) == (3 * HOUR - 60, 0, 0, 0, 60)


async def _mixed_history(db: Database) -> tuple[Any, int]:
    """A monitor with up, down (across an hour), unknown, paused and pending time, read at
    the returned ``now``, which is down."""
    record = await new_monitor(db, created=T0)
    mid = record.id
    at = H0 + HOUR - 600
    await write_checks(db, mid, list(range(T0, at, 60)), moved_from="pending")
    await write_checks(db, mid, list(range(at, at + 1500, 60)), status="down", moved_from="up")
    at += 1500
    await write_checks(db, mid, list(range(at, at + 900, 60)), moved_from="down")
    at += 900 + 600  # a stop of 11 minutes (unknown)
    await write_checks(db, mid, list(range(at, at + 1800, 60)))
    at += 1800
    await db.transaction(monitors.pause_monitor, record.account_id, mid, at)
    at += 2000
    await db.transaction(monitors.resume_monitor, record.account_id, mid, at)
    at += 400  # pending until the next check
    await write_checks(db, mid, list(range(at, at + 1200, 60)), moved_from="pending")
    at += 1200
    await write_checks(db, mid, list(range(at, at + 3000, 60)), status="down", moved_from="up")
    return record, at + 3000


async def test_the_rollups_and_the_log_agree_so_a_window_over_everything_leaves_no_status(
    db: Database,
) -> None:
    with trio.fail_after(30):
        record, now = await _mixed_history(db)
        before, _ = await read_availability(db, record.id, T0 - HOUR, now + HOUR, now=now)
        assert min(five(before)[:3]) > 0
        await _one_off(db, record, T0 - 2 * HOUR, now + 2 * HOUR)
        for granularity in (None, "hour"):
            whole, parts = await read_availability(
                db, record.id, T0 - HOUR, now + HOUR, now=now, granularity=granularity
            )
            # Every known second was in maintenance: had the rollups' status seconds and the
            # log disagreed somewhere, some status would keep seconds here.
            assert five(whole) == (0, 0, 0, 2 * HOUR, now - T0)
            for part in parts:
                five(part)


async def test_the_five_add_up_for_random_windows_ranges_and_series(db: Database) -> None:
    with trio.fail_after(60):
        record, now = await _mixed_history(db)
        rng = random.Random(7)
        excluded = []
        for _ in range(6):
            lo = rng.randrange(T0 - HOUR, now + HOUR)
            hi = lo + rng.randrange(1, 2 * HOUR)
            counted = rng.random() < 0.8
            if counted:
                excluded.append((lo, hi))
            await _one_off(db, record, lo, hi, exclude_from_availability=counted)
        for _ in range(25):
            start = rng.randrange(T0 - HOUR, now)
            end = rng.randrange(start + 1, now + 2 * HOUR)
            granularity = rng.choice([None, "hour", "day"])
            whole, parts = await read_availability(
                db, record.id, start, end, now=now, granularity=granularity
            )
            five(whole)
            for part in parts:
                five(part)
            known = (max(start, T0), min(end, now))
            expected = sum(
                hi - lo
                for lo, hi in merge((max(a, known[0]), min(b, known[1])) for a, b in excluded)
            )
            assert whole.maintenance_seconds == expected, (start, end, granularity)
            assert sum(p.maintenance_seconds for p in parts) == expected


async def test_a_log_that_disagrees_with_the_rollups_never_makes_a_figure_negative(
    db: Database,
) -> None:
    with trio.fail_after(20):
        # A history written before the log dated moves as it does now: the rollup of an
        # hour counts down time the log has as up. A window over that hour takes from up
        # only what up has; nothing goes below zero and the five still add up.
        down = H0 + 3 * HOUR  # closes the up period: the rollups hold its seconds
        record = await _up_monitor(db, down)
        await write_checks(db, record.id, [down, down + 60], status="down", moved_from="up")
        now = down + 120

        async def rewrite(connection: Any) -> None:
            await connection.execute(
                "UPDATE check_rollups SET up_seconds = 600, down_seconds = 3000 "
                "WHERE monitor_id = $1 AND hour = $2",
                record.id,
                H0 + HOUR,
            )

        await db.transaction(rewrite)
        await _one_off(db, record, H0 + HOUR, H0 + 2 * HOUR)
        whole, hours = await read_availability(db, record.id, T0, now, now=now, granularity="hour")
        assert five(hours[1]) == (0, 3000, 0, 0, 600)
        assert five(whole) == (3000 + 3600, 3000 + 120, 0, 0, 600)
