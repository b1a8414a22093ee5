"""Status pages (extensions part 5; asyncio side: run them through
:class:`store.Database`): the account's CRUD, and the one read of everything a public
page shows.

**CRUD** follows the other account-owned tables (:mod:`store.owned`): keyset pages by
``created``, ``updated`` or ``name``, PATCH as lock-diff-write, delete with a cursor
tombstone. The spec's event types do not include status pages: nothing here writes an
event. ``slug`` is unique over the service (constraint ``status_pages_slug_key``,
:data:`SLUG_CONSTRAINT`): a create or rename that runs into it raises
``IntegrityConflict`` whose ``constraint`` names it, also when two requests race.

**The public read** (:func:`public_page`) takes a slug and answers from five queries on
one connection, never reading raw checks (DESIGN: "a page never reads raw checks"):

1. the page;
2. its components' monitors that still exist in the account: current status and since
   when (``status_since``, or ``created``: for a ``down`` one, its first failed check),
   their interval and last check (the newest ``last_check`` of their rollups);
3. their hourly rollups of the last :data:`DAYS` UTC days summed per day: up and down
   seconds of closed status periods (``store.rollups``);
4. incidents of the account whose ``monitors`` overlap the page's monitors (GIN index
   ``incidents_by_monitors``): the open ones and those resolved in the last
   :data:`RESOLVED_WINDOW_SECONDS`, at most :data:`MAX_INCIDENTS` of each, with the
   current name of the monitor that opened each (for the web layer to scrub the texts
   the engine generated from it; never shown);
5. their timelines (``incident_updates``), oldest first.

The open status period (``status_since`` to now) is not in the rollups yet: it is added
here, split by UTC day, as :mod:`store.history` does, and as far as it counts: a
monitor without a check for more than two intervals counts only until one interval after
its last check (:func:`store.rollups.counted_until`), so the bars, the rollups and the
availability endpoint agree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .database import Connection
from .events import EventCause
from .owned import delete_owned, insert_owned, select_owned, update_owned
from .pagination import Page, PageRequest, fetch_page
from .records import IncidentRecord, IncidentUpdateRecord, StatusPageRecord, column_names
from .rollups import counted_until, last_check_sql

__all__ = [
    "DAYS",
    "DAY_SECONDS",
    "MAX_INCIDENTS",
    "RESOLVED_WINDOW_SECONDS",
    "SLUG_CONSTRAINT",
    "UPDATABLE",
    "PublicMonitor",
    "PublicPage",
    "delete_status_page",
    "get_status_page",
    "insert_status_page",
    "list_status_pages",
    "public_page",
    "update_status_page",
]

DAY_SECONDS = 86_400
DAYS = 90
"""Daily uptime figures per component: today (so far) and the 89 UTC days before it."""
RESOLVED_WINDOW_SECONDS = 14 * DAY_SECONDS
"""How far back a public page lists resolved incidents, seconds (14 days)."""
MAX_INCIDENTS = 50
"""At most this many open incidents (newest first) and as many recently resolved ones."""
SLUG_CONSTRAINT = "status_pages_slug_key"
"""The unique constraint on ``slug`` (migration 0005)."""

_COLUMNS = column_names(StatusPageRecord)
_SELECT = ", ".join(f"t.{c}" for c in _COLUMNS)
_INCIDENT_SELECT = ", ".join(f"t.{c}" for c in column_names(IncidentRecord))
_UPDATE_SELECT = ", ".join(f"t.{c}" for c in column_names(IncidentUpdateRecord))
UPDATABLE = frozenset({"name", "slug", "description", "components", "metadata"})
"""Columns :func:`update_status_page` may change."""


async def insert_status_page(connection: Connection, values: Mapping[str, Any]) -> StatusPageRecord:
    """Insert a status page (``values``: every column of the record).

    Raises:
        IntegrityConflict: the slug is taken (``constraint`` is :data:`SLUG_CONSTRAINT`).
    """
    row = await insert_owned(
        connection, table="status_pages", columns=_COLUMNS, select=_SELECT, values=values
    )
    return StatusPageRecord.from_row(row)


async def get_status_page(
    connection: Connection, account_id: str, page_id: str, *, for_update: bool = False
) -> StatusPageRecord | None:
    """The account's status page, or None. ``for_update`` locks it."""
    row = await select_owned(
        connection,
        table="status_pages",
        select=_SELECT,
        account_id=account_id,
        row_id=page_id,
        for_update=for_update,
    )
    return None if row is None else StatusPageRecord.from_row(row)


