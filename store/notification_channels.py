"""Notification channels, where a message goes (docs/alerts.md; asyncio side: run them
through :class:`store.Database`): create, read, list, update, delete, and the record of
a test message.

CRUD follows the other account-owned tables (:mod:`store.owned`): keyset pages by
``created``, ``updated`` or ``name``, PATCH as lock-diff-write, delete with a cursor
tombstone. ``config`` is stored whole, secrets included: the web layer masks it. Deleting
a channel deletes its notifications (``ON DELETE CASCADE``, migration 0018) and takes it
out of every member's ``contact_channels`` in the same transaction. Channels write no
events.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .database import Connection
from .events import EventCause
from .ids import new_id
from .owned import delete_owned, foreign_ids, insert_owned, select_owned, update_owned
from .pagination import Page, PageRequest, fetch_page
from .records import NotificationChannelRecord, column_names

__all__ = [
    "UPDATABLE",
    "delete_channel",
    "get_channel",
    "insert_channel",
    "list_channels",
    "missing",
    "record_test",
    "update_channel",
]

_COLUMNS = column_names(NotificationChannelRecord)
_SELECT = ", ".join(f"t.{c}" for c in _COLUMNS)
UPDATABLE = frozenset({"name", "config", "enabled", "send_resolved", "metadata"})
"""Columns :func:`update_channel` may change (``type`` may not: a channel of another
type is another channel)."""


async def insert_channel(
    connection: Connection, values: Mapping[str, Any]
) -> NotificationChannelRecord:
    """Insert a channel (``values``: every column of the record)."""
    row = await insert_owned(
        connection,
        table="notification_channels",
        columns=_COLUMNS,
        select=_SELECT,
        values=values,
    )
    return NotificationChannelRecord.from_row(row)


async def get_channel(
    connection: Connection, account_id: str, channel_id: str, *, for_update: bool = False
) -> NotificationChannelRecord | None:
    """The account's channel, or None. ``for_update`` locks it."""
    row = await select_owned(
        connection,
        table="notification_channels",
        select=_SELECT,
        account_id=account_id,
        row_id=channel_id,
        for_update=for_update,
    )
    return None if row is None else NotificationChannelRecord.from_row(row)


async def list_channels(
    connection: Connection, account_id: str, page: PageRequest, *, type: str | None = None
) -> Page[NotificationChannelRecord]:
    """One page of the account's channels (``page.sort``: ``created``, ``updated`` or
    ``name``), only those of ``type`` when given.

    Raises:
        CursorNotFound: the cursor names no channel of the account.
    """
    rows, has_more = await fetch_page(
        connection,
        table="notification_channels",
        select=_SELECT,
        account_id=account_id,
        filters=[] if type is None else [("t.type = {}", type)],
        page=page,
    )
    return Page([NotificationChannelRecord.from_row(r) for r in rows], has_more)


async def update_channel(
    connection: Connection,
    account_id: str,
    channel_id: str,
    apply: Callable[[NotificationChannelRecord], dict[str, Any]],
    now: int,
) -> NotificationChannelRecord | None:
    """Lock the channel, compute changes with ``apply(current)`` (a subset of
    :data:`UPDATABLE`; it may raise to refuse) and write them, ``updated`` = ``now``
    (epoch seconds) when something changed. Must run in a transaction. None when the
    account has no such channel."""
    updated = await update_owned(
        connection,
        table="notification_channels",
        get=get_channel,
        account_id=account_id,
        row_id=channel_id,
        apply=apply,
        updatable=UPDATABLE,
        now=now,
    )
    return updated.record


async def delete_channel(
    connection: Connection,
    account_id: str,
    channel_id: str,
    now: int,
    cause: EventCause | None = None,
) -> bool:
    """Delete the account's channel with its notifications, and take it out of the
    ``contact_channels`` of the account's members (their ``updated`` becomes ``now``).
    No event (``cause`` is unused). Must run in a transaction. False when the account
    has no such channel."""
    if not await delete_owned(
        connection,
        table="notification_channels",
        account_id=account_id,
        row_id=channel_id,
        now=now,
    ):
        return False
    await connection.execute(
        "UPDATE members SET contact_channels = array_remove(contact_channels, $2), "
        "updated = $3 WHERE account_id = $1 AND contact_channels @> ARRAY[$2]::text[]",
        account_id,
        channel_id,
        now,
    )
    return True


async def record_test(
    connection: Connection,
    account_id: str,
    channel_id: str,
    *,
    status: str,
    response_status: int | None,
    error: str | None,
    duration_ms: float,
    now: int,
) -> str:
    """Record a test message already sent to the channel: a notification of kind
    ``test`` without an alert, settled (``status`` ``succeeded`` or ``failed``) after its
    one attempt, and that attempt (``duration_ms`` milliseconds; ``now`` epoch seconds).
    Must run in a transaction. Returns the notification's ``ntf_`` id."""
    notification_id = new_id("ntf")
    await connection.execute(
        "INSERT INTO notifications (id, account_id, alert_id, channel_id, kind, status, "
        "attempts, last_attempt_at, next_attempt_at, give_up_at, created) "
        "VALUES ($1, $2, NULL, $3, 'test', $4, 1, $5, NULL, $5, $5)",
        notification_id,
        account_id,
        channel_id,
        status,
        now,
    )
    await connection.execute(
        "INSERT INTO notification_attempts (notification_id, attempted_at, status, "
        "response_status, error, duration_ms) VALUES ($1, $2, $3, $4, $5, $6)",
        notification_id,
        now,
        status,
        response_status,
        error,
        duration_ms,
    )
    return notification_id


async def missing(connection: Connection, account_id: str, ids: Sequence[str]) -> list[str]:
    """The ids of ``ids`` that are no channel of the account, in their order."""
    return await foreign_ids(
        connection, table="notification_channels", account_id=account_id, ids=ids
    )
