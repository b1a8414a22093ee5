"""Incident queries and the incident timeline (docs/incidents.md;
asyncio side: run them through :class:`store.Database`).

Every mutation writes its event (``incident.created``, ``incident.updated``,
``incident.resolved``, ``incident.deleted``, ``incident.update_posted``) and its
timeline entry in the caller's transaction. A timeline entry (``incident_updates``) is
appended on create (its message: the description), on every status change (resolving:
the resolution message) and by :func:`post_update`. Incidents opened and resolved by
monitors are written by :mod:`store.alerting` the same way, in the store actor's batch.

A timeline holds at most :data:`MAX_UPDATES` entries (docs/incidents.md, Timelines): past
it, :func:`post_update` and a status change other than a move into ``resolved`` raise
:class:`~store.errors.TimelineFull`. A move into ``resolved`` is always taken, so that an
incident can always be closed; it cannot be moved out again past the limit, so a timeline
never grows past it by more than that closing entry and the engine's (which writes one on
opening and one on recovery).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import page_notices
from .database import Connection
from .errors import TimelineFull
from .events import EventCause, record_event
from .ids import new_id
from .owned import Updated, delete_owned, insert_owned, select_owned, update_owned
from .pagination import Page, PageRequest, fetch_page
from .records import IncidentRecord, IncidentUpdateRecord

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
    "monitor_id",
    "monitors",
    "postmortem",
]
_SELECT = ", ".join(f"t.{c}" for c in _COLUMNS)
_UPDATE_COLUMNS = "t.id, t.account_id, t.incident_id, t.status, t.message, t.created"
UPDATABLE = frozenset(
    {
        "title",
        "description",
        "status",
        "severity",
        "metadata",
        "resolved_at",
        "resolution_message",
        "monitors",
        "postmortem",
    }
)
"""Columns :func:`update_incident` may change."""
MAX_UPDATES = 1000
"""Timeline entries an incident holds at most (module docstring)."""


async def insert_incident(
    connection: Connection, values: Mapping[str, Any], cause: EventCause | None = None
) -> IncidentRecord:
    """Insert an incident (``values``: every column but ``seq``; ``monitor_id``,
    ``monitors`` and ``postmortem`` may be left out), its first timeline entry and its
    ``incident.created`` event. Run inside a transaction."""
    row = await insert_owned(
        connection, table="incidents", columns=_COLUMNS, select=_SELECT, values=values
    )
    record = IncidentRecord.from_row(row)
    await _append(connection, record, record.description, record.created, first=True)
    await record_event(
        connection,
        type="incident.created",
        record=record,
        created=record.created,
        cause=cause,
    )
    return record


async def get_incident(
    connection: Connection, account_id: str, incident_id: str, *, for_update: bool = False
) -> IncidentRecord | None:
    """The incident of the account, or None. ``for_update`` locks it."""
    row = await select_owned(
        connection,
        table="incidents",
        select=_SELECT,
        account_id=account_id,
        row_id=incident_id,
        for_update=for_update,
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
    cause: EventCause | None = None,
    *,
    timeline: bool = True,
) -> IncidentRecord | None:
    """Lock the incident, compute changes with ``apply(current)`` (a subset of
    :data:`UPDATABLE` holding only values that differ; it may raise to refuse) and write
    them; ``updated`` becomes ``now`` when something changed. A change writes
    ``incident.resolved`` when it moves the status into ``resolved``, else
    ``incident.updated``; a status change appends a timeline entry unless ``timeline``
    is False (:func:`post_update` appends its own). Must run in a transaction. None when
    the incident does not exist for the account.

    Raises:
        TimelineFull: the change moves the status (not into ``resolved``) and the
            timeline holds :data:`MAX_UPDATES` entries (module docstring).
    """
    return (await _update(connection, account_id, incident_id, apply, now, cause, timeline)).record


async def _update(
    connection: Connection,
    account_id: str,
    incident_id: str,
    apply: Callable[[IncidentRecord], dict[str, Any]],
    now: int,
    cause: EventCause | None,
    timeline: bool,
) -> Updated[IncidentRecord]:
    """:func:`update_incident`, answering the old values of what changed too."""
    updated = await update_owned(
        connection,
        table="incidents",
        get=get_incident,
        account_id=account_id,
        row_id=incident_id,
        apply=apply,
        updatable=UPDATABLE,
        now=now,
    )
    record, previous = updated.record, updated.previous
    if record is None or not previous:
        return updated
    moved = "status" in previous
    if moved and timeline:
        await _make_room(connection, record, previous)
        message = record.resolution_message if record.status == "resolved" else None
        await _append(connection, record, message, now)
    await record_event(
        connection,
        type="incident.resolved" if moved and record.status == "resolved" else "incident.updated",
        record=record,
        created=now,
        cause=cause,
        previous=previous,
    )
    return updated


async def _make_room(
    connection: Connection, incident: IncidentRecord, previous: dict[str, Any]
) -> None:
    """Check that ``incident`` (locked) may take one more timeline entry: a move into
    ``resolved`` (``previous`` holds the old status) always may, any other when the
    timeline holds fewer than :data:`MAX_UPDATES` entries.

    Raises:
        TimelineFull: it may not.
    """
    if incident.status == "resolved" and previous.get("status", "resolved") != "resolved":
        return
    entries = await connection.fetchval(
        "SELECT count(*) FROM incident_updates WHERE incident_id = $1", incident.id
    )
    if entries >= MAX_UPDATES:
        raise TimelineFull(incident.id, MAX_UPDATES)


async def delete_incident(
    connection: Connection,
    account_id: str,
    incident_id: str,
    now: int,
    cause: EventCause | None = None,
) -> bool:
    """Delete an incident for good with its timeline (docs/incidents.md) and write
    ``incident.deleted`` (its last state). Must run in a transaction. False when it does
    not exist for the account."""
    record = await get_incident(connection, account_id, incident_id, for_update=True)
    if record is None:
        return False
    await delete_owned(
        connection, table="incidents", account_id=account_id, row_id=incident_id, now=now
    )
    await record_event(
        connection,
        type="incident.deleted",
        record=record,
        created=now,
        cause=cause,
    )
    return True


async def _append(
    connection: Connection,
    incident: IncidentRecord,
    message: str | None,
    created: int,
    *,
    first: bool = False,
) -> IncidentUpdateRecord:
    """Append one timeline entry (``first``: the incident's first, its description) and,
    in the same transaction, the mails it sends to status page subscribers
    (``store.page_notices``)."""
    await page_notices.incident_notice(connection, incident, message, created, first=first)
    row = await connection.fetchrow(
        "INSERT INTO incident_updates AS t (id, account_id, incident_id, status, message, "
        f"created) VALUES ($1, $2, $3, $4, $5, $6) RETURNING {_UPDATE_COLUMNS}",
        new_id("inu"),
        incident.account_id,
        incident.id,
        incident.status,
        message,
        created,
    )
    return IncidentUpdateRecord.from_row(row)


async def post_update(
    connection: Connection,
    account_id: str,
    incident_id: str,
    message: str,
    apply: Callable[[IncidentRecord], dict[str, Any]],
    now: int,
    cause: EventCause | None = None,
) -> IncidentUpdateRecord | None:
    """``POST /incidents/:id/updates`` (docs/incidents.md): apply ``apply(current)`` to
    the incident as :func:`update_incident` does (a status move, with its
    ``incident.updated`` or ``incident.resolved`` event), then append one timeline entry
    with ``message`` and write ``incident.update_posted``. Must run in a transaction.
    None when the incident does not exist for the account.

    Raises:
        TimelineFull: the timeline holds :data:`MAX_UPDATES` entries and the post does
            not move the incident into ``resolved`` (module docstring).
    """
    updated = await _update(connection, account_id, incident_id, apply, now, cause, False)
    incident = updated.record
    if incident is None:
        return None
    await _make_room(connection, incident, updated.previous)
    update = await _append(connection, incident, message, now)
    await record_event(
        connection,
        type="incident.update_posted",
        record=update,
        created=now,
        cause=cause,
    )
    return update


async def list_updates(
    connection: Connection, account_id: str, incident_id: str, page: PageRequest
) -> Page[IncidentUpdateRecord] | None:
    """One page of the incident's timeline, oldest first (``page.sort`` ``created``,
    ascending). None when the account has no such incident.

    Raises:
        CursorNotFound: the cursor names no update of the account.
    """
    if await get_incident(connection, account_id, incident_id) is None:
        return None
    rows, has_more = await fetch_page(
        connection,
        table="incident_updates",
        select=_UPDATE_COLUMNS,
        account_id=account_id,
        filters=[("t.incident_id = {}", incident_id)],
        page=page,
    )
    return Page([IncidentUpdateRecord.from_row(r) for r in rows], has_more)


async def foreign_monitors(
    connection: Connection,
    account_id: str,
    monitor_ids: Sequence[str],
    *,
    heartbeats: bool = False,
) -> list[str]:
    """The ids of ``monitor_ids`` that are not monitors of the account (nor, with
    ``heartbeats``, heartbeats of the account), in their order (an incident's ``monitors``
    must be the account's own: docs/incidents.md, docs/heartbeats.md; a status page's components are
    monitors only)."""
    query = "SELECT id FROM monitors WHERE account_id = $1 AND id = ANY($2::text[])"
    if heartbeats:
        query += (
            " UNION ALL SELECT id FROM heartbeats WHERE account_id = $1 AND id = ANY($2::text[])"
        )
    rows = await connection.fetch(query, account_id, list(monitor_ids))
    own = {r["id"] for r in rows}
    return [m for m in monitor_ids if m not in own]
