"""On-call schedules (docs/on-call.md; asyncio side: run them through
:class:`store.Database`): create, read, list, update, delete, the calendar key, and
:func:`load_plan`, what the computation of :mod:`store.rotation` needs (the overrides
are :mod:`store.schedule_overrides`).

CRUD follows the other account-owned tables (:mod:`store.owned`): keyset pages by
``created``, ``updated`` or ``name``, PATCH as lock-diff-write, delete with a cursor
tombstone. ``layers`` is stored in the API's JSON shape (:func:`store.rotation.plan_json`),
checked by :func:`store.rotation.parse_plan` before every write, so a stored schedule
always parses.

Every change writes its event in its own transaction (docs/incidents.md, Events):
``schedule.created``, ``.updated``, ``.deleted``, and ``schedule.override_created`` /
``.override_deleted`` (the override is the event's object). A schedule an escalation
policy targets is not deleted (:class:`ScheduleInUse`). The calendar key is a
secret: events never carry it (the record's snapshot leaves it out), and rotating it
moves ``updated`` but writes no event.

**A deleted member** (:func:`forget_member`, in the member's delete transaction, as
deleting a monitor takes it out of maintenance windows): it leaves every layer that
names it (``schedule.updated`` for each schedule changed) and its overrides are deleted
(``schedule.override_deleted`` each). A layer it is the only member of would be left
empty, which no schedule may have: the member's deletion is refused
(:class:`MemberInUse`) until the layer has someone else or is gone.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .database import Connection
from .errors import StoreError
from .events import EventCause, record_event
from .owned import delete_owned, foreign_ids, insert_owned, select_owned, update_owned
from .pagination import Page, PageRequest, fetch_page
from .records import _FromRow, column_names
from .rotation import InvalidSchedule, Override, Plan, Shift, on_call, parse_plan, plan_json, shifts
from .schedule_overrides import OVERRIDE_SELECT, OverrideRecord, replan_reminders

__all__ = [
    "UPDATABLE",
    "InvalidSchedule",
    "MemberInUse",
    "Plan",
    "ScheduleInUse",
    "ScheduleRecord",
    "Shift",
    "delete_schedule",
    "forget_member",
    "get_by_calendar_key",
    "get_schedule",
    "insert_schedule",
    "list_schedules",
    "load_plan",
    "missing",
    "new_calendar_key",
    "on_call",
    "parse_plan",
    "plan_json",
    "rotate_calendar_key",
    "shifts",
    "update_schedule",
]

UPDATABLE = frozenset({"name", "time_zone", "layers", "metadata"})
"""Columns :func:`update_schedule` may change."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleRecord(_FromRow):
    """A schedule (docs/on-call.md): an IANA ``time_zone`` and ``layers`` in the API's
    JSON shape; ``created``/``updated`` epoch seconds. ``calendar_key`` (32 hex digits)
    is left out of event snapshots: an event's schedule shows it as None."""

    id: str
    account_id: str
    name: str
    time_zone: str
    layers: list[dict[str, Any]]
    created: int
    updated: int
    metadata: dict[str, str]
    calendar_key: str | None = field(default=None, metadata={"internal": True})

    def plan(self) -> Plan:
        """Its plan, for :mod:`store.rotation` (stored layers always parse)."""
        return parse_plan(self.time_zone, self.layers)


class ScheduleInUse(StoreError):
    """A schedule still named by an escalation policy's step cannot be deleted
    (docs/on-call.md: 409 ``schedule_in_use``).

    Attributes:
        users: the ``esc_`` ids naming it, at most 5.
    """

    def __init__(self, schedule_id: str, users: list[str]) -> None:
        super().__init__(f"schedule {schedule_id} is a target of {', '.join(users)}")
        self.users = users


class MemberInUse(StoreError):
    """A member who is the only member of a schedule's layer cannot be deleted
    (docs/on-call.md: 409 ``member_in_use``).

    Attributes:
        schedule_id: the schedule; layer: the layer's name.
    """

    def __init__(self, member_id: str, schedule_id: str, layer: str) -> None:
        super().__init__(
            f"member {member_id} is the only member of layer {layer!r} of {schedule_id}"
        )
        self.schedule_id = schedule_id
        self.layer = layer


