"""A maintenance window with ``suppress_alerts`` holds back the incident and the alert of a
monitor or a heartbeat that goes down inside it, in the store actor's batch
(docs/maintenance.md, "Alerts held back"; ``store.alerting``): the move and its event are
written, the event says which window; still down after the window, its next failed check
opens them, once. Real Postgres; times are explicit epoch seconds."""

from __future__ import annotations

from typing import Any

import trio

from store import Database, HeartbeatChange, PingRecord, monitors, new_id, pings, windows
from tests.outbox import new_channel, new_policy
from tests.store.helpers import (
    new_heartbeat,
    new_monitor,
    new_window,
    read_availability,
    write_checks,
)
from tests.store.suppression import down, events, opened, sql, suppressed_by

T0 = 1_790_000_000
START, END = T0 + 100, T0 + 700


async def _paged_account(db: Database, account_id: str) -> None:
    """A default escalation policy for ``account_id`` (its step waits 60 s)."""
    channel = await new_channel(db, account_id, now=T0 - 100)
    await new_policy(db, account_id, [(60, [("channel", channel)])], default=True, now=T0 - 100)


async def _window(db: Database, account_id: str, resources: list[str], **fields: Any) -> str:
    """A one-off window over ``resources`` from START to END (made at T0); its id."""
    fields = {"starts_at": START, "ends_at": END} | fields
    return (await new_window(db, account_id, resources, now=T0, **fields)).id


async def _monitor_in_window(db: Database, page: bool = True, **fields: Any) -> tuple[str, str]:
    """An up monitor of the account, a default policy paging it (unless ``page`` is
    false: made already) and a window over the monitor; (monitor, window)."""
    mon = await new_monitor(db, created=T0 - 100)
    if page:
        await _paged_account(db, mon.account_id)
    await write_checks(db, mon.id, [T0 - 50], status="up", moved_from="pending")
    return mon.id, await _window(db, mon.account_id, [mon.id], **fields)


async def test_a_down_inside_a_window_opens_nothing_and_says_which_window(db: Database) -> None:
    with trio.fail_after(20):
        mon, window = await _monitor_in_window(db)
        await down(db, mon, START + 10)
        assert await opened(db, mon) == []
        why = {"type": "maintenance", "id": window}
        assert await events(db, mon) == [("monitor.up", None), ("monitor.down", why)]
        assert await suppressed_by(db, mon) == why
        # the move is written: it is down
        [row] = await sql(db, "SELECT status FROM monitors WHERE id = $1", mon)
        assert row["status"] == "down"
        whole, _ = await read_availability(db, mon, START + 10, START + 20, now=START + 20)
        # the down is counted; the window (exclude_from_availability) takes it apart
        assert (whole.down_seconds, whole.maintenance_seconds) == (0, 10)
        # further failed checks inside the window open nothing either
        await down(db, mon, END - 1, moved=False)
        assert await opened(db, mon) == []
        assert await suppressed_by(db, mon) == why


async def test_still_down_after_the_window_its_next_check_opens_one_incident_and_alert(
    db: Database,
) -> None:
    with trio.fail_after(20):
        mon, window = await _monitor_in_window(db)
        await down(db, mon, START + 10)
        await down(db, mon, END, moved=False)  # occurrences are [starts_at, ends_at)
        assert await opened(db, mon) == [("alert", END), ("incident", END)]
        await down(db, mon, END + 60, moved=False)
        assert await opened(db, mon) == [("alert", END), ("incident", END)]
        why = {"type": "maintenance", "id": window}
        assert await events(db, mon) == [
            ("monitor.up", None),
            ("monitor.down", why),
            ("incident.created", END),
            ("alert.triggered", END),
        ]
        assert await suppressed_by(db, mon) is None
        [incident] = await sql(
            db, "SELECT id, description FROM incidents WHERE monitor_id = $1", mon
        )
        assert incident["description"].startswith("Check chk_")
        [alert] = await sql(db, "SELECT incident_id FROM alerts WHERE resource_id = $1", mon)
        assert alert["incident_id"] == incident["id"]


async def test_back_up_inside_the_window_nothing_is_left_to_open(db: Database) -> None:
    with trio.fail_after(20):
        mon, _ = await _monitor_in_window(db)
        await down(db, mon, START + 10)
        await write_checks(db, mon, [START + 20], status="up", moved_from="down")
        assert await suppressed_by(db, mon) is None
        await down(db, mon, END + 10)  # a new episode after the window: it alerts
        assert await opened(db, mon) == [("alert", END + 10), ("incident", END + 10)]


async def test_a_window_without_suppress_alerts_or_not_open_suppresses_nothing(
    db: Database,
) -> None:
    with trio.fail_after(20):
        mon, _ = await _monitor_in_window(db, suppress_alerts=False)
        await down(db, mon, START + 10)
        assert await opened(db, mon) == [("alert", START + 10), ("incident", START + 10)]
        assert await events(db, mon) == [
            ("monitor.up", None),
            ("monitor.down", None),
            ("incident.created", START + 10),
            ("alert.triggered", START + 10),
        ]
        early, _ = await _monitor_in_window(db, page=False)
        await down(db, early, START - 1)  # a second before the window opens
        assert await opened(db, early) == [("alert", START - 1), ("incident", START - 1)]
        # the same window with suppress_alerts, from its first second: held back
        held, _ = await _monitor_in_window(db, page=False)
        await down(db, held, START)
        assert await opened(db, held) == []


