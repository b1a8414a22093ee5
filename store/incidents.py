"""Incident queries (asyncio side; run them through :class:`store.Database`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .database import Connection
from .owned import delete_owned, update_owned
from .pagination import Page, PageRequest, fetch_page
from .records import IncidentRecord

_COLUMNS = [
    "id",
    "account_id",
    "title",
    "description",
    "status",
    "severity",
    "resolved_at",
    "resolution_message",
    "created",
    "updated",
    "metadata",
]
_SELECT = ", ".join(f"t.{c}" for c in _COLUMNS)
UPDATABLE = frozenset(
    {"title", "description", "status", "severity", "metadata", "resolved_at", "resolution_message"}
)
"""Columns :func:`update_incident` may change."""


async def insert_incident(connection: Connection, values: Mapping[str, Any]) -> IncidentRecord:
    """Insert an incident; ``values`` holds every column but ``seq``."""
    names = [n for n in _COLUMNS if n in values]
    placeholders = ", ".join(f"${i}" for i in range(1, len(names) + 1))
    row = await connection.fetchrow(
        f"INSERT INTO incidents AS t ({', '.join(names)}) VALUES ({placeholders}) "
        f"RETURNING {_SELECT}",
        *(values[n] for n in names),
    )
    return IncidentRecord.from_row(row)


async def get_incident(
    connection: Connection, account_id: str, incident_id: str, *, for_update: bool = False
) -> IncidentRecord | None:
    """The incident of the account, or None. ``for_update`` locks it."""
    lock = " FOR UPDATE" if for_update else ""
    row = await connection.fetchrow(
        f"SELECT {_SELECT} FROM incidents t WHERE t.id = $1 AND t.account_id = $2{lock}",
        incident_id,
        account_id,
    )
    return None if row is None else IncidentRecord.from_row(row)


async def list_incidents(
    connection: Connection,
    account_id: str,
    page: PageRequest,
    *,
    status: str | None = None,
    severity: str | None = None,
    resolved: bool | None = None,
) -> Page[IncidentRecord]:
    """One page of the account's incidents, filtered by exact ``status`` and ``severity``
    and by ``resolved`` (True: ``resolved_at`` set; False: open).

    Raises:
        CursorNotFound: the cursor names no incident of the account.
    """
    filters: list[tuple[str, object]] = []
    if status is not None:
        filters.append(("t.status = {}", status))
    if severity is not None:
        filters.append(("t.severity = {}", severity))
    if resolved is not None:
        filters.append(("(t.resolved_at IS NOT NULL) = {}", resolved))
    rows, has_more = await fetch_page(
        connection,
        table="incidents",
        select=_SELECT,
        account_id=account_id,
        filters=filters,
        page=page,
    )
    return Page([IncidentRecord.from_row(r) for r in rows], has_more)


async def update_incident(
    connection: Connection,
    account_id: str,
    incident_id: str,
    apply: Callable[[IncidentRecord], dict[str, Any]],
    now: int,
) -> IncidentRecord | None:
    """Lock the incident, compute changes with ``apply(current)`` (a subset of
    :data:`UPDATABLE` holding only values that differ; it may raise to refuse) and write
    them; ``updated`` becomes ``now`` when something changed. Must run in a transaction.
    None when the incident does not exist for the account."""
    return await update_owned(
        connection,
        table="incidents",
        get=get_incident,
        account_id=account_id,
        row_id=incident_id,
        apply=apply,
        updatable=UPDATABLE,
        now=now,
    )


async def delete_incident(
    connection: Connection, account_id: str, incident_id: str, now: int
) -> bool:
    """Delete an incident for good (spec 4.2). Must run in a transaction. False when it
    does not exist for the account."""
    return await delete_owned(
        connection, table="incidents", account_id=account_id, row_id=incident_id, now=now
    )
