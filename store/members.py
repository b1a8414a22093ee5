"""Members, the people who can be paged (docs/alerts.md; asyncio side: run them through
:class:`store.Database`): create, read, list, update, delete.

CRUD follows the other account-owned tables (:mod:`store.owned`): keyset pages by
``created``, ``updated`` or ``name``, PATCH as lock-diff-write, delete with a cursor
tombstone. ``contact_channels`` holds ``nch_`` ids of the account, in the order they are
tried; the routes check they exist, and deleting a channel takes it out of every
member's list (:func:`store.notification_channels.delete_channel`). Members write no
events; deleting one takes them out of the schedules (:func:`store.schedules.forget_member`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .database import Connection
from .events import EventCause
from .owned import delete_owned, foreign_ids, insert_owned, select_owned, update_owned
from .pagination import Page, PageRequest, fetch_page
from .records import MemberRecord, column_names
from .schedules import forget_member

__all__ = [
    "UPDATABLE",
    "delete_member",
    "get_member",
    "get_members",
    "insert_member",
    "list_members",
    "missing",
    "update_member",
]

_COLUMNS = column_names(MemberRecord)
_SELECT = ", ".join(f"t.{c}" for c in _COLUMNS)
UPDATABLE = frozenset({"name", "email", "time_zone", "contact_channels", "metadata"})
"""Columns :func:`update_member` may change."""


async def insert_member(connection: Connection, values: Mapping[str, Any]) -> MemberRecord:
    """Insert a member (``values``: every column of the record)."""
    row = await insert_owned(
        connection, table="members", columns=_COLUMNS, select=_SELECT, values=values
    )
    return MemberRecord.from_row(row)


async def get_member(
    connection: Connection, account_id: str, member_id: str, *, for_update: bool = False
) -> MemberRecord | None:
    """The account's member, or None. ``for_update`` locks it."""
    row = await select_owned(
        connection,
        table="members",
        select=_SELECT,
        account_id=account_id,
        row_id=member_id,
        for_update=for_update,
    )
    return None if row is None else MemberRecord.from_row(row)


async def get_members(
    connection: Connection, account_id: str, ids: Sequence[str]
) -> list[MemberRecord]:
    """The account's members among ``ids``, in the order of ``ids`` (each once; ids that
    are no member of the account left out)."""
    rows = await connection.fetch(
        f"SELECT {_SELECT} FROM members t WHERE t.account_id = $1 AND t.id = ANY($2::text[])",
        account_id,
        list(ids),
    )
    found = {r["id"]: MemberRecord.from_row(r) for r in rows}
    return [found[i] for i in dict.fromkeys(ids) if i in found]


async def list_members(
    connection: Connection, account_id: str, page: PageRequest
) -> Page[MemberRecord]:
    """One page of the account's members (``page.sort``: ``created``, ``updated`` or
    ``name``).

    Raises:
        CursorNotFound: the cursor names no member of the account.
    """
    rows, has_more = await fetch_page(
        connection, table="members", select=_SELECT, account_id=account_id, filters=[], page=page
    )
    return Page([MemberRecord.from_row(r) for r in rows], has_more)


async def update_member(
    connection: Connection,
    account_id: str,
    member_id: str,
    apply: Callable[[MemberRecord], dict[str, Any]],
    now: int,
) -> MemberRecord | None:
    """Lock the member, compute changes with ``apply(current)`` (a subset of
    :data:`UPDATABLE`; it may raise to refuse) and write them, ``updated`` = ``now``
    (epoch seconds) when something changed. Must run in a transaction. None when the
    account has no such member."""
    updated = await update_owned(
        connection,
        table="members",
        get=get_member,
        account_id=account_id,
        row_id=member_id,
        apply=apply,
        updatable=UPDATABLE,
        now=now,
    )
    return updated.record


async def delete_member(
    connection: Connection,
    account_id: str,
    member_id: str,
    now: int,
    cause: EventCause | None = None,
) -> bool:
    """Delete the account's member (members have no events of their own); a policy
    step naming them then tells nobody through that target. They leave every schedule
    layer naming them and their overrides go, with those schedules' events (``cause``),
    in this transaction (:func:`store.schedules.forget_member`). Must run in a
    transaction. False when the account has no such member.

    Raises:
        MemberInUse: they are the only member of a schedule's layer.
    """
    if await get_member(connection, account_id, member_id, for_update=True) is None:
        return False
    await forget_member(connection, account_id, member_id, now, cause)
    return await delete_owned(
        connection, table="members", account_id=account_id, row_id=member_id, now=now
    )


async def missing(connection: Connection, account_id: str, ids: Sequence[str]) -> list[str]:
    """The ids of ``ids`` that are no member of the account, in their order."""
    return await foreign_ids(connection, table="members", account_id=account_id, ids=ids)