async def list_status_pages(
    connection: Connection, account_id: str, page: PageRequest
) -> Page[StatusPageRecord]:
    """One page of the account's status pages (``page.sort``: ``created``, ``updated``
    or ``name``).

    Raises:
        CursorNotFound: the cursor names no status page of the account.
    """
    rows, has_more = await fetch_page(
        connection,
        table="status_pages",
        select=_SELECT,
        account_id=account_id,
        filters=[],
        page=page,
    )
    return Page([StatusPageRecord.from_row(r) for r in rows], has_more)


async def update_status_page(
    connection: Connection,
    account_id: str,
    page_id: str,
    apply: Callable[[StatusPageRecord], dict[str, Any]],
    now: int,
) -> StatusPageRecord | None:
    """Lock the page, compute changes with ``apply(current)`` (a subset of
    :data:`UPDATABLE` holding only values that differ; it may raise to refuse) and write
    them; ``updated`` becomes ``now`` (epoch seconds) when something changed. Must run in
    a transaction. None when the account has no such page.

    Raises:
        IntegrityConflict: the new slug is taken (``constraint`` :data:`SLUG_CONSTRAINT`).
    """
    updated = await update_owned(
        connection,
        table="status_pages",
        get=get_status_page,
        account_id=account_id,
        row_id=page_id,
        apply=apply,
        updatable=UPDATABLE,
        now=now,
    )
    return updated.record


