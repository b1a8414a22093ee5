"""The walk of maintenance occurrences' starts and ends (``store.window_walk``;
docs/maintenance.md, "When a window starts and ends"): ``maintenance.started`` and
``.ended`` once each, the incident and alert a window held back opened at its end (once,
also against a batch's release), a pause told to the engines and shown on the records, a
schedule changed mid-occurrence, a deleted window. Real Postgres; explicit epoch seconds."""

from __future__ import annotations

from typing import Any

import trio

from store import (
    Database,
    HeartbeatChange,
    heartbeats,
    monitors,
    new_id,
    pings,
    window_walk,
    windows,
)
from tests.outbox import new_channel, new_policy
from tests.store.helpers import new_heartbeat, new_monitor, new_window, write_checks
from tests.store.suppression import down, events, opened, sql, suppressed_by

T0 = 1_790_000_000
START, END = T0 + 100, T0 + 700


async def _walk(db: Database, at: int) -> int:
    return await db.transaction(window_walk.walk_due, at, 100)


async def _window_events(db: Database, window: str) -> list[tuple[str, int]]:
    rows = await sql(
        db, "SELECT type, created FROM events WHERE resource_id = $1 ORDER BY seq", window
    )
    return [(r["type"], r["created"]) for r in rows]


async def _held_monitor(db: Database, page: bool = True, **fields: Any) -> tuple[str, str, str]:
    """An up monitor of a paged account (paged by a default policy made here unless
    ``page`` is false: made already) under a window from START to END that went down at
    START + 10 (held back); (account, monitor, window)."""
    mon = await new_monitor(db, created=T0 - 100)
    if page:
        channel = await new_channel(db, mon.account_id, now=T0 - 100)
        await new_policy(db, mon.account_id, [(60, [("channel", channel)])], default=True, now=T0)
    await write_checks(db, mon.id, [T0 - 50], status="up", moved_from="pending")
    window = await new_window(
        db, mon.account_id, [mon.id], now=T0, starts_at=START, ends_at=END, **fields
    )
    await down(db, mon.id, START + 10)
    assert await opened(db, mon.id) == []
    return mon.account_id, mon.id, window.id


async def test_a_window_starts_and_ends_once_and_opens_what_it_held_at_its_end(
    db: Database,
) -> None:
    with trio.fail_after(30):
        _, mon, window = await _held_monitor(db)
        assert await _walk(db, START - 1) == 0
        assert await _walk(db, START + 11) == 1
        assert await _walk(db, START + 12) == 0  # once
        assert await _window_events(db, window) == [
            ("maintenance.started", START),
        ]
        await down(db, mon, END - 1, moved=False)  # inside: held back still
        assert await opened(db, mon) == []
        assert await _walk(db, END + 1) == 1
        assert await _walk(db, END + 2) == 0
        assert (await _window_events(db, window))[-1] == ("maintenance.ended", END)
        # the deferred incident and alert, at the end, once (no second down event)
        assert await opened(db, mon) == [("alert", END), ("incident", END)]
        await down(db, mon, END + 30, moved=False)
        assert await opened(db, mon) == [("alert", END), ("incident", END)]
        assert [e for e, _ in await events(db, mon)] == [
            "monitor.up",
            "monitor.down",
            "incident.created",
            "alert.triggered",
        ]
        assert await suppressed_by(db, mon) is None
        [incident] = await sql(db, "SELECT description FROM incidents WHERE monitor_id = $1", mon)
        assert (
            incident["description"].startswith("Check chk_") and "failed" in incident["description"]
        )
        assert "unknown" not in incident["description"]


async def test_an_occurrence_missed_whole_gets_both_events_in_order(db: Database) -> None:
    with trio.fail_after(30):
        _, mon, window = await _held_monitor(db)
        assert await _walk(db, END + 500) == 2  # every node was down through the window
        assert await _window_events(db, window) == [
            ("maintenance.started", START),
            ("maintenance.ended", END),
        ]
        assert await opened(db, mon) == [("alert", END), ("incident", END)]


async def test_a_monitor_back_up_or_under_a_second_window_opens_nothing_at_the_end(
    db: Database,
) -> None:
    with trio.fail_after(30):
        _, mon, _ = await _held_monitor(db)
        await write_checks(db, mon, [START + 20], status="up", moved_from="down")
        _, held, first = await _held_monitor(db, page=False)
        [row] = await sql(db, "SELECT account_id FROM monitors WHERE id = $1", held)
        second = await new_window(
            db, row["account_id"], [held], now=T0, starts_at=END - 60, ends_at=END + 600
        )
        await _walk(db, END)
        assert await opened(db, mon) == [] and await opened(db, held) == []
        # the later window holds it now, and opens it at its own end
        assert await suppressed_by(db, held) == {"type": "maintenance", "id": second.id}
        await _walk(db, END + 600)
        assert await opened(db, held) == [("alert", END + 600), ("incident", END + 600)]
        assert first != second.id


