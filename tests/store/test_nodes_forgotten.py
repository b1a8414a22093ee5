"""Nodes that stopped long ago leave ``uptrio nodes list`` (docs/several-nodes.md,
Operations): the maintenance round forgets a node stopped or expired for
``node_retention_days`` (3), with its lapsed leases, and keeps the live ones and those
stopped recently."""

from __future__ import annotations

from typing import Any

import trio

from store import Database, MaintenanceSettings, leases, maintain

NOW = 1_790_000_000
"""The maintenance round's wall clock (epoch seconds); nodes age by the database's."""


async def _sql(db: Database, query: str) -> list[Any]:
    async def fetch(connection: Any) -> list[Any]:
        return list(await connection.fetch(query))

    return await db.run(fetch)


async def test_nodes_stopped_or_expired_for_days_are_forgotten_by_maintenance(
    db: Database,
) -> None:
    with trio.fail_after(20):
        for name in ("old-stopped", "old-expired", "recent-stopped", "live"):
            await db.transaction(leases.register_node, name, 10.0)
            await db.transaction(leases.renew_leases, name, 10.0)
        for name in ("old-stopped", "recent-stopped"):
            await db.transaction(leases.release_node, name)
        await _sql(
            db,
            "UPDATE nodes SET renewed_at = now() - interval '4 days' "
            "WHERE name IN ('old-stopped', 'old-expired')",
        )
        await _sql(
            db,
            "UPDATE bucket_leases SET expires_at = now() - interval '4 days' "
            "WHERE node = 'old-expired'",
        )
        report = await maintain(db, MaintenanceSettings(), partition_seconds=86_400, now=NOW)
        listed = {n.name: n.state for n in await db.run(leases.list_nodes)}
        assert listed == {"live": "live", "recent-stopped": "stopped"}
        assert sorted(report.nodes_forgotten) == ["old-expired", "old-stopped"]
        assert not await _sql(db, "SELECT 1 FROM bucket_leases WHERE node LIKE 'old-%'")