async def delete_status_page(
    connection: Connection,
    account_id: str,
    page_id: str,
    now: int,
    cause: EventCause | None = None,
) -> bool:
    """Delete the account's status page (no event: the spec's event types have none for
    status pages, so ``cause`` is unused). Must run in a transaction. False when the
    account has no such page."""
    return await delete_owned(
        connection, table="status_pages", account_id=account_id, row_id=page_id, now=now
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class PublicMonitor:
    """What a public page may know of a component's monitor: its status (``up``,
    ``down``, ``pending``, ``paused``) and since when (epoch seconds)."""

    status: str
    since: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PublicPage:
    """Everything a public page is rendered from (module docstring).

    Attributes:
        page: the status page.
        now: the time read at, epoch seconds.
        day_starts: the first second of each of the :data:`DAYS` UTC days, oldest first
            (the last is today, counted up to ``now``).
        monitors: component monitor id to :class:`PublicMonitor`, for those that still
            exist in the account.
        days: monitor id to ``(up_seconds, down_seconds)`` per day of ``day_starts``
            (closed periods from the rollups plus the open period).
        incidents: open incidents (newest first), then those resolved in the last 14 days
            (most recently resolved first).
        updates: incident id to its timeline, oldest first; the first entry is the one
            written on create, whose message is the incident's description.
        opener_names: monitor id to the current name of each monitor that opened one of
            ``incidents``. Private: only for scrubbing generated texts, never shown.
    """

    page: StatusPageRecord
    now: int
    day_starts: list[int]
    monitors: dict[str, PublicMonitor]
    days: dict[str, list[tuple[int, int]]]
    incidents: list[IncidentRecord]
    updates: dict[str, list[IncidentUpdateRecord]]
    opener_names: dict[str, str]


async def public_page(connection: Connection, slug: str, now: int) -> PublicPage | None:
    """Everything the public page of ``slug`` shows at ``now`` (epoch seconds), or None
    when no page has that slug (module docstring: five queries, no raw checks)."""
    row = await connection.fetchrow(f"SELECT {_SELECT} FROM status_pages t WHERE t.slug = $1", slug)
    if row is None:
        return None
    page = StatusPageRecord.from_row(row)
    wanted = list(dict.fromkeys(str(c["monitor"]) for c in page.components))
    today = now - now % DAY_SECONDS
    day_starts = [today - (DAYS - 1 - k) * DAY_SECONDS for k in range(DAYS)]
    first = day_starts[0]

    monitors: dict[str, PublicMonitor] = {}
    counted: dict[str, int] = {}  # where each open period stops counting (store.rollups)
    since_sql = "coalesce(status_since, created)"
    for m in await connection.fetch(
        f"SELECT id, status, {since_sql} AS since, interval_seconds, "
        f"{last_check_sql('id', since_sql)} AS last_check FROM monitors "
        "WHERE account_id = $1 AND id = ANY($2::text[])",
        page.account_id,
        wanted,
    ):
        monitor = PublicMonitor(status=m["status"], since=int(m["since"]))
        monitors[m["id"]] = monitor
        last = None if m["last_check"] is None else int(m["last_check"])
        counted[m["id"]] = counted_until(
            now, monitor.status, monitor.since, last, int(m["interval_seconds"])
        )
    ids = list(monitors)

    days = {m: [(0, 0)] * DAYS for m in ids}
    for r in await connection.fetch(
        "SELECT monitor_id, hour - hour % 86400 AS day, sum(up_seconds)::bigint AS up, "
        "sum(down_seconds)::bigint AS down FROM check_rollups "
        "WHERE monitor_id = ANY($1::text[]) AND hour >= $2 GROUP BY 1, 2",
        ids,
        first,
    ):
        k = (int(r["day"]) - first) // DAY_SECONDS
        if 0 <= k < DAYS:
            days[r["monitor_id"]][k] = (int(r["up"]), int(r["down"]))
    for monitor_id, monitor in monitors.items():
        if monitor.status in ("up", "down"):
            _add_open_period(days[monitor_id], monitor, first, counted[monitor_id])

    rows = await connection.fetch(
        f"(SELECT {_INCIDENT_SELECT}, m.name AS opener_name FROM incidents t "
        "LEFT JOIN monitors m ON m.id = t.monitor_id "
        "WHERE t.account_id = $1 AND t.monitors && $2::text[] AND t.resolved_at IS NULL "
        f"ORDER BY t.created DESC, t.seq DESC LIMIT {MAX_INCIDENTS}) UNION ALL "
        f"(SELECT {_INCIDENT_SELECT}, m.name AS opener_name FROM incidents t "
        "LEFT JOIN monitors m ON m.id = t.monitor_id "
        "WHERE t.account_id = $1 AND t.monitors && $2::text[] AND t.resolved_at >= $3 "
        f"ORDER BY t.resolved_at DESC, t.seq DESC LIMIT {MAX_INCIDENTS})",
        page.account_id,
        ids,
        now - RESOLVED_WINDOW_SECONDS,
    )
    incidents = [IncidentRecord.from_row(r) for r in rows]
    opener_names = {r["monitor_id"]: r["opener_name"] for r in rows if r["opener_name"]}
    updates: dict[str, list[IncidentUpdateRecord]] = {i.id: [] for i in incidents}
    if incidents:
        for r in await connection.fetch(
            f"SELECT {_UPDATE_SELECT} FROM incident_updates t "
            "WHERE t.incident_id = ANY($1::text[]) ORDER BY t.incident_id, t.seq",
            list(updates),
        ):
            updates[r["incident_id"]].append(IncidentUpdateRecord.from_row(r))
    return PublicPage(
        page=page,
        now=now,
        day_starts=day_starts,
        monitors=monitors,
        days=days,
        incidents=incidents,
        updates=updates,
        opener_names=opener_names,
    )


def _add_open_period(
    days: list[tuple[int, int]], monitor: PublicMonitor, first: int, end: int
) -> None:
    """Add the open period ``[since, end)`` of an ``up`` or ``down`` monitor to its days
    (``days[k]`` is the day starting ``first + k * DAY_SECONDS``), split at midnight UTC;
    ``end`` is where it stops counting (:func:`store.rollups.counted_until`)."""
    at = max(monitor.since, first)
    while at < end:
        k = (at - first) // DAY_SECONDS
        until = min(end, first + (k + 1) * DAY_SECONDS)
        up, down = days[k]
        if monitor.status == "up":
            days[k] = (up + until - at, down)
        else:
            days[k] = (up, down + until - at)
        at = until
