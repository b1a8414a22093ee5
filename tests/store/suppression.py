"""Helpers of the tests of held-back incidents and alerts (``store.alerting``: a
dependency or a maintenance window suppressing them): SQL read in a transaction, a
monitor's down check, and what a resource opened, wrote and remembers."""

from __future__ import annotations

from typing import Any

from store import Connection, Database
from tests.store.helpers import write_checks


async def sql(db: Database, query: str, *args: Any) -> list[dict[str, Any]]:
    """The rows of ``query`` as dicts, read in a transaction of its own."""

    async def run(connection: Connection) -> list[dict[str, Any]]:
        return [dict(r) for r in await connection.fetch(query, *args)]

    return await db.transaction(run)


async def down(db: Database, monitor_id: str, at: int, moved: bool = True) -> None:
    """A failed check of ``monitor_id`` at ``at`` (epoch seconds), moving it from up to
    down when ``moved``."""
    await write_checks(db, monitor_id, [at], status="down", moved_from="up" if moved else None)


async def opened(db: Database, resource_id: str) -> list[tuple[str, int]]:
    """The incidents and alerts ``resource_id`` opened: ``(kind, created)`` in order."""
    rows = await sql(
        db,
        "SELECT 'incident' AS kind, created FROM incidents WHERE monitor_id = $1 "
        "UNION ALL SELECT 'alert', created FROM alerts WHERE resource_id = $1 ORDER BY 2, 1",
        resource_id,
    )
    return [(r["kind"], r["created"]) for r in rows]


async def events(db: Database, resource_id: str) -> list[tuple[str, Any]]:
    """The resource's status events and those of what it opened: ``(type, suppressed_by
    of a monitor or heartbeat event's object, else the object's created)``."""
    rows = await sql(
        db,
        "SELECT e.type, e.object FROM events e WHERE e.resource_id = $1 "
        "AND e.type IN ('monitor.down', 'monitor.up', 'heartbeat.down', 'heartbeat.up') "
        "OR e.type IN ('incident.created', 'alert.triggered') "
        "AND coalesce(e.object ->> 'monitor_id', e.object ->> 'resource_id') = $1 "
        "ORDER BY e.seq",
        resource_id,
    )
    return [
        (
            r["type"],
            r["object"]["created"]
            if r["type"].startswith(("incident.", "alert."))
            else r["object"]["suppressed_by"],
        )
        for r in rows
    ]


async def suppressed_by(db: Database, resource_id: str, table: str = "monitors") -> Any:
    """The ``suppressed_by`` column of ``resource_id`` in ``table`` (``monitors`` or
    ``heartbeats``)."""
    assert table in ("monitors", "heartbeats")
    [row] = await sql(db, f"SELECT suppressed_by FROM {table} WHERE id = $1", resource_id)
    return row["suppressed_by"]
