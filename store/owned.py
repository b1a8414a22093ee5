"""Reads and writes shared by the account-owned tables (``monitors``, ``incidents``,
``webhook_endpoints``).

Both are updated the same way (lock, diff, write only what changed, bump ``updated``) and
deleted the same way (lock, keep a cursor tombstone, delete), so the logic lives here
once; the table modules add what is their own. Table names come from code, never from a
request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from .database import Connection
from .pagination import bury

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


@dataclass(frozen=True, slots=True)
class Updated(Generic[R]):
    """What :func:`update_owned` did: the row afterwards (None: no such row) and the old
    values of the columns that changed (``{}`` when nothing did; an event's
    ``previous``)."""

    record: R | None
    previous: dict[str, Any]


class Getter(Protocol[R_co]):
    """A table module's read of one row: ``get(connection, account_id, row_id,
    for_update=...)``, None when the account has no such row."""

    def __call__(
        self, connection: Connection, account_id: str, row_id: str, /, *, for_update: bool = ...
    ) -> Awaitable[R_co | None]: ...


async def insert_owned(
    connection: Connection,
    *,
    table: str,
    columns: Sequence[str],
    select: str,
    values: Mapping[str, Any],
) -> Any:
    """Insert a row of ``table`` from the ``values`` whose keys are in ``columns`` (the
    rest are the table's defaults) and return it as ``select`` (over ``t``) reads it."""
    names = [n for n in columns if n in values]
    placeholders = ", ".join(f"${i}" for i in range(1, len(names) + 1))
    return await connection.fetchrow(
        f"INSERT INTO {table} AS t ({', '.join(names)}) VALUES ({placeholders}) RETURNING {select}",
        *(values[n] for n in names),
    )


async def select_owned(
    connection: Connection,
    *,
    table: str,
    select: str,
    account_id: str,
    row_id: str,
    for_update: bool = False,
) -> Any:
    """The account's row ``row_id`` of ``table`` as ``select`` (over ``t``) reads it, or
    None when the account has no such row. ``for_update`` locks it until the transaction
    ends."""
    lock = " FOR UPDATE" if for_update else ""
    return await connection.fetchrow(
        f"SELECT {select} FROM {table} t WHERE t.id = $1 AND t.account_id = $2{lock}",
        row_id,
        account_id,
    )


async def update_owned(
    connection: Connection,
    *,
    table: str,
    get: Getter[R],
    account_id: str,
    row_id: str,
    apply: Callable[[R], dict[str, Any]],
    updatable: frozenset[str],
    now: int,
) -> Updated[R]:
    """Lock the row (``get(..., for_update=True)``), compute its changes with
    ``apply(current)`` and write them; the row as it is afterwards, and the old values of
    the columns that changed (``{}`` when nothing did; an event's ``previous``).

    ``apply`` returns the columns to change (a subset of ``updatable``, only values that
    differ) or raises to refuse the update; whatever it raises propagates and the caller's
    transaction rolls back. ``updated`` is set to ``now`` (epoch seconds) only when
    something changed. Must run inside a transaction. The row is None when the account
    has no such row.
    """
    current = await get(connection, account_id, row_id, for_update=True)
    if current is None:
        return Updated(None, {})
    changes = apply(current)
    if not changes:
        return Updated(current, {})
    await write_changes(
        connection,
        table=table,
        account_id=account_id,
        row_id=row_id,
        changes=changes,
        updatable=updatable,
        now=now,
    )
    after = await get(connection, account_id, row_id)
    return Updated(after, {n: getattr(current, n) for n in changes})


async def write_changes(
    connection: Connection,
    *,
    table: str,
    account_id: str,
    row_id: str,
    changes: Mapping[str, Any],
    updatable: frozenset[str],
    now: int,
) -> None:
    """Set ``changes`` (column to value) and ``updated = now`` (epoch seconds) on the row.

    Raises:
        ValueError: a column outside ``updatable`` (a programming error).
    """
    unknown = set(changes) - updatable
    if unknown:
        raise ValueError(f"not updatable: {sorted(unknown)}")
    names = list(changes)
    assignments = ", ".join(f"{n} = ${i}" for i, n in enumerate(names, start=3))
    await connection.execute(
        f"UPDATE {table} SET {assignments}, updated = ${len(names) + 3} "
        "WHERE id = $1 AND account_id = $2",
        row_id,
        account_id,
        *(changes[n] for n in names),
        now,
    )


async def delete_owned(
    connection: Connection, *, table: str, account_id: str, row_id: str, now: int
) -> bool:
    """Lock and delete the account's row, keeping its sort keys as a cursor tombstone.
    Must run inside a transaction. False when the account has no such row."""
    exists = await connection.fetchval(
        f"SELECT id FROM {table} WHERE id = $1 AND account_id = $2 FOR UPDATE",
        row_id,
        account_id,
    )
    if exists is None:
        return False
    await bury(connection, table=table, row_id=row_id, now=now)
    await connection.execute(f"DELETE FROM {table} WHERE id = $1", row_id)
    return True


async def foreign_ids(
    connection: Connection, *, table: str, account_id: str, ids: Sequence[str]
) -> list[str]:
    """The ids of ``ids`` that are no row of the account in ``table``, in their order
    (a reference that must name the account's own objects: a member's contact channels,
    a policy's targets)."""
    rows = await connection.fetch(
        f"SELECT id FROM {table} WHERE account_id = $1 AND id = ANY($2::text[])",
        account_id,
        list(ids),
    )
    own = {r["id"] for r in rows}
    return [i for i in ids if i not in own]
