"""Availability that is honest (docs/history.md, Availability): down time starts at the
first failed check of its episode, and time in which no check was recorded for more than two
intervals is unknown, the present included. Histories are written through the store actor's
real batch path at chosen epoch seconds, batch by batch as the engine hands them over, and
read back from the availability read, the rollups and the log. Real embedded Postgres, a
fresh database per test.
"""

from __future__ import annotations

from typing import Any

import trio

from store import Database, StatusChange, checks, monitors, new_check_id
from tests.store.helpers import (
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


async def _rollups(db: Database, monitor_id: str) -> list[tuple[int, int, int]]:
    """``(hour, up_seconds, down_seconds)`` of the monitor's rollups, by hour."""

    async def read(connection: Any) -> list[Any]:
        return list(
            await connection.fetch(
                "SELECT hour, up_seconds, down_seconds FROM check_rollups "
                "WHERE monitor_id = $1 ORDER BY hour",
                monitor_id,
            )
        )

    return [tuple(r) for r in await db.run(read)]


async def _log(db: Database, monitor_id: str) -> list[tuple[int, str]]:
    """``(created, to_status)`` of the monitor's logged moves, in log order."""

    async def read(connection: Any) -> list[Any]:
        return list(
            await connection.fetch(
                "SELECT created, to_status FROM status_changes WHERE monitor_id = $1 ORDER BY seq",
                monitor_id,
            )
        )

    return [tuple(r) for r in await db.run(read)]


async def test_a_down_with_threshold_3_counts_from_its_first_failed_check(db: Database) -> None:
    with trio.fail_after(20):
        mid = (await new_monitor(db, created=T0, failure_threshold=3)).id
        first = H0 + HOUR - 60  # the first failure, in the hour before the move
        await write_checks(db, mid, list(range(T0, first, 60)), moved_from="pending")
        await write_checks(db, mid, [first], status="down")
        await write_checks(db, mid, [first + 60], status="down")
        await write_checks(db, mid, [first + 120], status="down", moved_from="up")
        # Down now, read while down: the open period runs from the first failure.
        whole, _ = await read_availability(db, mid, T0, first + 150, now=first + 150)
        assert seconds_of(whole) == (first - T0, 150, 0, 0)
        await write_checks(db, mid, list(range(first + 180, first + 600, 60)), status="down")
        recovered = first + 600
        await write_checks(db, mid, list(range(recovered, first + 1200, 60)), moved_from="down")
        now = first + 1200
        whole, hours = await read_availability(db, mid, T0, now, now=now, granularity="hour")
        assert seconds_of(whole) == (now - T0 - 600, 600, 0, 0)
        assert whole.longest_down_seconds == 600
        assert [seconds_of(p) for p in hours] == [(2940, 60, 0, 0), (600, 540, 0, 0)]
        # The rollups closed the up period at the first failure, in its own hour, and the
        # down period in both hours; the log holds when each status began.
        assert await _rollups(db, mid) == [(H0, 2940, 60), (H0 + HOUR, 0, 540)]
        assert await _log(db, mid) == [(T0, "up"), (first, "down"), (recovered, "up")]


async def test_the_first_failure_is_found_in_the_checks_not_in_the_engine_streak(
    db: Database,
) -> None:
    with trio.fail_after(20):
        # An engine restarted (or a node that took the monitor over) counts its streak
        # from zero: the move comes at the fourth failure, written with all four.
        mid = (await new_monitor(db, created=T0, failure_threshold=3)).id
        first = T0 + 600
        await write_checks(db, mid, list(range(T0, first, 60)), moved_from="pending")
        failures = [first + 60 * k for k in range(4)]
        await write_checks(db, mid, failures, status="down", moved_from="up", move_on=3)
        now = first + 300
        whole, _ = await read_availability(db, mid, T0, now, now=now)
        assert seconds_of(whole) == (600, 300, 0, 0)
        record = await db.run(monitors.get_monitor, None, mid)
        assert record is not None and record.status == "down"
        assert await _log(db, mid) == [(T0, "up"), (first, "down")]


async def test_a_stop_longer_than_two_intervals_is_unknown_not_up(db: Database) -> None:
    with trio.fail_after(20):
        mid = (await new_monitor(db, created=T0)).id
        last = H0 + HOUR - 240  # the last check before the service stopped
        back = last + 660  # the first check after it started again, 11 minutes later
        now = T0 + 2 * HOUR
        await write_checks(db, mid, list(range(T0, last + 1, 60)), moved_from="pending")
        # Checked again; one tick missed later on (two intervals apart: not a stop).
        after = [t for t in range(back, now, 60) if t != back + 300]
        for _ in range(2):  # the second as after a lost commit acknowledgement
            await write_checks(db, mid, after)
        whole, hours = await read_availability(db, mid, T0, now, now=now, granularity="hour")
        assert seconds_of(whole) == (now - T0 - 600, 0, 0, 600)
        assert whole.uptime_percent == 100.0
        # [last + 60, back): 180 s in the first hour, 420 s in the second.
        assert [seconds_of(p) for p in hours] == [
            (2820, 0, 0, 180),
            (3180, 0, 0, 420),
            (600, 0, 0, 0),
        ]
        # The up period closed one interval after the last check; the open one is read live.
        assert await _rollups(db, mid) == [(H0, 2820, 0), (H0 + HOUR, 0, 0), (H0 + 2 * HOUR, 0, 0)]
        assert await _log(db, mid) == [(T0, "up"), (last + 60, "unknown"), (back, "up")]


async def test_a_stop_inside_one_batch_and_while_down_is_unknown(db: Database) -> None:
    with trio.fail_after(20):
        # A buffer written late holds a hole of its own; the monitor is down around it.
        mid = (await new_monitor(db, created=T0)).id
        await write_checks(db, mid, [T0], moved_from="pending")
        fails = [T0 + 60 * k for k in range(1, 11)] + [T0 + 1800 + 60 * k for k in range(6)]
        await write_checks(db, mid, fails, status="down", moved_from="up")
        now = T0 + 2220
        await write_checks(db, mid, [T0 + 2160], moved_from="down")
        whole, _ = await read_availability(db, mid, T0, now, now=now)
        # down [T0+60, T0+660), unknown until T0+1800, down until T0+2160, up after.
        assert seconds_of(whole) == (60 + 60, 600 + 360, 0, 1140)
        assert whole.longest_down_seconds == 600
        assert await _rollups(db, mid) == [(H0, 60, 960)]


async def test_the_present_of_a_stopped_service_is_unknown(db: Database) -> None:
    with trio.fail_after(20):
        mid = (await new_monitor(db, created=T0)).id
        last = T0 + 1200
        await write_checks(db, mid, list(range(T0, last + 1, 60)), moved_from="pending")
        whole, _ = await read_availability(db, mid, T0, last + 100, now=last + 100)
        assert seconds_of(whole) == (1300, 0, 0, 0), "within two intervals: still up"
        whole, hours = await read_availability(
            db, mid, T0, last + 600, now=last + 600, granularity="hour"
        )
        assert seconds_of(whole) == (1260, 0, 0, 540), "stopped: unknown since last + 60"
        assert sum(p.unknown_seconds for p in hours) == 540


async def test_a_pause_after_a_stop_closes_the_period_at_its_last_check(db: Database) -> None:
    with trio.fail_after(20):
        record = await new_monitor(db, created=T0)
        mid = record.id
        last = T0 + 1200
        await write_checks(db, mid, list(range(T0, last + 1, 60)), moved_from="pending")
        await db.transaction(monitors.pause_monitor, record.account_id, mid, last + 900)
        await db.transaction(monitors.resume_monitor, record.account_id, mid, last + 1500)
        await write_checks(db, mid, list(range(last + 1500, last + 1800, 60)), moved_from="pending")
        now = last + 1800
        whole, _ = await read_availability(db, mid, T0, now, now=now)
        assert seconds_of(whole) == (1260 + 300, 0, 600, 840)
        assert await _rollups(db, mid) == [(H0, 1260, 0)]
        assert [s for _, s in await _log(db, mid)] == ["up", "unknown", "paused", "pending", "up"]


async def test_a_change_whose_check_was_dropped_in_a_stop_starts_after_it(db: Database) -> None:
    with trio.fail_after(20):
        # A full buffer drops the oldest results but keeps their status changes: the
        # change lands inside the span without checks, so it holds from the next check.
        mid = (await new_monitor(db, created=T0)).id
        last = T0 + 600
        await write_checks(db, mid, list(range(T0, last + 1, 60)), moved_from="pending")
        dropped = new_check_id(last + 300)
        change = StatusChange(
            monitor_id=mid,
            check_id=dropped,
            from_status="up",
            to_status="down",
            run_epoch=await run_epoch(db, mid),
            created=last + 300,
        )
        later = check_records(mid, list(range(last + 600, last + 900, 60)), status="down")
        await db.transaction(checks.write_check_batch, later, [change])
        now = last + 900
        whole, _ = await read_availability(db, mid, T0, now, now=now)
        assert seconds_of(whole) == (660, 300, 0, 540)
        assert await _log(db, mid) == [
            (T0, "up"),
            (last + 60, "unknown"),
            (last + 600, "up"),
            (last + 600, "down"),
        ]