async def test_a_window_takes_precedence_over_a_dependency(db: Database) -> None:
    with trio.fail_after(20):
        web, window = await _monitor_in_window(db)
        [row] = await sql(db, "SELECT account_id FROM monitors WHERE id = $1", web)
        router = await new_monitor(db, created=T0 - 100)
        await db.transaction(
            monitors.update_monitor,
            row["account_id"],
            web,
            lambda _: {"depends_on": [router.id]},
            T0 - 100,
        )
        await write_checks(db, router.id, [T0 - 50], status="up", moved_from="pending")
        await down(db, router.id, START)
        await down(db, web, START + 10)
        assert await suppressed_by(db, web) == {"type": "maintenance", "id": window}
        # after the window, the parent still down: the dependency holds it back now
        await down(db, web, END + 10, moved=False)
        assert await opened(db, web) == []
        assert await suppressed_by(db, web) == {"type": "dependency", "id": router.id}


async def _beat_in_window(db: Database) -> tuple[str, str]:
    """A heartbeat of a paged account and a window over it; (heartbeat, window)."""
    beat = await new_heartbeat(db, created=T0 - 100)
    await _paged_account(db, beat.account_id)
    return beat.id, await _window(db, beat.account_id, [beat.id])


async def _move(db: Database, beat: str, from_status: str, to_status: str, at: int) -> None:
    change = HeartbeatChange(
        heartbeat_id=beat,
        move_id=new_id("hbm"),
        from_status=from_status,
        to_status=to_status,
        run_epoch=0,
        created=at,
        detail="No ping for 90 s (period 60 s + grace 30 s)",
    )
    await db.transaction(pings.write_ping_batch, [], [change])


async def _fail_ping(db: Database, beat: str, at: int) -> None:
    """A ``/fail`` ping of ``beat`` at ``at`` that moves nothing (it is down already)."""
    ping = PingRecord(
        id=new_id("png"),
        heartbeat_id=beat,
        kind="fail",
        created=at,
        duration_ms=None,
        source_ip="127.0.0.1",
    )
    await db.transaction(pings.write_ping_batch, [ping], [])


async def test_a_heartbeat_down_inside_a_window_opens_nothing_and_says_which(
    db: Database,
) -> None:
    with trio.fail_after(20):
        beat, window = await _beat_in_window(db)
        await _move(db, beat, "up", "down", START + 10)
        assert await opened(db, beat) == []
        why = {"type": "maintenance", "id": window}
        assert await events(db, beat) == [("heartbeat.down", why)]
        assert await suppressed_by(db, beat, "heartbeats") == why
        await _move(db, beat, "down", "up", START + 20)
        assert await suppressed_by(db, beat, "heartbeats") is None
        # after the window a down opens its incident and alert as usual
        await _move(db, beat, "up", "down", END + 10)
        assert await opened(db, beat) == [("alert", END + 10), ("incident", END + 10)]
        assert await events(db, beat) == [
            ("heartbeat.down", why),
            ("heartbeat.up", None),
            ("heartbeat.down", None),
            ("incident.created", END + 10),
            ("alert.triggered", END + 10),
        ]


async def test_a_heartbeat_still_down_after_the_window_alerts_at_its_next_fail_ping(
    db: Database,
) -> None:
    with trio.fail_after(20):
        beat, window = await _beat_in_window(db)
        await _move(db, beat, "up", "down", START + 10)
        await _fail_ping(db, beat, END - 1)  # still inside: held back
        assert await opened(db, beat) == []
        await _fail_ping(db, beat, END + 5)
        await _fail_ping(db, beat, END + 9)
        assert await opened(db, beat) == [("alert", END + 5), ("incident", END + 5)]
        assert await events(db, beat) == [
            ("heartbeat.down", {"type": "maintenance", "id": window}),
            ("incident.created", END + 5),
            ("alert.triggered", END + 5),
        ]
        assert await suppressed_by(db, beat, "heartbeats") is None
        [incident] = await sql(db, "SELECT description FROM incidents WHERE monitor_id = $1", beat)
        assert incident["description"] == pings.FAIL_DESCRIPTION


async def test_a_window_ended_early_or_deleted_holds_back_no_longer(db: Database) -> None:
    with trio.fail_after(20):
        mon, window = await _monitor_in_window(db)
        [row] = await sql(db, "SELECT account_id FROM monitors WHERE id = $1", mon)
        account = row["account_id"]
        await down(db, mon, START + 10)
        await db.transaction(windows.end_window, account, window, START + 50)
        await down(db, mon, START + 60, moved=False)  # before the planned end
        assert await opened(db, mon) == [("alert", START + 60), ("incident", START + 60)]

        other, gone = await _monitor_in_window(db, page=False)
        await down(db, other, START + 10)
        await db.transaction(windows.delete_window, account, gone, START + 20)
        await down(db, other, START + 30, moved=False)
        assert await opened(db, other) == [("alert", START + 30), ("incident", START + 30)]
