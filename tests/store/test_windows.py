"""Maintenance windows in the store: CRUD, keyset pages, occurrences as rows (written on
create and update, extended by the daily step, cut by end, dropped by cancel) and the
batch's question "which of these resources are in a window now" (docs/maintenance.md;
``store.windows``). Real Postgres; times are explicit epoch seconds."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import trio

from store import Connection, CursorNotFound, Database, PageRequest, coverage, windows
from store.recurrence import Occurrence
from tests.store.helpers import new_heartbeat, new_monitor, new_window

T0 = 1_790_000_000  # 2026-09-21T14:13:20Z
DAY = 86_400


async def _sql(db: Database, query: str, *args: Any) -> list[dict[str, Any]]:
    async def run(connection: Connection) -> list[dict[str, Any]]:
        return [dict(r) for r in await connection.fetch(query, *args)]

    return await db.transaction(run)


async def _rows(db: Database, window_id: str) -> list[tuple[int, int]]:
    rows = await _sql(
        db,
        "SELECT starts_at, ends_at FROM maintenance_occurrences WHERE window_id = $1 "
        "ORDER BY starts_at",
        window_id,
    )
    return [(r["starts_at"], r["ends_at"]) for r in rows]


async def _window(
    db: Database,
    account_id: str,
    monitors: list[str],
    *,
    now: int = T0,
    **fields: Any,
) -> windows.WindowRecord:
    return await new_window(db, account_id, monitors, now=now, **fields)


DAILY_UTC = {
    "rrule": "FREQ=DAILY",
    "time_zone": "UTC",
    "start": "2026-01-01T02:00:00",
    "duration_seconds": 3_600,
}


def _two_am(day_offset: int) -> int:
    """02:00 UTC of the day ``day_offset`` days after T0's."""
    return (T0 // DAY + day_offset) * DAY + 2 * 3_600


async def test_a_one_off_window_round_trips_with_its_resources_in_order(db: Database) -> None:
    with trio.fail_after(10):
        mon = await new_monitor(db, created=T0 - 100)
        hbt = await new_heartbeat(db, created=T0 - 100)
        made = await _window(
            db, mon.account_id, [hbt.id, mon.id, hbt.id], starts_at=T0 + 60, ends_at=T0 + 180
        )
        got = await db.run(windows.get_window, mon.account_id, made.id)
        assert got == made
        assert made.monitors == [hbt.id, mon.id]
        assert made.status(T0) == "scheduled"
        assert made.next_window(T0) == Occurrence(T0 + 60, T0 + 180)
        assert await _rows(db, made.id) == [(T0 + 60, T0 + 180)]
        assert "materialized_until" not in made.snapshot()
        assert await db.run(windows.get_window, "acct_other", made.id) is None


async def test_a_recurring_window_writes_35_days_of_rows_and_the_daily_step_extends_them(
    db: Database,
) -> None:
    with trio.fail_after(10):
        mon = await new_monitor(db, created=T0 - 100)
        made = await _window(db, mon.account_id, [mon.id], recurrence=DAILY_UTC)
        rows = await _rows(db, made.id)
        assert len(rows) == 35
        assert rows[0] == (_two_am(1), _two_am(1) + 3_600)
        assert rows[-1][0] == _two_am(35)
        # nothing due yet; ten days later, ten more days of rows, once each
        assert await db.transaction(windows.extend_horizons, T0) == 0
        assert await db.transaction(windows.extend_horizons, T0 + 10 * DAY) == 1
        assert await db.transaction(windows.extend_horizons, T0 + 10 * DAY) == 0
        rows = await _rows(db, made.id)
        assert len(rows) == 45
        assert len({r[0] for r in rows}) == 45
        assert rows[-1][0] == _two_am(45)


async def test_a_one_off_window_past_the_horizon_is_written_by_the_daily_step_then_done(
    db: Database,
) -> None:
    with trio.fail_after(10):
        mon = await new_monitor(db, created=T0 - 100)
        later = T0 + 40 * DAY
        made = await _window(db, mon.account_id, [mon.id], starts_at=later, ends_at=later + 60)
        assert await _rows(db, made.id) == []
        assert await db.transaction(windows.extend_horizons, T0 + 6 * DAY) == 1
        assert await _rows(db, made.id) == [(later, later + 60)]
        # every occurrence is a row: never claimed again
        assert await db.transaction(windows.extend_horizons, T0 + 60 * DAY) == 0


async def test_suppressing_answers_for_a_batch_at_an_instant(db: Database) -> None:
    with trio.fail_after(10):
        a = await new_monitor(db, created=T0 - 100)
        b = await new_monitor(db, created=T0 - 100)
        c = await new_monitor(db, created=T0 - 100)
        account = a.account_id
        one_off = await _window(db, account, [a.id], starts_at=T0, ends_at=T0 + 600)
        daily = await _window(db, account, [a.id, b.id], recurrence=DAILY_UTC)
        quiet = await _window(
            db, account, [c.id], starts_at=T0, ends_at=T0 + 600, suppress_alerts=False
        )
        ids = [a.id, b.id, c.id, "mon_nothere"]
        assert await db.run(coverage.suppressing, ids, T0 - 1) == {}
        assert await db.run(coverage.suppressing, ids, T0) == {a.id: one_off.id}
        assert await db.run(coverage.suppressing, ids, T0 + 600) == {}
        night = _two_am(1) + 10
        assert await db.run(coverage.suppressing, ids, night) == {a.id: daily.id, b.id: daily.id}
        assert await db.run(coverage.suppressing, ids, _two_am(1) + 3_600) == {}
        # any window, and one effect at a time
        assert await db.run(coverage.open_windows, ids, T0) == {a.id: one_off.id, c.id: quiet.id}
        assert await db.run(coverage.open_windows, ids, T0, effect="pause_checks") == {}
        with pytest.raises(ValueError):
            coverage.open_windows_sql("$1", "$2", effect="title; DROP TABLE monitors")


async def test_the_batch_fragment_uses_the_indexes(db: Database) -> None:
    with trio.fail_after(30):
        first = await new_monitor(db, created=T0 - 100)
        await _window(db, first.account_id, [first.id], recurrence=DAILY_UTC)
        for _ in range(60):
            mon = await new_monitor(db, created=T0 - 100)
            await _window(db, mon.account_id, [mon.id], starts_at=T0, ends_at=T0 + 60)
        await _sql(db, "ANALYZE")

        async def plan(connection: Connection) -> str:
            await connection.execute("SET LOCAL enable_seqscan = off")
            rows = await connection.fetch(
                "EXPLAIN " + coverage.open_windows_sql("$1::text[]", "$2"), [first.id, mon.id], T0
            )
            return "\n".join(r[0] for r in rows)

        text = await db.transaction(plan)
        assert "maintenance_window_resources_by_resource" in text, text
        assert "maintenance_occurrences_by_end" in text


async def test_end_cuts_the_open_occurrence_and_cancel_drops_the_later_ones(
    db: Database,
) -> None:
    with trio.fail_after(10):
        mon = await new_monitor(db, created=T0 - 100)
        made = await _window(db, mon.account_id, [mon.id], recurrence=DAILY_UTC)
        account = mon.account_id
        with pytest.raises(windows.WindowNotInProgress):
            await db.transaction(windows.end_window, account, made.id, T0)
        during = _two_am(1) + 600
        ended = await db.transaction(windows.end_window, account, made.id, during)
        assert ended is not None and ended.ended_at == during
        assert ended.status(during) == "scheduled"
        assert (await _rows(db, made.id))[0] == (_two_am(1), during)
        assert await db.run(coverage.suppressing, [mon.id], during) == {}

        canceled = await db.transaction(windows.cancel_window, account, made.id, _two_am(3) + 5)
        assert canceled is not None and canceled.status(_two_am(3) + 5) == "in_progress"
        assert canceled.status(_two_am(4)) == "canceled"
        assert [r[0] for r in await _rows(db, made.id)] == [_two_am(1), _two_am(2), _two_am(3)]
        with pytest.raises(windows.NothingToCancel):
            await db.transaction(windows.cancel_window, account, made.id, _two_am(4))
        assert await db.transaction(windows.extend_horizons, T0 + 30 * DAY) == 0
        assert await db.transaction(windows.end_window, account, "mnt_nothere", T0) is None


async def test_update_replaces_future_rows_and_keeps_the_past(db: Database) -> None:
    with trio.fail_after(10):
        a = await new_monitor(db, created=T0 - 100)
        b = await new_monitor(db, created=T0 - 100)
        made = await _window(db, a.account_id, [a.id], recurrence=DAILY_UTC)
        later = _two_am(3) + 1_800  # inside the third occurrence
        weekly = DAILY_UTC | {"rrule": "FREQ=WEEKLY;BYDAY=MO", "duration_seconds": 600}
        updated = await db.transaction(
            windows.update_window,
            a.account_id,
            made.id,
            lambda current: {"recurrence": weekly, "monitors": [b.id, a.id], "title": "x"},
            later,
        )
        assert updated.record is not None
        assert updated.record.monitors == [b.id, a.id]
        assert updated.record.updated == later
        assert updated.previous["monitors"] == [a.id]
        assert updated.previous["recurrence"] == DAILY_UTC
        rows = await _rows(db, made.id)
        # rows that ended before the change stay; the one open at it and the later ones
        # are replaced by the new schedule's, from the change on
        assert rows[:2] == [(_two_am(1), _two_am(1) + 3_600), (_two_am(2), _two_am(2) + 3_600)]
        mondays = [s for s, _ in rows[2:]]
        assert all(datetime.fromtimestamp(s, UTC).weekday() == 0 for s in mondays)
        assert all(e - s == 600 for s, e in rows[2:])
        assert len(mondays) == 5
        # only resources changed: updated moves, rows stay
        again = await db.transaction(
            windows.update_window, a.account_id, made.id, lambda c: {"monitors": [a.id]}, later + 1
        )
        assert again.record is not None and again.record.updated == later + 1
        assert await _rows(db, made.id) == rows
        nothing = await db.transaction(
            windows.update_window, a.account_id, made.id, lambda c: {}, later + 2
        )
        assert nothing.record is not None and nothing.record.updated == later + 1


async def test_pages_by_title_and_by_monitor_and_delete_keeps_the_cursor(db: Database) -> None:
    with trio.fail_after(10):
        a = await new_monitor(db, created=T0 - 100)
        b = await new_monitor(db, created=T0 - 100)
        account = a.account_id
        made = [
            await _window(
                db,
                account,
                [a.id if i % 2 else b.id],
                now=T0 + i,
                title=f"w{i}",
                starts_at=T0 + DAY,
                ends_at=T0 + DAY + 60,
            )
            for i in range(5)
        ]
        page = await db.run(
            windows.list_windows, account, PageRequest(limit=2, sort="title", descending=False)
        )
        assert [w.title for w in page.items] == ["w0", "w1"] and page.has_more
        on_a = await db.run(windows.list_windows, account, PageRequest(limit=10), monitor=a.id)
        assert [w.title for w in on_a.items] == ["w3", "w1"] and not on_a.has_more
        assert await db.transaction(windows.delete_window, account, made[1].id, T0 + 10)
        assert not await db.transaction(windows.delete_window, account, made[1].id, T0 + 10)
        after = await db.run(
            windows.list_windows,
            account,
            PageRequest(limit=10, sort="title", descending=False, starting_after=made[1].id),
        )
        assert [w.title for w in after.items] == ["w2", "w3", "w4"]
        assert await _rows(db, made[1].id) == []
        with pytest.raises(CursorNotFound):
            await db.run(windows.list_windows, account, PageRequest(starting_after="mnt_nothere"))


async def test_missing_resources_are_those_not_of_the_account(db: Database) -> None:
    with trio.fail_after(10):
        mon = await new_monitor(db, created=T0 - 100)
        hbt = await new_heartbeat(db, created=T0 - 100)
        other = await new_monitor(db, created=T0 - 100, account="other")
        ids = [mon.id, other.id, hbt.id, "hbt_nothere"]
        missing = await db.run(windows.missing_resources, mon.account_id, ids)
        assert missing == [other.id, "hbt_nothere"]