_COLUMNS = column_names(ScheduleRecord)
_SELECT = ", ".join(f"t.{c}" for c in _COLUMNS)


def new_calendar_key() -> str:
    """A fresh calendar key: 128 random bits (:mod:`secrets`) as 32 hex digits."""
    return secrets.token_hex(16)


async def insert_schedule(
    connection: Connection, values: Mapping[str, Any], cause: EventCause | None
) -> ScheduleRecord:
    """Insert a schedule (``values``: every column of the record, ``layers`` checked)
    and write ``schedule.created``. Must run in a transaction."""
    row = await insert_owned(
        connection, table="schedules", columns=_COLUMNS, select=_SELECT, values=values
    )
    record = ScheduleRecord.from_row(row)
    await record_event(
        connection, type="schedule.created", record=record, created=record.created, cause=cause
    )
    return record


async def get_schedule(
    connection: Connection, account_id: str, schedule_id: str, *, for_update: bool = False
) -> ScheduleRecord | None:
    """The account's schedule, or None. ``for_update`` locks it."""
    row = await select_owned(
        connection,
        table="schedules",
        select=_SELECT,
        account_id=account_id,
        row_id=schedule_id,
        for_update=for_update,
    )
    return None if row is None else ScheduleRecord.from_row(row)


async def get_by_calendar_key(
    connection: Connection, schedule_id: str, key: str
) -> ScheduleRecord | None:
    """The schedule ``schedule_id`` if ``key`` is its calendar key (compared in constant
    time), else None: a wrong key and an unknown schedule look the same."""
    row = await connection.fetchrow(
        f"SELECT {_SELECT} FROM schedules t WHERE t.id = $1", schedule_id
    )
    if row is None or not hmac.compare_digest(row["calendar_key"].encode(), key.encode()):
        return None
    return ScheduleRecord.from_row(row)


async def list_schedules(
    connection: Connection, account_id: str, page: PageRequest
) -> Page[ScheduleRecord]:
    """One page of the account's schedules (``page.sort``: ``created``, ``updated`` or
    ``name``).

    Raises:
        CursorNotFound: the cursor names no schedule of the account.
    """
    rows, has_more = await fetch_page(
        connection, table="schedules", select=_SELECT, account_id=account_id, filters=[], page=page
    )
    return Page([ScheduleRecord.from_row(r) for r in rows], has_more)


async def update_schedule(
    connection: Connection,
    account_id: str,
    schedule_id: str,
    apply: Callable[[ScheduleRecord], dict[str, Any]],
    now: int,
    cause: EventCause | None,
) -> ScheduleRecord | None:
    """Lock the schedule, compute changes with ``apply(current)`` (a subset of
    :data:`UPDATABLE`; it may raise to refuse) and write them, ``updated`` = ``now``
    (epoch seconds) and ``schedule.updated`` when something changed. Must run in a
    transaction. None when the account has no such schedule."""
    updated = await update_owned(
        connection,
        table="schedules",
        get=get_schedule,
        account_id=account_id,
        row_id=schedule_id,
        apply=apply,
        updatable=UPDATABLE,
        now=now,
    )
    if updated.record is not None and updated.previous:
        if {"layers", "time_zone"} & updated.previous.keys():
            await replan_reminders(connection, [schedule_id])
        await record_event(
            connection,
            type="schedule.updated",
            record=updated.record,
            created=now,
            cause=cause,
            previous=updated.previous,
        )
    return updated.record


async def rotate_calendar_key(
    connection: Connection, account_id: str, schedule_id: str, now: int
) -> ScheduleRecord | None:
    """Give the schedule a new calendar key (the old one stops working when this
    commits) and ``updated`` = ``now`` (epoch seconds); no event (events never carry the
    key). None when the account has no such schedule."""
    row = await connection.fetchrow(
        f"UPDATE schedules t SET calendar_key = $3, updated = $4 "
        f"WHERE t.id = $1 AND t.account_id = $2 RETURNING {_SELECT}",
        schedule_id,
        account_id,
        new_calendar_key(),
        now,
    )
    return None if row is None else ScheduleRecord.from_row(row)


