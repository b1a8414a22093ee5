"""The reconciliation (``engine.reconcile``; docs/several-nodes.md, A lost notification
delays, never loses): per bucket, the settings digests stored against those of the running
actors, then monitor by monitor only in the buckets that differ. A node that is up to date
reads no monitor again; a change written behind its back (no notification, no listener) is
found in its bucket alone and reaches the actor. The database is real; the probes are
recorded, not sent."""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import trio

from engine import EngineHandle, EngineSettings, Holding, run_engine
from store import Database, StoreWriter, leases, monitors
from tests.ops.helpers import NewMonitor, RecordingProber, insert_monitors
from tests.store.helpers import new_monitor


async def _start(db: Database, writer: StoreWriter, nursery: trio.Nursery) -> EngineHandle:
    slot = EngineHandle()
    settings = EngineSettings(shard_count=2, reconcile_seconds=600.0)
    engine = partial(run_engine, db, writer, RecordingProber(), settings)
    await nursery.start(partial(slot.run, partial(engine, holding=Holding.everything())))
    return slot


async def _reconciled(slot: EngineHandle) -> int:
    """Ask for one reconciliation and wait for it (the engine's command actor handles its
    inbox in order, so a later command's answer means it is done); the buckets it has
    read again so far."""
    assert slot.current is not None
    engine = slot.current
    slot.reconcile_now()
    await engine.apply("mon_none", None)  # answered after the reconciliation
    return engine.statistics.reconciled_buckets


def _interval_of(slot: EngineHandle, monitor_id: str) -> int | None:
    assert slot.current is not None
    for shard in slot.current.shards:
        if (entry := shard.runners["mon"].entries.get(monitor_id)) is not None:
            return entry.record.interval_seconds
    return None


async def _move_status(connection: Any, monitor_id: str) -> None:
    await connection.execute(
        "UPDATE monitors SET status = 'down', status_since = updated + 5, "
        "updated = updated + 5 WHERE id = $1",
        monitor_id,
    )


async def _set_interval_behind_its_back(connection: Any, monitor_id: str, seconds: int) -> None:
    await connection.execute(
        "UPDATE monitors SET interval_seconds = $2 WHERE id = $1", monitor_id, seconds
    )


async def test_an_up_to_date_node_reads_no_monitor_and_a_silent_change_is_found_in_its_bucket(
    db: Database, writer: StoreWriter, nursery: trio.Nursery
) -> None:
    first = await new_monitor(db, created=int(time.time()), interval_seconds=30)
    await db.transaction(
        insert_monitors, first.account_id, [NewMonitor(url="127.0.0.1:1", interval_seconds=30)] * 60
    )
    slot = await _start(db, writer, nursery)
    with trio.fail_after(10):
        assert slot.current is not None
        while slot.current.running() < 61:
            await trio.sleep(0.02)
        assert await _reconciled(slot) == 0
        assert await _reconciled(slot) == 0
        # a status and a time the store moved on its own change no digest
        await db.run(_move_status, first.id)
        assert await _reconciled(slot) == 0
        assert _interval_of(slot, first.id) == 30
        await db.run(_set_interval_behind_its_back, first.id, 45)
        assert await _reconciled(slot) == 1
        assert _interval_of(slot, first.id) == 45
        assert await _reconciled(slot) == 1


async def test_digests_per_bucket_are_the_sums_of_the_records(db: Database) -> None:
    created = int(time.time())
    records = [await new_monitor(db, created=created, interval_seconds=30) for _ in range(5)]
    digests = await db.run(monitors.settings_digests, list(range(256)))
    expected: dict[int, tuple[int, int]] = {}
    for record in records:
        assert record.settings_digest != 0
        n, total = expected.get(leases.bucket_of(record.id), (0, 0))
        expected[leases.bucket_of(record.id)] = (n + 1, total + record.settings_digest)
    assert digests == expected
    # a PATCH changes the digest; reading again does not; events never show it
    one = records[0]
    await db.transaction(
        monitors.update_monitor, one.account_id, one.id, lambda _: {"name": "renamed"}, 3
    )
    again = await db.run(monitors.get_monitor, None, one.id)
    assert again is not None and again.settings_digest != one.settings_digest
    assert again == await db.run(monitors.get_monitor, None, one.id)
    assert "settings_digest" not in again.snapshot()
