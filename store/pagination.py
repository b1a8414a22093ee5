"""Keyset (cursor) pagination over ``(sort key, seq)`` (docs/api.md, Conventions).

A list is ordered by one sort column and then by the table's ``seq`` (insertion order), so
the order is total and stable. A page after a cursor is "rows whose ``(key, seq)`` come
after the cursor row's", which stays correct when rows are inserted or deleted between
pages: no offsets. The cursor is an object id (docs/api.md, Conventions and decisions); its
sort key is read from the row, or from ``cursor_tombstones`` when the row was deleted since
(kept 24 hours), so deleting the last object of a page does not break the next request.

``ending_before`` pages are fetched in reverse order and flipped back, so a page always
reads in the list's order; ``has_more`` says whether more rows lie beyond the page in the
direction of travel (after it for ``starting_after`` or no cursor, before it for
``ending_before``), as Stripe does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .database import Connection
from .errors import CursorNotFound

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class PageRequest:
    """One page's parameters, already validated by the caller.

    Attributes:
        limit: 1 to 100 rows.
        sort: a column of the table's whitelist (``created``, ``updated``, ``name``,
            ``title``, or ``starts_at``).
        descending: True for a leading ``-`` in the API's ``sort`` value.
        starting_after / ending_before: at most one of them, an object id.
    """

    limit: int = 10
    sort: str = "created"
    descending: bool = True
    starting_after: str | None = None
    ending_before: str | None = None


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """Rows of one page in list order, and whether more lie beyond it."""

    items: list[T]
    has_more: bool


_TOMBSTONE_COLUMN: dict[str, str | None] = {
    "created": "created",
    "updated": "updated",
    "name": "name",
    "title": "name",
    "starts_at": None,
}
"""Each sort column's column in ``cursor_tombstones`` (None: rows sorted by it keep no
tombstone, so a deleted one is no cursor: a schedule's overrides by ``starts_at``)."""


async def fetch_page(
    connection: Connection,
    *,
    table: str,
    select: str,
    account_id: str,
    filters: list[tuple[str, object]],
    page: PageRequest,
) -> tuple[list[object], bool]:
    """Fetch one page of ``table`` for ``account_id`` (asyncio side).

    ``select`` is the select list (with the table aliased ``t``); ``filters`` are pairs of
    an SQL condition with a single ``{}`` placeholder for its parameter and the value, for
    example ``("t.status = {}", "up")``. ``table`` and ``page.sort`` must come from code,
    never from a request.

    Returns:
        the asyncpg rows in list order, and ``has_more``.
    Raises:
        CursorNotFound: the cursor id is neither a row of the account nor a tombstone.
    """
    sort = page.sort
    args: list[object] = [account_id]
    where = ["t.account_id = $1"]
    for condition, value in filters:
        args.append(value)
        where.append(condition.format(f"${len(args)}"))

    forward = page.ending_before is None
    descending = page.descending if forward else not page.descending
    cursor = page.starting_after if forward else page.ending_before
    if cursor is not None:
        param = "starting_after" if forward else "ending_before"
        tombstone = _TOMBSTONE_COLUMN[sort]
        buried = (
            ""
            if tombstone is None
            else f" UNION ALL SELECT {tombstone}, seq FROM cursor_tombstones "
            "WHERE id = $1 AND account_id = $2"
        )
        key = await connection.fetchrow(
            f"SELECT {sort} AS key, seq FROM {table} WHERE id = $1 AND account_id = $2"
            f"{buried} LIMIT 1",
            cursor,
            account_id,
        )
        if key is None:
            raise CursorNotFound(param, cursor)
        args.extend((key["key"], key["seq"]))
        op = "<" if descending else ">"
        where.append(f"(t.{sort}, t.seq) {op} (${len(args) - 1}, ${len(args)})")

    rows = await connection.fetch(_page_select(table, select, where, page, descending), *args)
    return _page_of(rows, page, forward)


