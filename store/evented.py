"""Account-owned tables whose every change writes an event (monitors, heartbeats):
create, update, pause or resume, delete, each with its ``<kind>.<what>`` event in the
change's own transaction (docs/incidents.md, Events: a transactional outbox).

The rows themselves are read and written as :mod:`store.owned` says; this module adds
the events, once for every such table (:class:`EventedTable`), and, in the same
transaction, a ``NOTIFY`` of the change (:func:`store.notify.notify_change`: the node
that runs the resource's actor learns of it when it commits; docs/several-nodes.md). Table
and column names come from code, never from a request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .alerts import resolve_of_deleted
from .database import Connection
from .events import EventCause, Resource, record_event
from .notify import notify_change
from .owned import Getter, delete_owned, insert_owned, update_owned

__all__ = ["EventedTable"]

R = TypeVar("R", bound=Resource)


@dataclass(frozen=True, slots=True, kw_only=True)
class EventedTable(Generic[R]):
    """One table of resources of ``kind`` (``monitor``, ``heartbeat``).

    Attributes:
        kind: the resource's event family (``<kind>.created`` ...).
        table: the table.
        columns: its columns as the record names them (what an insert may set).
        select: the select list over ``t`` that reads a record.
        get: the table module's read of one row (:class:`store.owned.Getter`).
        from_row: builds a record from a row read by ``select``.
        updatable: the columns an update may change.
        owned_by: tables whose rows belong to a resource through a ``column`` (``(table,
            column)`` pairs), deleted with it.
    """

    kind: str
    table: str
    columns: Sequence[str]
    select: str
    get: Getter[R]
    from_row: Callable[[Any], R]
    updatable: frozenset[str]
    owned_by: Sequence[tuple[str, str]] = ()

    async def insert(
        self, connection: Connection, values: Mapping[str, Any], cause: EventCause | None
    ) -> R:
        """Insert a row from ``values`` (the table's defaults for the rest) and write
        ``<kind>.created``; run inside a transaction. Returns the stored record."""
        row = await insert_owned(
            connection, table=self.table, columns=self.columns, select=self.select, values=values
        )
        record = self.from_row(row)
        await record_event(
            connection,
            type=f"{self.kind}.created",
            record=record,
            created=row["created"],
            cause=cause,
        )
        await notify_change(connection, record.id)
        return record

    async def update(
        self,
        connection: Connection,
        account_id: str,
        row_id: str,
        apply: Callable[[R], dict[str, Any]],
        now: int,
        cause: EventCause | None,
    ) -> R | None:
        """Lock the row, compute its changes with ``apply(current)`` and write them as
        :func:`store.owned.update_owned` says, with ``<kind>.updated`` (its
        ``previous`` the changed columns' old values) when something changed. Must run
        inside a transaction. None when the account has no such row."""
        updated = await update_owned(
            connection,
            table=self.table,
            get=self.get,
            account_id=account_id,
            row_id=row_id,
            apply=apply,
            updatable=self.updatable,
            now=now,
        )
        record, previous = updated.record, updated.previous
        if record is not None and previous:
            await record_event(
                connection,
                type=f"{self.kind}.updated",
                record=record,
                created=now,
                cause=cause,
                previous=previous,
            )
            await notify_change(connection, record.id)
        return record

    async def moved(
        self,
        connection: Connection,
        account_id: str,
        row_id: str,
        old_status: str | None,
        now: int,
        cause: EventCause | None,
    ) -> tuple[R | None, bool]:
        """After a pause or resume moved the row from ``old_status`` (None: nothing
        moved, a no-op) in this transaction: read the row and write ``<kind>.paused`` or
        ``<kind>.resumed`` (``previous`` the old status). Returns ``(record, changed)``;
        the record is None when the account has no such row."""
        record = await self.get(connection, account_id, row_id)
        if record is not None and old_status is not None:
            paused = getattr(record, "status", None) == "paused"
            await record_event(
                connection,
                type=f"{self.kind}.paused" if paused else f"{self.kind}.resumed",
                record=record,
                created=now,
                cause=cause,
                previous={"status": old_status},
            )
            await notify_change(connection, record.id)
        return record, old_status is not None

    async def delete(
        self,
        connection: Connection,
        account_id: str,
        row_id: str,
        now: int,
        cause: EventCause | None,
    ) -> bool:
        """Delete the row for good, with the rows of :attr:`owned_by`, and write
        ``<kind>.deleted`` (its last state); its open alert is resolved first
        (:func:`store.alerts.resolve_of_deleted`). Must run inside a transaction. False
        when the account has no such row."""
        record = await self.get(connection, account_id, row_id, for_update=True)
        if record is None:
            return False
        await resolve_of_deleted(connection, account_id, row_id, now=now, cause=cause)
        await delete_owned(
            connection, table=self.table, account_id=account_id, row_id=row_id, now=now
        )
        await record_event(
            connection, type=f"{self.kind}.deleted", record=record, created=now, cause=cause
        )
        for table, column in self.owned_by:
            await connection.execute(f"DELETE FROM {table} WHERE {column} = $1", row_id)
        await notify_change(connection, row_id)
        return True