async def delete_schedule(
    connection: Connection,
    account_id: str,
    schedule_id: str,
    now: int,
    cause: EventCause | None = None,
) -> bool:
    """Delete the account's schedule with its overrides and write ``schedule.deleted``
    (its last state). Must run in a transaction. False when the account has no such
    schedule.

    Raises:
        ScheduleInUse: an escalation policy's step targets it (a page would otherwise
            reach nobody through that target, without anyone deciding it).
    """
    record = await get_schedule(connection, account_id, schedule_id, for_update=True)
    if record is None:
        return False
    users = await connection.fetch(
        "SELECT id FROM escalation_policies WHERE account_id = $1 AND steps @> "
        "jsonb_build_array(jsonb_build_object('targets', jsonb_build_array("
        "jsonb_build_object('type', 'schedule', 'id', $2::text)))) ORDER BY seq LIMIT 5",
        account_id,
        schedule_id,
    )
    if users:
        raise ScheduleInUse(schedule_id, [r["id"] for r in users])
    await delete_owned(
        connection, table="schedules", account_id=account_id, row_id=schedule_id, now=now
    )
    await record_event(connection, type="schedule.deleted", record=record, created=now, cause=cause)
    return True


async def load_plan(
    connection: Connection, schedule_id: str, lo: int, hi: int, account_id: str | None = None
) -> tuple[Plan, list[Override]] | None:
    """What :func:`store.rotation.on_call` and :func:`store.rotation.shifts` need about
    the schedule over ``[lo, hi)`` (epoch seconds): its plan and its overrides that
    overlap the range, by start (then creation: a later override wins where two
    overlap). None when there is no such schedule (of ``account_id``, when given). For
    the escalation walk and the shift reminders, which know the schedule's id from a
    policy step; the API reads through the account first."""
    row = await connection.fetchrow(
        "SELECT time_zone, layers FROM schedules WHERE id = $1 "
        "AND ($2::text IS NULL OR account_id = $2)",
        schedule_id,
        account_id,
    )
    if row is None:
        return None
    rows = await connection.fetch(
        f"SELECT {OVERRIDE_SELECT} FROM schedule_overrides t WHERE t.schedule_id = $1 "
        "AND t.ends_at > $2 AND t.starts_at < $3 ORDER BY t.starts_at, t.seq",
        schedule_id,
        lo,
        hi,
    )
    overrides = [OverrideRecord.from_row(r).override() for r in rows]
    return parse_plan(row["time_zone"], row["layers"]), overrides


async def forget_member(
    connection: Connection, account_id: str, member_id: str, now: int, cause: EventCause | None
) -> None:
    """A member is being deleted (in the delete's transaction): take them out of every
    layer of the account's schedules (``schedule.updated`` for each schedule changed)
    and delete their overrides (``schedule.override_deleted`` each).

    Raises:
        MemberInUse: they are the only member of a layer (nothing is changed: the
            caller's transaction rolls back).
    """
    rows = await connection.fetch(
        "SELECT id FROM schedules WHERE account_id = $1 "
        "AND layers @> jsonb_build_array("
        "jsonb_build_object('members', jsonb_build_array($2::text))) "
        "ORDER BY seq FOR UPDATE",
        account_id,
        member_id,
    )

    def without(current: ScheduleRecord) -> dict[str, Any]:
        layers = []
        for layer in current.layers:
            members = [m for m in layer["members"] if m != member_id]
            if not members:
                raise MemberInUse(member_id, current.id, layer["name"])
            layers.append({**layer, "members": members})
        return {"layers": layers}

    for row in rows:
        await update_schedule(connection, account_id, row["id"], without, now, cause)
    gone = await connection.fetch(
        f"DELETE FROM schedule_overrides t WHERE t.account_id = $1 AND t.member_id = $2 "
        f"RETURNING {OVERRIDE_SELECT}",
        account_id,
        member_id,
    )
    await replan_reminders(connection, sorted({r["schedule_id"] for r in gone}))
    for override in gone:
        await record_event(
            connection,
            type="schedule.override_deleted",
            record=OverrideRecord.from_row(override),
            created=now,
            cause=cause,
        )


async def missing(connection: Connection, account_id: str, ids: list[str]) -> list[str]:
    """The ids of ``ids`` that are no schedule of the account, in their order (a policy
    step's schedule targets)."""
    return await foreign_ids(connection, table="schedules", account_id=account_id, ids=ids)
