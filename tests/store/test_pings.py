"""Pings and heartbeats' status moves in the store actor's batch (docs/heartbeats.md;
store.pings, store.alerting): the rows, the incident a down opens and an up resolves, the
heartbeat.* events, idempotent retries, and the run epoch guarding a pause."""

from __future__ import annotations

from functools import partial
from typing import Any

import trio

from store import (
    Database,
    HeartbeatChange,
    MaintenanceSettings,
    PingRecord,
    StoreSettings,
    WritePing,
    heartbeats,
    maintain,
    new_id,
    pings,
    run_store_writer,
)
from tests.store.helpers import new_heartbeat

T0 = 1_790_000_000


def _ping(heartbeat_id: str, kind: str, at: int, duration_ms: float | None = None) -> PingRecord:
    return PingRecord(
        id=new_id("png"),
        heartbeat_id=heartbeat_id,
        kind=kind,
        created=at,
        duration_ms=duration_ms,
        source_ip="127.0.0.1",
    )


def _move(heartbeat_id: str, before: str, to: str, at: int, epoch: int = 0) -> HeartbeatChange:
    return HeartbeatChange(
        heartbeat_id=heartbeat_id,
        move_id=new_id("hbm"),
        from_status=before,
        to_status=to,
        run_epoch=epoch,
        created=at,
        detail="No ping for 90 s (period 60 s + grace 30 s)",
    )


async def _rows(db: Database, query: str, *args: Any) -> list[dict[str, Any]]:
    async def fetch(connection: Any) -> list[dict[str, Any]]:
        return [dict(r) for r in await connection.fetch(query, *args)]

    return await db.run(fetch)


async def test_pings_moves_incidents_and_events_in_one_batch(db: Database) -> None:
    with trio.fail_after(10):
        beat = await new_heartbeat(db, created=T0, name="nightly backup")
        hid = beat.id
        up = _move(hid, "pending", "up", T0 + 10)
        await db.transaction(
            pings.write_ping_batch,
            [_ping(hid, "start", T0 + 5), _ping(hid, "success", T0 + 10, 5000.0)],
            [up],
        )
        down = _move(hid, "up", "down", T0 + 100)
        await db.transaction(pings.write_ping_batch, [], [down])
        stored = await db.run(heartbeats.get_heartbeat, None, hid)
        assert stored is not None
        assert stored.status == "down" and stored.updated == T0 + 100
        assert stored.last_ping_at == T0 + 10 and stored.last_success_at == T0 + 10
        [incident] = await _rows(db, "SELECT * FROM incidents WHERE monitor_id = $1", hid)
        assert incident["title"] == "nightly backup is down"
        assert incident["monitors"] == [hid] and incident["status"] == "investigating"
        assert incident["description"] == "No ping for 90 s (period 60 s + grace 30 s)"
        # a retry of the same batch (a lost commit acknowledgement) causes nothing twice
        await db.transaction(pings.write_ping_batch, [], [down])
        await db.transaction(
            pings.write_ping_batch,
            [_ping(hid, "success", T0 + 400)],
            [_move(hid, "down", "up", T0 + 400)],
        )
        [resolved] = await _rows(db, "SELECT * FROM incidents WHERE monitor_id = $1", hid)
        assert resolved["resolved_at"] == T0 + 400
        assert resolved["resolution_message"] == "nightly backup is up again after 5m 0s"
        events = await _rows(
            db,
            "SELECT type, object, previous FROM events "
            "WHERE type <> 'heartbeat.created' ORDER BY seq",
        )
        assert [e["type"] for e in events] == [
            "heartbeat.up",
            "heartbeat.down",
            "incident.created",
            "heartbeat.up",
            "incident.resolved",
        ]
        assert events[1]["object"]["status"] == "down" and events[1]["object"]["id"] == hid
        assert events[1]["previous"] == {"status": "up"}
        listed, has_more = await db.run(pings.list_pings, hid, limit=2)
        assert [(p.kind, p.created, p.duration_ms) for p in listed] == [
            ("success", T0 + 400, None),
            ("success", T0 + 10, 5000.0),
        ]
        assert has_more
        older, has_more = await db.run(pings.list_pings, hid, limit=2, starting_after=listed[-1].id)
        assert [p.kind for p in older] == ["start"] and not has_more


