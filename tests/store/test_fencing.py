"""Fencing (docs/several-nodes.md, Fencing and Heartbeat fencing; store.fencing) of
heartbeats' status moves and of checks after an outage: a node's store actor applies a
heartbeat's move only while the node holds the heartbeat's bucket at the lease epoch the
move carries; once another node took the bucket (a new epoch), the stale node's moves are
refused and counted, while the pings it received are still stored (a ping is a fact from
outside). Real Postgres; node ``b`` taking the bucket is its lease row's update, as
``store.leases.renew_leases`` claims.
"""

from __future__ import annotations

from typing import Any

import structlog
import trio

from store import (
    CheckRecord,
    Connection,
    Database,
    HeartbeatChange,
    PingRecord,
    StoreActor,
    StoreSettings,
    WriteCheck,
    WritePing,
    checks,
    heartbeats,
    leases,
    new_id,
)
from tests.store.helpers import new_heartbeat, new_monitor

T0 = 1_790_000_000


def _ping(heartbeat_id: str, at: int) -> PingRecord:
    return PingRecord(
        id=new_id("png"),
        heartbeat_id=heartbeat_id,
        kind="success",
        created=at,
        duration_ms=None,
        source_ip="127.0.0.1",
    )


def _move(heartbeat_id: str, to: str, at: int, lease_epoch: int | None) -> HeartbeatChange:
    return HeartbeatChange(
        heartbeat_id=heartbeat_id,
        move_id=new_id("hbm"),
        from_status="pending" if to == "up" else "up",
        to_status=to,
        run_epoch=0,
        created=at,
        detail="No ping for 90 s",
        lease_epoch=lease_epoch,
    )


async def _epoch(db: Database, bucket: int) -> int:
    async def read(connection: Connection) -> int:
        return int(
            await connection.fetchval("SELECT epoch FROM bucket_leases WHERE bucket = $1", bucket)
        )

    return await db.run(read)


async def _take(connection: Connection, bucket: int) -> None:
    """Node ``b`` claims ``bucket`` (a new epoch), as after node ``a``'s lease lapsed."""
    await connection.execute(
        "UPDATE bucket_leases SET node = 'b', epoch = epoch + 1, "
        "expires_at = now() + interval '10 s' WHERE bucket = $1",
        bucket,
    )


async def _count(db: Database, query: str, *args: Any) -> int:
    async def fetch(connection: Connection) -> int:
        return int(await connection.fetchval(query, *args))

    return await db.run(fetch)


async def test_a_stale_nodes_heartbeat_moves_are_refused_and_its_pings_stored(
    db: Database, nursery: trio.Nursery
) -> None:
    with trio.fail_after(10):
        await db.transaction(leases.register_node, "a", 10.0)
        await db.transaction(leases.renew_leases, "a", 10.0)  # a alone: all 256 buckets
        beat = await new_heartbeat(db, created=T0)
        bucket = leases.bucket_of(beat.id)
        epoch = await _epoch(db, bucket)
        actor = StoreActor(db, StoreSettings(batch_age_seconds=0.01), fence_node="a")
        writer = await nursery.start(actor.run)

        await writer.write(
            WritePing(ping=_ping(beat.id, T0 + 10), change=_move(beat.id, "up", T0 + 10, epoch))
        )
        await writer.flush()
        stored = await db.run(heartbeats.get_heartbeat, None, beat.id)
        assert stored is not None and stored.status == "up"  # held at that epoch: applied
        assert actor.statistics.fenced_refused == 0

        await db.run(_take, bucket)
        await writer.write(
            WritePing(ping=_ping(beat.id, T0 + 20), change=_move(beat.id, "down", T0 + 20, epoch))
        )
        await writer.flush()
        stored = await db.run(heartbeats.get_heartbeat, None, beat.id)
        assert stored is not None and stored.status == "up"  # the move was refused
        assert stored.last_ping_at == T0 + 20  # the ping was stored
        assert actor.statistics.fenced_refused == 1
        assert await _count(db, "SELECT count(*) FROM pings WHERE heartbeat_id = $1", beat.id) == 2
        assert await _count(db, "SELECT count(*) FROM incidents") == 0
        assert await _count(db, "SELECT count(*) FROM events WHERE type = 'heartbeat.down'") == 0

        # a move carrying no epoch (a lone engine's) is not fenced
        await writer.write(WritePing(ping=None, change=_move(beat.id, "down", T0 + 30, None)))
        await writer.flush()
        stored = await db.run(heartbeats.get_heartbeat, None, beat.id)
        assert stored is not None and stored.status == "down"
        assert actor.statistics.fenced_refused == 1
        writer.close()


def _monitor_check(monitor_id: str, created: int) -> CheckRecord:
    return CheckRecord(
        id=new_id("chk"),
        monitor_id=monitor_id,
        status="up",
        response_time_ms=1.0,
        status_code=None,
        error_code=None,
        error_message=None,
        created=created,
    )


async def _lapse(connection: Connection, bucket: int) -> None:
    """``bucket``'s lease expires (no renewal reached the database: an outage)."""
    await connection.execute(
        "UPDATE bucket_leases SET expires_at = now() - interval '1 s' WHERE bucket = $1", bucket
    )


async def test_an_own_lease_that_lapsed_unclaimed_still_takes_its_rows_and_is_renewed(
    db: Database, nursery: trio.Nursery
) -> None:
    """After an outage longer than a lease, the store writes what it buffered before the
    lease actor renews: the node's own lapsed lease, claimed by nobody since (same node,
    same epoch), takes the rows and is renewed in the batch's transaction; a lapsed lease
    another node claimed meanwhile refuses them, counted and logged as dropped."""
    with trio.fail_after(10):
        await db.transaction(leases.register_node, "a", 10.0)
        await db.transaction(leases.renew_leases, "a", 10.0)
        kept, taken = (await new_monitor(db, created=T0)), None
        while taken is None or leases.bucket_of(taken.id) == leases.bucket_of(kept.id):
            taken = await new_monitor(db, created=T0)
        await db.run(checks.ensure_partitions, T0, T0 + 100, 86_400)
        actor = StoreActor(db, StoreSettings(batch_age_seconds=0.01), fence_node="a")
        writer = await nursery.start(actor.run)
        for monitor in (kept, taken):
            await db.run(_lapse, leases.bucket_of(monitor.id))
        await db.run(_take, leases.bucket_of(taken.id))
        kept_epoch = await _epoch(db, leases.bucket_of(kept.id))
        taken_epoch = await _epoch(db, leases.bucket_of(taken.id)) - 1  # before b's claim

        with structlog.testing.capture_logs() as logged:
            await writer.write(
                WriteCheck(check=_monitor_check(kept.id, T0 + 10), lease_epoch=kept_epoch)
            )
            await writer.write(
                WriteCheck(check=_monitor_check(taken.id, T0 + 10), lease_epoch=taken_epoch)
            )
            await writer.flush()
        count = "SELECT count(*) FROM checks WHERE monitor_id = $1"
        assert await _count(db, count, kept.id) == 1
        assert await _count(db, count, taken.id) == 0
        live = "SELECT count(*) FROM bucket_leases WHERE bucket = $1 AND node = 'a' AND epoch = $2 "
        live += "AND expires_at > now() + interval '9 s'"
        assert await _count(db, live, leases.bucket_of(kept.id), kept_epoch) == 1  # renewed
        assert actor.statistics.fenced_refused == 1
        assert actor.statistics.dropped == 1  # refused is dropped, never hidden
        refused = [e for e in logged if "refused by the fence" in e["event"]]
        assert [e["dropped"] for e in refused] == [1]
        writer.close()
