"""Which monitors an engine runs, by their ``regions`` (docs/several-nodes.md, Regions): a
node of ``eu`` holding every bucket of both its pools runs a monitor without ``regions``
under its any-region lease and one listing ``eu`` under its region's (slot 256 plus the
bucket), never one of another region; a change of ``regions`` stops it or restarts it
under its new lease. The database is real (the reconciliation's digests per slot are
compared too); the probes are recorded, not sent."""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import trio

from engine import EngineHandle, EngineSettings, Holding, run_engine
from store import Database, StoreWriter, leases, monitors
from tests.ops.helpers import RecordingProber
from tests.store.helpers import new_monitor


def _slot_running(slot: EngineHandle, monitor_id: str) -> int | None:
    """The lease slot the engine runs ``monitor_id`` under, None when it does not."""
    assert slot.current is not None
    for shard in slot.current.shards:
        if (entry := shard.runners["mon"].entries.get(monitor_id)) is not None:
            return entry.bucket
    return None


async def _set_regions(connection: Any, monitor_id: str, regions: list[str] | None) -> None:
    await connection.execute(
        "UPDATE monitors SET regions = $2, updated = updated + 1 WHERE id = $1",
        monitor_id,
        regions,
    )


async def test_an_eu_node_runs_what_its_pools_cover_and_follows_a_change_of_regions(
    db: Database, writer: StoreWriter, nursery: trio.Nursery
) -> None:
    with trio.fail_after(15):
        created = int(time.time())
        made = [await new_monitor(db, created=created, interval_seconds=30) for _ in range(3)]
        anywhere, elsewhere, here = (m.id for m in made)
        await db.run(_set_regions, elsewhere, ["us"])
        await db.run(_set_regions, here, ["us", "eu"])
        holding = Holding("eu")
        holding.lease_seconds, holding.last_renewal = 60.0, trio.current_time()
        holding.publish(dict.fromkeys(range(2 * leases.BUCKETS), 3), ready=True)
        slot = EngineHandle()
        settings = EngineSettings(shard_count=2, reconcile_seconds=600.0)
        engine = partial(run_engine, db, writer, RecordingProber(), settings, holding=holding)
        await nursery.start(partial(slot.run, engine))

        def bucket(monitor_id: str) -> int:
            return leases.bucket_of(monitor_id)

        assert _slot_running(slot, anywhere) == bucket(anywhere)
        assert _slot_running(slot, elsewhere) is None
        assert _slot_running(slot, here) == leases.BUCKETS + bucket(here)
        # the digests per slot match the actors: a reconciliation reads nothing again
        assert slot.current is not None
        slot.reconcile_now()
        await slot.current.apply("mon_none", None)
        assert slot.current.statistics.reconciled_buckets == 0

        async def change(monitor_id: str, regions: list[str] | None) -> None:
            await db.run(_set_regions, monitor_id, regions)
            record = await db.run(monitors.get_monitor, None, monitor_id)
            assert slot.current is not None
            await slot.current.apply(monitor_id, record)

        await change(anywhere, ["us"])  # no longer this region's
        assert _slot_running(slot, anywhere) is None
        await change(anywhere, ["eu"])  # back, under the region's lease
        assert _slot_running(slot, anywhere) == leases.BUCKETS + bucket(anywhere)
        await change(elsewhere, None)  # any region: under the any-region lease
        assert _slot_running(slot, elsewhere) == bucket(elsewhere)
