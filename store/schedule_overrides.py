"""The overrides of on-call schedules (docs/on-call.md, "Overrides"; asyncio side: run
them through :class:`store.Database`): create, list, delete. An override puts a member
on call over ``[starts_at, ends_at)`` (epoch seconds) whatever the schedule's layers say
(migration 0022). Each change writes its event in its own transaction (docs/incidents.md,
Events): ``schedule.override_created``, ``schedule.override_deleted``, the override the
event's object. What reads them for the computation is :func:`store.schedules.load_plan`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .database import Connection
from .events import EventCause, record_event
from .ids import new_id
from .owned import insert_owned
from .pagination import Page, PageRequest, fetch_page
from .records import _FromRow, column_names
from .rotation import Override

__all__ = [
    "OVERRIDE_SELECT",
    "OverrideRecord",
    "delete_override",
    "insert_override",
    "list_overrides",
    "replan_reminders",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class OverrideRecord(_FromRow):
    """An override: ``member_id`` is on call over ``[starts_at, ends_at)`` (epoch
    seconds), whatever the layers say."""

    id: str
    account_id: str
    schedule_id: str
    member_id: str
    starts_at: int
    ends_at: int
    created: int

    def override(self) -> Override:
        """As :mod:`store.rotation` takes it."""
        return Override(id=self.id, member=self.member_id, start=self.starts_at, end=self.ends_at)


_OVERRIDE_COLUMNS = column_names(OverrideRecord)
OVERRIDE_SELECT = ", ".join(f"t.{c}" for c in _OVERRIDE_COLUMNS)
"""The select list of an override, over ``t``."""


async def insert_override(
    connection: Connection, values: Mapping[str, Any], cause: EventCause | None
) -> OverrideRecord | None:
    """Insert an override (``values``: every column of :class:`OverrideRecord` but ``id``,
    minted here with the ``ovr`` prefix; its member checked) under a lock of its schedule
    (overrides of one schedule are written one at a time), and write
    ``schedule.override_created``. Must run in a transaction. None when the account has no
    such schedule (deleted meanwhile, or never)."""
    owner = await connection.fetchval(
        "SELECT id FROM schedules WHERE id = $1 AND account_id = $2 FOR NO KEY UPDATE",
        values["schedule_id"],
        values["account_id"],
    )
    if owner is None:
        return None
    row = await insert_owned(
        connection,
        table="schedule_overrides",
        columns=_OVERRIDE_COLUMNS,
        select=OVERRIDE_SELECT,
        values={**values, "id": new_id("ovr")},
    )
    record = OverrideRecord.from_row(row)
    await replan_reminders(connection, [record.schedule_id])
    await record_event(
        connection,
        type="schedule.override_created",
        record=record,
        created=record.created,
        cause=cause,
    )
    return record


async def list_overrides(
    connection: Connection,
    account_id: str,
    schedule_id: str,
    page: PageRequest,
    *,
    ends_after: int | None = None,
) -> Page[OverrideRecord]:
    """One page of the schedule's overrides by ``starts_at`` (``page.sort`` must be
    ``starts_at``), only those ending after ``ends_after`` (epoch seconds) when given.
    A deleted override is no cursor (overrides keep no tombstone).

    Raises:
        CursorNotFound: the cursor names no override of the account.
    """
    filters: list[tuple[str, object]] = [("t.schedule_id = {}", schedule_id)]
    if ends_after is not None:
        filters.append(("t.ends_at > {}", ends_after))
    rows, has_more = await fetch_page(
        connection,
        table="schedule_overrides",
        select=OVERRIDE_SELECT,
        account_id=account_id,
        filters=filters,
        page=page,
    )
    return Page([OverrideRecord.from_row(r) for r in rows], has_more)


async def delete_override(
    connection: Connection,
    account_id: str,
    schedule_id: str,
    override_id: str,
    now: int,
    cause: EventCause | None,
) -> bool:
    """Delete the schedule's override and write ``schedule.override_deleted`` (its last
    state). Must run in a transaction. False when there is no such override."""
    row = await connection.fetchrow(
        f"DELETE FROM schedule_overrides t WHERE t.id = $1 AND t.schedule_id = $2 "
        f"AND t.account_id = $3 RETURNING {OVERRIDE_SELECT}",
        override_id,
        schedule_id,
        account_id,
    )
    if row is None:
        return False
    record = OverrideRecord.from_row(row)
    await replan_reminders(connection, [schedule_id])
    await record_event(
        connection, type="schedule.override_deleted", record=record, created=now, cause=cause
    )
    return True


async def replan_reminders(connection: Connection, schedule_ids: Sequence[str]) -> None:
    """Who is on call in ``schedule_ids`` changed (call it in the change's transaction):
    the next walk of the shift reminders plans theirs again from its instant on
    (:mod:`store.shift_reminders`)."""
    if schedule_ids:
        await connection.execute(
            "UPDATE schedules SET reminders_planned_until = NULL WHERE id = ANY($1::text[])",
            list(schedule_ids),
        )