async def test_the_end_and_a_batch_release_never_both_open(db: Database) -> None:
    with trio.fail_after(30):
        _, mon, _ = await _held_monitor(db)
        await _walk(db, START)
        # a failed check after the end, in a batch racing the walk of the end
        async with trio.open_nursery() as nursery:
            nursery.start_soon(down, db, mon, END + 1, False)
            nursery.start_soon(_walk, db, END + 1)
        assert len(await opened(db, mon)) == 2  # one incident, one alert


async def test_a_heartbeat_held_back_opens_at_the_end(db: Database) -> None:
    with trio.fail_after(30):
        beat = await new_heartbeat(db, created=T0 - 100)
        window = await new_window(
            db, beat.account_id, [beat.id], now=T0, starts_at=START, ends_at=END
        )
        change = HeartbeatChange(
            heartbeat_id=beat.id,
            move_id=new_id("hbm"),
            from_status="up",
            to_status="down",
            run_epoch=0,
            created=START + 10,
            detail="No ping for 90 s",
        )
        await db.transaction(pings.write_ping_batch, [], [change])
        assert await suppressed_by(db, beat.id, "heartbeats") == {
            "type": "maintenance",
            "id": window.id,
        }
        await _walk(db, END)
        [incident] = await sql(
            db, "SELECT description, created FROM incidents WHERE monitor_id = $1", beat.id
        )
        assert incident == {"description": window_walk.END_DESCRIPTION, "created": END}


async def test_in_maintenance_and_a_pause_show_on_the_records(db: Database) -> None:
    with trio.fail_after(30):
        now = await db.run(lambda c: c.fetchval("SELECT floor(extract(epoch FROM now()))"))
        now = int(now)
        mon = await new_monitor(db, created=now - 100)
        beat = await new_heartbeat(db, created=now - 100)
        quiet = await new_window(
            db, mon.account_id, [mon.id], now=now - 10, starts_at=now - 10, ends_at=now + 600
        )
        record = await db.run(monitors.get_monitor, None, mon.id)
        assert record is not None and record.in_maintenance
        assert record.maintenance_paused_until is None  # no pause_checks
        paused = await new_window(
            db,
            beat.account_id,
            [mon.id, beat.id],
            now=now - 10,
            starts_at=now - 10,
            ends_at=now + 300,
            pause_checks=True,
        )
        record = await db.run(monitors.get_monitor, None, mon.id)
        assert record is not None and record.maintenance_paused_until == now + 300
        beating = await db.run(heartbeats.get_heartbeat, None, beat.id)
        assert beating is not None and beating.in_maintenance
        assert beating.maintenance_paused_until == now + 300
        await db.transaction(windows.end_window, beat.account_id, paused.id, now)
        await db.transaction(windows.end_window, mon.account_id, quiet.id, now)
        record = await db.run(monitors.get_monitor, None, mon.id)
        assert record is not None and not record.in_maintenance
        assert record.maintenance_paused_until is None


async def test_a_schedule_changed_mid_occurrence_starts_it_once(db: Database) -> None:
    with trio.fail_after(30):
        account, mon, window = await _held_monitor(db)
        await _walk(db, START + 20)

        def later(_: windows.WindowRecord) -> dict[str, Any]:
            return {"ends_at": END + 300}

        await db.transaction(windows.update_window, account, window, later, START + 30)
        await _walk(db, START + 40)
        await _walk(db, END + 10)  # the old end passes: nothing
        assert [t for t, _ in await _window_events(db, window)] == [
            "maintenance.started",
        ]
        assert await opened(db, mon) == []

        def sooner(_: windows.WindowRecord) -> dict[str, Any]:
            return {"starts_at": END + 1_000, "ends_at": END + 2_000}

        # moved wholly later: the open one ends now, what it held opens now
        await db.transaction(windows.update_window, account, window, sooner, END + 20)
        await _walk(db, END + 21)
        assert [t for t, _ in await _window_events(db, window)][-1] == "maintenance.ended"
        assert await opened(db, mon) == [("alert", END + 20), ("incident", END + 20)]
