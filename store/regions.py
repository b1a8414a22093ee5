"""The regions nodes run in (docs/several-nodes.md, Regions), as ``GET /regions`` lists
them: every region with a lease pool (made when its first node registered:
``store.leases.register_node``), with its live nodes. Regions belong to the service, not to
an account: every account sees the same list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .database import Connection

__all__ = ["RegionRecord", "list_regions"]


@dataclass(frozen=True, slots=True)
class RegionRecord:
    """A region and its live nodes (renewing their leases, not stopping), by name: each
    ``{"name", "started", "renewed_at"}``, times in epoch seconds (whole, the
    database's clock); empty when none is live (its monitors' regional probes wait for
    one)."""

    name: str
    nodes: list[dict[str, Any]]


async def list_regions(connection: Connection) -> list[RegionRecord]:
    """Every region, by name, with its live nodes (one query)."""
    rows = await connection.fetch(
        "SELECT r.region, coalesce(jsonb_agg(jsonb_build_object('name', n.name, "
        "'started', extract(epoch FROM n.started)::bigint, "
        "'renewed_at', extract(epoch FROM n.renewed_at)::bigint) ORDER BY n.name) "
        "FILTER (WHERE n.name IS NOT NULL), '[]') AS nodes "
        "FROM (SELECT DISTINCT region FROM pool_leases WHERE region <> '') r "
        "LEFT JOIN nodes n ON n.region = r.region AND NOT n.stopping "
        "AND n.renewed_at + make_interval(secs => n.lease_seconds) > now() "
        "GROUP BY r.region ORDER BY r.region"
    )
    return [RegionRecord(r["region"], r["nodes"]) for r in rows]