def _page_select(
    table: str, select: str, where: list[str], page: PageRequest, descending: bool
) -> str:
    """The ``SELECT`` of a page: one row more than ``page.limit``, to tell ``has_more``;
    ``page_seq`` is its rows' tiebreaker."""
    direction = "DESC" if descending else "ASC"
    return (
        f"SELECT {select}, t.seq AS page_seq FROM {table} t WHERE {' AND '.join(where)} "
        f"ORDER BY t.{page.sort} {direction}, t.seq {direction} LIMIT {int(page.limit) + 1}"
    )


def _page_of(rows: list[Any], page: PageRequest, forward: bool) -> tuple[list[object], bool]:
    """The rows of a page in list order, and ``has_more``."""
    has_more = len(rows) > page.limit
    rows = rows[: page.limit]
    if not forward:
        rows.reverse()
    return list(rows), has_more


async def fetch_first_page_with_token(
    connection: Connection,
    token_sql: Callable[..., str],
    token_id: str,
    *,
    table: str,
    select: str,
    filters: list[tuple[str, object]],
    page: PageRequest,
) -> tuple[Any, list[object], bool]:
    """:func:`fetch_page` of a page without a cursor, for the account of token
    ``token_id``, in the statement ``token_sql(page_select, once=...)`` that reads the
    token too (``store.accounts.with_token_sql``: the token is ``$1`` and ``tk``; only the
    row ``once`` names carries it): one round trip. Returns the row that carries the
    token's columns (None when the token is unknown), the page's rows and ``has_more``.

    Raises:
        ValueError: ``page`` has a cursor (read it with :func:`fetch_page`).
    """
    if page.starting_after is not None or page.ending_before is not None:
        raise ValueError("a page with a cursor is read with fetch_page")
    args: list[object] = [token_id]
    where = ["t.account_id = tk.account_id"]
    for condition, value in filters:
        args.append(value)
        where.append(condition.format(f"${len(args)}"))
    direction = "DESC" if page.descending else "ASC"
    numbered = (  # the one row that carries the token: any one, numbered 1
        "SELECT p.*, row_number() OVER () AS page_row "
        f"FROM ({_page_select(table, select, where, page, page.descending)}) p"
    )
    rows = await connection.fetch(
        token_sql(numbered, once="r.page_row IS NULL OR r.page_row = 1")
        + f" ORDER BY r.{page.sort} {direction}, r.page_seq {direction}",
        *args,
    )
    if not rows:
        return None, [], False
    first = next(r for r in rows if r["page_row"] is None or r["page_row"] == 1)
    found, has_more = _page_of([r for r in rows if r["page_seq"] is not None], page, True)
    return first, found, has_more


async def bury(connection: Connection, *, table: str, row_id: str, now: int) -> None:
    """Keep the sort keys of a row about to be deleted, as a cursor tombstone, and purge
    tombstones older than 24 hours (asyncio side)."""
    # the tombstone's ``name`` serves sorts by name or title; tables without one keep ''
    name = {
        "incidents": "title",
        "monitors": "name",
        "maintenance_windows": "title",
        "status_pages": "name",
        "heartbeats": "name",
        "schedules": "name",
    }.get(table, "''")
    await connection.execute(
        "INSERT INTO cursor_tombstones (id, account_id, created, updated, name, seq, deleted_at) "
        f"SELECT id, account_id, created, updated, {name}, seq, $2 FROM {table} WHERE id = $1 "
        "ON CONFLICT (id) DO NOTHING",
        row_id,
        now,
    )
    await connection.execute("DELETE FROM cursor_tombstones WHERE deleted_at < $1", now - 86_400)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatedBounds:
    """Bounds on ``created`` (epoch seconds) of a time-ordered list, each None when
    absent (the ``created[gt|gte|lt|lte]`` parameters: docs/incidents.md, docs/history.md)."""

    created_gt: int | None = None
    created_gte: int | None = None
    created_lt: int | None = None
    created_lte: int | None = None


