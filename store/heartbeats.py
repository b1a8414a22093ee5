"""Heartbeat queries (docs/heartbeats.md; asyncio side: run them through
:class:`store.Database`): the account's CRUD, pause and resume, and the engine's load.

Heartbeats are account-owned like monitors (:mod:`store.owned`): keyset pages by
``created``, ``updated`` or ``name``, PATCH as lock-diff-write, delete with a cursor
tombstone; another account's heartbeat is indistinguishable from a missing one. Every
mutation writes its event (``heartbeat.created``, ``.updated``, ``.paused``,
``.resumed``, ``.deleted``) in its own transaction (docs/incidents.md, Events). The engine's
moves (``up``, ``down``) are written by the store actor (:mod:`store.pings`).

``ping_key`` never changes: it is the heartbeat's public address.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .coverage import in_maintenance_sql, paused_until_sql
from .database import Connection
from .evented import EventedTable
from .events import EventCause
from .owned import select_owned
from .pagination import Page, PageRequest, fetch_page
from .records import HeartbeatRecord, column_names

__all__ = [
    "PING_KEY_CONSTRAINT",
    "UPDATABLE",
    "delete_heartbeat",
    "get_heartbeat",
    "heartbeat_of_ping_key",
    "insert_heartbeat",
    "list_heartbeats",
    "load_heartbeats",
    "pause_heartbeat",
    "resume_heartbeat",
    "update_heartbeat",
]

_COMPUTED = ("in_maintenance", "maintenance_paused_until")
"""Fields a read computes (``store.coverage``), not columns."""
_COLUMNS = [c for c in column_names(HeartbeatRecord) if c not in _COMPUTED]
_SELECT = (
    ", ".join(f"t.{c}" for c in _COLUMNS)
    + f", {in_maintenance_sql('t.id')} AS in_maintenance"
    + f", {paused_until_sql('t.id')} AS maintenance_paused_until"
)
UPDATABLE = frozenset(
    {
        "name",
        "period_seconds",
        "grace_seconds",
        "auto_incidents",
        "incident_severity",
        "metadata",
        "escalation_policy",
    }
)
"""Columns :func:`update_heartbeat` may change."""
PING_KEY_CONSTRAINT = "heartbeats_ping_key_key"
"""The unique constraint on ``ping_key`` (migration 0007)."""


async def insert_heartbeat(
    connection: Connection, values: Mapping[str, Any], cause: EventCause | None = None
) -> HeartbeatRecord:
    """Insert a heartbeat and its ``heartbeat.created`` event (run inside a transaction);
    ``values`` holds every column of the record but ``run_epoch``, ``last_ping_at`` and
    ``last_success_at``.

    Raises:
        IntegrityConflict: the ping key is taken (``constraint``
            :data:`PING_KEY_CONSTRAINT`; 128 random bits: never in practice).
    """
    return await _HEARTBEATS.insert(connection, values, cause)


async def get_heartbeat(
    connection: Connection, account_id: str | None, heartbeat_id: str, *, for_update: bool = False
) -> HeartbeatRecord | None:
    """The heartbeat ``heartbeat_id`` of ``account_id`` (any account when None), or None.
    ``for_update`` locks the row until the transaction ends."""
    if account_id is None:
        row = await connection.fetchrow(
            f"SELECT {_SELECT} FROM heartbeats t WHERE t.id = $1", heartbeat_id
        )
    else:
        row = await select_owned(
            connection,
            table="heartbeats",
            select=_SELECT,
            account_id=account_id,
            row_id=heartbeat_id,
            for_update=for_update,
        )
    return None if row is None else HeartbeatRecord.from_row(row)


async def list_heartbeats(
    connection: Connection, account_id: str, page: PageRequest, *, status: str | None = None
) -> Page[HeartbeatRecord]:
    """One page of the account's heartbeats (``page.sort``: ``created``, ``updated`` or
    ``name``), filtered by exact ``status``.

    Raises:
        CursorNotFound: the cursor names no heartbeat of the account.
    """
    filters: list[tuple[str, object]] = []
    if status is not None:
        filters.append(("t.status = {}", status))
    rows, has_more = await fetch_page(
        connection,
        table="heartbeats",
        select=_SELECT,
        account_id=account_id,
        filters=filters,
        page=page,
    )
    return Page([HeartbeatRecord.from_row(r) for r in rows], has_more)


async def update_heartbeat(
    connection: Connection,
    account_id: str,
    heartbeat_id: str,
    apply: Callable[[HeartbeatRecord], dict[str, Any]],
    now: int,
    cause: EventCause | None = None,
) -> HeartbeatRecord | None:
    """Lock the heartbeat, compute its changes with ``apply(current)`` (columns of
    :data:`UPDATABLE`, only values that differ; it may raise to refuse) and write them,
    with a ``heartbeat.updated`` event when something changed; ``updated`` becomes
    ``now`` (epoch seconds) then. Must run inside a transaction. None when the account
    has no such heartbeat."""
    return await _HEARTBEATS.update(connection, account_id, heartbeat_id, apply, now, cause)


async def pause_heartbeat(
    connection: Connection,
    account_id: str,
    heartbeat_id: str,
    now: int,
    cause: EventCause | None = None,
) -> tuple[HeartbeatRecord | None, bool]:
    """Pause a heartbeat: status ``paused``, a new run epoch, a ``heartbeat.paused``
    event; its open incident is left as it is (docs/incidents.md). Returns ``(record,
    changed)``: ``changed`` is False when it was already paused, and then nothing was
    written (docs/api.md, Conventions: a no-op). The record is None when the account has no such
    heartbeat."""
    return await _move(connection, account_id, heartbeat_id, now, cause, to="paused")


async def resume_heartbeat(
    connection: Connection,
    account_id: str,
    heartbeat_id: str,
    now: int,
    cause: EventCause | None = None,
) -> tuple[HeartbeatRecord | None, bool]:
    """Resume a paused heartbeat: status ``pending`` (it waits for its next ping, as a
    new one does), a new run epoch, a ``heartbeat.resumed`` event. Returns ``(record,
    changed)``; resuming a heartbeat that is not paused changes nothing."""
    return await _move(connection, account_id, heartbeat_id, now, cause, to="pending")


async def _move(
    connection: Connection,
    account_id: str,
    heartbeat_id: str,
    now: int,
    cause: EventCause | None,
    *,
    to: str,
) -> tuple[HeartbeatRecord | None, bool]:
    condition = "status <> 'paused'" if to == "paused" else "status = 'paused'"
    old_status = await connection.fetchval(
        "WITH h AS (SELECT id, status FROM heartbeats "
        f"WHERE id = $1 AND account_id = $2 AND {condition} FOR UPDATE), "
        "moved AS (UPDATE heartbeats t SET status = $3, updated = $4, "
        "run_epoch = run_epoch + 1 FROM h WHERE t.id = h.id RETURNING t.id), "
        "logged AS (INSERT INTO heartbeat_moves (heartbeat_id, move_id, from_status, "
        "to_status, created) SELECT id, NULL, status, $3, $4 FROM h) "
        "SELECT h.status FROM h JOIN moved ON moved.id = h.id",
        heartbeat_id,
        account_id,
        to,
        now,
    )
    return await _HEARTBEATS.moved(connection, account_id, heartbeat_id, old_status, now, cause)


async def delete_heartbeat(
    connection: Connection,
    account_id: str,
    heartbeat_id: str,
    now: int,
    cause: EventCause | None = None,
) -> bool:
    """Delete a heartbeat for good, with its pings and status log (``heartbeat_moves``),
    and write ``heartbeat.deleted`` (its last state). Incidents it opened are left as
    they are (docs/incidents.md). Must run inside a transaction. False when it does not
    exist."""
    return await _HEARTBEATS.delete(connection, account_id, heartbeat_id, now, cause)


async def heartbeat_of_ping_key(connection: Connection, ping_key: str) -> str | None:
    """The id of the heartbeat whose ping key is ``ping_key``, or None (a ping received
    by a node that does not run the heartbeat: docs/several-nodes.md)."""
    found = await connection.fetchval("SELECT id FROM heartbeats WHERE ping_key = $1", ping_key)
    return None if found is None else str(found)


async def load_heartbeats(
    connection: Connection,
    buckets: Sequence[int] | None = None,
    *,
    ids: Sequence[str] | None = None,
    chunk: int = 1000,
) -> list[HeartbeatRecord]:
    """Every heartbeat in ``buckets`` (bucket numbers, ``store.leases.bucket_of``; all
    when None: docs/several-nodes.md, the buckets a node holds), among ``ids`` when given
    (those a notification named: ``store.notify``), paused ones included
    (the engine keeps every ping key in memory; it runs an actor for those not paused).
    The one query by which the engine learns its heartbeats.

    Read ``chunk`` rows at a time (keyset on ``seq``) and filtered as they come, so a
    load of 10,000 heartbeats never holds every row at once."""
    kept: list[HeartbeatRecord] = []
    after = 0
    while True:
        rows = await connection.fetch(
            f"SELECT t.seq, {_SELECT} FROM heartbeats t WHERE t.seq > $1 "
            "AND ($2::smallint[] IS NULL OR t.bucket = ANY($2::smallint[])) "
            "AND ($3::text[] IS NULL OR t.id = ANY($3::text[])) "
            f"ORDER BY t.seq LIMIT {int(chunk)}",
            after,
            None if buckets is None else list(buckets),
            None if ids is None else list(ids),
        )
        kept.extend(_interned(HeartbeatRecord.from_row(row)) for row in rows)
        if len(rows) < chunk:
            return kept
        after = rows[-1]["seq"]


def _interned(record: HeartbeatRecord) -> HeartbeatRecord:
    """``record`` with its account, status and severity strings shared with every other
    record's (``sys.intern``): the engine holds every heartbeat's record, and these
    values repeat (about 200 bytes a heartbeat less)."""
    return dataclasses.replace(
        record,
        account_id=sys.intern(record.account_id),
        status=sys.intern(record.status),
        incident_severity=sys.intern(record.incident_severity),
    )


_HEARTBEATS: EventedTable[HeartbeatRecord] = EventedTable(
    kind="heartbeat",
    table="heartbeats",
    columns=_COLUMNS,
    select=_SELECT,
    get=get_heartbeat,
    from_row=HeartbeatRecord.from_row,
    updatable=UPDATABLE,
    owned_by=(
        ("pings", "heartbeat_id"),
        ("heartbeat_moves", "heartbeat_id"),
        ("maintenance_window_resources", "resource_id"),
    ),
)
"""Heartbeats' changes and their ``heartbeat.*`` events (:mod:`store.evented`)."""