async def test_a_move_of_an_older_run_is_ignored_and_pings_of_deleted_heartbeats_dropped(
    db: Database,
) -> None:
    with trio.fail_after(10):
        beat = await new_heartbeat(db, created=T0)
        record, changed = await db.transaction(
            heartbeats.pause_heartbeat, beat.account_id, beat.id, T0 + 1
        )
        assert changed and record is not None and record.run_epoch == 1
        # the actor of epoch 0 had not seen the pause yet: its move is ignored
        await db.transaction(
            pings.write_ping_batch,
            [_ping(beat.id, "success", T0 + 2)],
            [_move(beat.id, "pending", "up", T0 + 2)],
        )
        stored = await db.run(heartbeats.get_heartbeat, None, beat.id)
        assert stored is not None and stored.status == "paused"
        assert stored.last_ping_at == T0 + 2  # the ping itself is recorded
        assert await db.transaction(heartbeats.delete_heartbeat, beat.account_id, beat.id, T0 + 3)
        inserted = await db.run(pings.write_ping_batch, [_ping(beat.id, "success", T0 + 4)], [])
        assert inserted == 0
        assert await _rows(db, "SELECT * FROM pings") == []


async def test_the_store_actor_writes_pings_beside_checks_and_retention_drops_old_ones(
    db: Database, nursery: trio.Nursery
) -> None:
    with trio.fail_after(10):
        beat = await new_heartbeat(db, created=T0)
        writer = await nursery.start(
            partial(run_store_writer, db, StoreSettings(batch_age_seconds=0.01))
        )
        assert writer.write_nowait(
            WritePing(
                ping=_ping(beat.id, "success", T0), change=_move(beat.id, "pending", "up", T0)
            )
        )
        await writer.write(WritePing(ping=_ping(beat.id, "fail", T0 + 86_400 * 40)))
        await writer.flush()
        assert len(await _rows(db, "SELECT * FROM pings")) == 2
        stored = await db.run(heartbeats.get_heartbeat, None, beat.id)
        assert stored is not None and stored.status == "up"
        report = await maintain(
            db,
            MaintenanceSettings(ping_retention_days=30),
            partition_seconds=86_400,
            now=T0 + 86_400 * 40,
        )
        assert report.pings_deleted == 1
        assert [r["kind"] for r in await _rows(db, "SELECT kind FROM pings")] == ["fail"]
        writer.close()


async def test_heartbeat_moves_have_their_own_log_kept_as_long_as_monitors_moves(
    db: Database,
) -> None:
    """The engine's moves, a pause and a resume are logged in ``heartbeat_moves`` (never in
    the monitors' ``status_changes``); retention keeps the last move before its cutoff;
    deleting the heartbeat deletes its log."""
    with trio.fail_after(10):
        beat = await new_heartbeat(db, created=T0)
        hid = beat.id
        up = _move(hid, "pending", "up", T0 + 10)
        await db.transaction(pings.write_ping_batch, [_ping(hid, "success", T0 + 10)], [up])
        await db.transaction(heartbeats.pause_heartbeat, beat.account_id, hid, T0 + 20)
        await db.transaction(heartbeats.resume_heartbeat, beat.account_id, hid, T0 + 30)
        down = _move(hid, "pending", "down", T0 + 86_400 * 2, epoch=2)
        await db.transaction(pings.write_ping_batch, [], [down])
        log = "SELECT move_id, from_status, to_status, created FROM heartbeat_moves ORDER BY seq"
        assert [(r["move_id"], r["to_status"], r["created"]) for r in await _rows(db, log)] == [
            (up.move_id, "up", T0 + 10),
            (None, "paused", T0 + 20),
            (None, "pending", T0 + 30),
            (down.move_id, "down", T0 + 86_400 * 2),
        ]
        assert await _rows(db, "SELECT * FROM status_changes") == []

        report = await maintain(
            db,
            MaintenanceSettings(rollup_retention_days=1),
            partition_seconds=86_400,
            now=T0 + 86_400 + 100,
        )
        assert report.status_moves_deleted == 2  # the resume, the last before the cutoff, stays
        assert [r["to_status"] for r in await _rows(db, log)] == ["pending", "down"]

        assert await db.transaction(heartbeats.delete_heartbeat, beat.account_id, hid, T0 + 3)
        assert await _rows(db, log) == []
