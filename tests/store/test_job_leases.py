"""Work done once across several nodes on one database (docs/several-nodes.md): the job
lease (store.maintenance.claim_job) and the maintenance actor that needs it. Real Postgres;
two actors in one process stand for two nodes."""

from __future__ import annotations

from functools import partial

import trio

from store import Connection, Database, MaintenanceSettings, run_maintenance
from store.maintenance import MAINTENANCE_JOB, claim_job


async def _holder(db: Database) -> str | None:
    async def read(connection: Connection) -> str | None:
        holder = await connection.fetchval(
            "SELECT holder FROM job_leases WHERE job = $1", MAINTENANCE_JOB
        )
        return None if holder is None else str(holder)

    return await db.run(read)


async def test_one_holder_at_a_time_and_a_lapsed_lease_is_taken(db: Database) -> None:
    with trio.fail_after(10):
        assert await db.run(claim_job, "job", "node-a", 0.5)
        assert not await db.run(claim_job, "job", "node-b", 0.5)  # held by node-a
        assert await db.run(claim_job, "job", "node-a", 0.5)  # its holder renews it
        await trio.sleep(0.6)
        assert await db.run(claim_job, "job", "node-b", 0.5)  # lapsed: taken over
        assert not await db.run(claim_job, "job", "node-a", 0.5)


async def test_maintenance_runs_on_one_node_and_moves_when_it_stops(db: Database) -> None:
    # Rounds every 0.5 s, so the lease lasts 1 s: node-a renews it in time even when a
    # loaded machine makes one of its rounds take a few tenths of a second (at 0.1 s the
    # lease of 0.2 s lapsed under the suite's load and node-b took it early).
    settings = MaintenanceSettings(interval_seconds=0.5)
    start = partial(run_maintenance, db, settings, partition_seconds=86_400)
    with trio.fail_after(15):
        async with trio.open_nursery() as nursery:
            node_a = trio.CancelScope()

            async def run_a() -> None:
                with node_a:
                    await start(holder="node-a")

            nursery.start_soon(run_a)
            while await _holder(db) != "node-a":
                await trio.sleep(0.02)
            nursery.start_soon(partial(start, holder="node-b"))
            for _ in range(10):  # node-b's rounds are skipped while node-a renews
                await trio.sleep(0.05)
                assert await _holder(db) == "node-a"
            node_a.cancel()  # node-a stops: node-b takes over after two intervals
            while await _holder(db) != "node-b":
                await trio.sleep(0.02)
            nursery.cancel_scope.cancel()
