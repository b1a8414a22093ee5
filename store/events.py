"""Events, the transactional outbox (docs/incidents.md, Events).

An event is written by the function that makes the change, on the change's own
connection and inside its transaction (:func:`record_event`); the store actor's batch
writes the engine's events in its batch transaction (:mod:`store.alerting`). Whatever
crashes, a committed change has its event and a rolled-back one has none. Writing an
event also writes its webhook deliveries, in the same statement, through the trigger
``events_fan_out`` of migration 0004.

An event stores its resource as a *record snapshot* (:meth:`store.records._FromRow.snapshot`)
and the changed fields' old values; the web layer shapes them into the API's event
object when the event is read or delivered, with the same code that shapes responses.

Events are kept 30 days (``store.maintenance`` deletes older ones in bulk, with their
deliveries).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .database import Connection
from .ids import new_id
from .pagination import CreatedBounds, seq_page_newest_first
from .records import EventRecord


class Resource(Protocol):
    """A record an event can be about: it has an ``id`` and a snapshot."""

    @property
    def id(self) -> str:
        """The resource's prefixed id."""

    @property
    def account_id(self) -> str:
        """The account the resource, and so the event, belongs to."""

    def snapshot(self) -> dict[str, Any]:
        """The record's fields as JSON-able values."""


RETENTION_DAYS = 30
"""Days an event is kept (docs/incidents.md, Events)."""

_COLUMNS = (
    "id, account_id, type, resource_id, created, object, previous, request_id, idempotency_key"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class EventCause:
    """The API request that caused a change (the event's ``request`` object): its
    ``req_`` id and Idempotency-Key, each None when absent. The engine's changes have
    no cause (``request.id`` null)."""

    request_id: str | None = None
    idempotency_key: str | None = None


async def record_event(
    connection: Connection,
    *,
    type: str,
    record: Resource,
    created: int,
    cause: EventCause | None,
    previous: Mapping[str, Any] | None = None,
) -> str:
    """Write event ``type`` about ``record`` (its snapshot as it is right after the
    change; the event belongs to the record's account) in the caller's transaction;
    ``previous`` maps changed fields to their old values; ``created`` is epoch seconds.
    Returns the ``evt_`` id."""
    cause = cause or EventCause()
    event_id = new_id("evt")
    await connection.execute(
        f"INSERT INTO events ({_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        event_id,
        record.account_id,
        type,
        record.id,
        created,
        record.snapshot(),
        None if previous is None else dict(previous),
        cause.request_id,
        cause.idempotency_key,
    )
    return event_id


async def get_event(
    connection: Connection, account_id: str, event_id: str, kinds: Sequence[str]
) -> EventRecord | None:
    """The account's event, if its resource kind (the part of ``type`` before the dot:
    ``monitor``, ``incident``, ...) is one of ``kinds``; else None."""
    row = await connection.fetchrow(
        f"SELECT {_COLUMNS} FROM events WHERE id = $1 AND account_id = $2 "
        "AND split_part(type, '.', 1) = ANY($3::text[])",
        event_id,
        account_id,
        list(kinds),
    )
    return None if row is None else EventRecord.from_row(row)


@dataclass(frozen=True, slots=True, kw_only=True)
class EventFilter(CreatedBounds):
    """Filters of ``GET /events``: ``type`` exact, or a prefix when it ends in ``*``
    (``monitor.*``), and bounds on ``created`` (epoch seconds); each None when absent."""

    type: str | None = None


async def list_events(
    connection: Connection,
    account_id: str,
    kinds: Sequence[str],
    *,
    limit: int,
    starting_after: str | None = None,
    ending_before: str | None = None,
    filters: EventFilter = EventFilter(),
) -> tuple[list[EventRecord], bool]:
    """The account's events whose resource kind is in ``kinds``, newest first (by
    ``created``, then insertion order), ``limit`` (1-100) of them after
    ``starting_after`` or before ``ending_before`` (docs/api.md, Conventions). Returns ``(events,
    has_more)``, ``has_more`` in the direction of travel as in :mod:`store.pagination`.

    Raises:
        CursorNotFound: a cursor names no event this call could list.
    """
    type_filters: list[tuple[str, object]] = []
    if filters.type is not None:
        prefix = filters.type.endswith("*")
        condition = "starts_with(type, {})" if prefix else "type = {}"
        type_filters.append((condition, filters.type[:-1] if prefix else filters.type))
    rows, has_more = await seq_page_newest_first(
        connection,
        table="events",
        select=_COLUMNS,
        scope=["account_id = $1", "split_part(type, '.', 1) = ANY($2::text[])"],
        scope_args=[account_id, list(kinds)],
        filters=type_filters,
        bounds=filters,
        limit=limit,
        starting_after=starting_after,
        ending_before=ending_before,
    )
    return [EventRecord.from_row(r) for r in rows], has_more