async def fetch_newest_first(
    connection: Connection,
    *,
    table: str,
    select: str,
    where: Sequence[str],
    args: Sequence[object],
    bounds: CreatedBounds,
    tiebreak: str,
    cursor_key: tuple[int, object] | None,
    forward: bool,
    limit: int,
) -> tuple[list[Any], bool]:
    """One page of ``table`` newest first, ordered by ``(created, tiebreak)`` (asyncio side).

    ``where`` are SQL conditions over ``args`` (numbered ``$1``...); ``bounds`` add their
    own. ``cursor_key`` is the ``(created, tiebreak)`` of the cursor row, which the caller
    looked up: the page lies after it when ``forward`` (``starting_after``), else before
    it (``ending_before``, fetched in reverse and flipped back). ``table``, ``select`` and
    ``tiebreak`` come from code, never from a request. Returns the rows in list order and
    ``has_more`` in the direction of travel, as :func:`fetch_page` does.
    """
    args = list(args)
    where = list(where)
    for op, value in (
        (">", bounds.created_gt),
        (">=", bounds.created_gte),
        ("<", bounds.created_lt),
        ("<=", bounds.created_lte),
    ):
        if value is not None:
            args.append(value)
            where.append(f"created {op} ${len(args)}")
    if cursor_key is not None:
        args.extend(cursor_key)
        op = "<" if forward else ">"
        where.append(f"(created, {tiebreak}) {op} (${len(args) - 1}, ${len(args)})")
    direction = "DESC" if forward else "ASC"
    rows = await connection.fetch(
        f"SELECT {select} FROM {table} WHERE {' AND '.join(where)} "
        f"ORDER BY created {direction}, {tiebreak} {direction} LIMIT {int(limit) + 1}",
        *args,
    )
    has_more = len(rows) > limit
    rows = rows[:limit]
    if not forward:
        rows.reverse()
    return list(rows), has_more


async def seq_page_newest_first(
    connection: Connection,
    *,
    table: str,
    select: str,
    scope: Sequence[str],
    scope_args: Sequence[object],
    filters: Sequence[tuple[str, object]] = (),
    bounds: CreatedBounds = CreatedBounds(),
    limit: int,
    starting_after: str | None,
    ending_before: str | None,
) -> tuple[list[Any], bool]:
    """One page of a time-ordered ``table`` (events, pings) newest first, ordered by
    ``(created, seq)``, after ``starting_after`` or before ``ending_before`` (at most one;
    an object id). ``scope`` are SQL conditions over ``scope_args`` (``$1``...): what the
    list covers and where a cursor must lie; ``filters`` narrow the page (``(condition
    with one {} placeholder, value)``, as :func:`fetch_page`) but not the cursor, and
    ``bounds`` bound ``created``. Returns the rows in list order and ``has_more``, as
    :func:`fetch_newest_first`.

    Raises:
        CursorNotFound: the cursor is no row within ``scope``.
    """
    args = list(scope_args)
    forward = ending_before is None
    cursor = starting_after if forward else ending_before
    cursor_key = None
    if cursor is not None:
        key = await connection.fetchrow(
            f"SELECT created, seq FROM {table} WHERE id = ${len(args) + 1} AND "
            + " AND ".join(scope),
            *args,
            cursor,
        )
        if key is None:
            raise CursorNotFound("starting_after" if forward else "ending_before", cursor)
        cursor_key = (int(key["created"]), key["seq"])
    where = list(scope)
    for condition, value in filters:
        args.append(value)
        where.append(condition.format(f"${len(args)}"))
    return await fetch_newest_first(
        connection,
        table=table,
        select=select,
        where=where,
        args=args,
        bounds=bounds,
        tiebreak="seq",
        cursor_key=cursor_key,
        forward=forward,
        limit=limit,
    )
