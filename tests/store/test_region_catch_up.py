"""A node's catch-up on a regional monitor looks at its own region's checks (docs/
several-nodes.md, Regions; ``store.monitors.load_active_monitors``): another region's
newer check must not hide a grid point this region missed. Real Postgres; fixed
epoch seconds."""

from __future__ import annotations

import trio

from store import Database, leases, monitors
from tests.outbox import rows
from tests.store.helpers import new_monitor, write_checks

T0 = 1_790_000_000


async def test_a_regional_monitors_newest_check_is_its_own_regions(db: Database) -> None:
    with trio.fail_after(20):
        monitor = await new_monitor(db, created=T0 - 100)
        await write_checks(db, monitor.id, [T0, T0 + 10, T0 + 20])
        await rows(
            db,
            "WITH m AS (UPDATE monitors SET regions = '{eu,us}' WHERE id = $1 RETURNING id) "
            "UPDATE checks SET region = CASE WHEN created = $2 THEN 'eu' ELSE 'us' END "
            "WHERE monitor_id = $1 RETURNING id",
            monitor.id,
            T0,
        )
        slot = leases.bucket_of(monitor.id) + leases.BUCKETS  # a region's pool

        async def newest(region: str | None, slots: list[int]) -> int | None:
            [record] = await db.run(monitors.load_active_monitors, slots, None, region)
            return record.last_checked_at

        assert await newest("eu", [slot]) == T0  # not the us check of T0 + 20
        assert await newest("us", [slot]) == T0 + 20
        assert await newest(None, [leases.bucket_of(monitor.id)]) == T0 + 20
