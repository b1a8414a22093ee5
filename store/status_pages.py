"""Status pages (docs/status-pages.md; asyncio side: run them through
:class:`store.Database`): the account's CRUD, and the one read of everything a public
page shows.

**CRUD** follows the other account-owned tables (:mod:`store.owned`): keyset pages by
``created``, ``updated`` or ``name``, PATCH as lock-diff-write, delete with a cursor
tombstone. Status pages have no events (docs/status-pages.md, API; docs/incidents.md,
Events): nothing here writes an event. ``slug`` is unique over the service (constraint
``status_pages_slug_key``, :data:`SLUG_CONSTRAINT`): a create or rename that runs into it
raises ``IntegrityConflict`` whose ``constraint`` names it, also when two requests race.

**The public read** (:func:`public_page`) takes a slug and answers from six queries on
one connection, never reading raw checks (docs/status-pages.md, Built for the stampede):

1. the page;
2. its components' monitors that still exist in the account: current status and since
   when (``status_since``, or ``created``: for a ``down`` one, its first failed check),
   their interval and last check (the newest ``last_check`` of their rollups);
3. their daily seconds of the last :data:`DAYS` UTC days (``daily_rollups``: one row per
   monitor and day, kept in the statements that write the hourly rollups, today's
   included; ``store.rollups``, Daily seconds): up and down seconds of closed status
   periods, read as one row per monitor (its days and seconds packed in one ``bytea``:
   100 values for a 100-component page, not 9,000 rows to decode; 22.7 to some 13 ms for
   the whole read of the bench's page, bench/RESULTS.md, Status pages). They are the
   sums of the hourly rows, so the bars are those the hourly rows give
   (``tests/web/test_status_daily.py`` renders both);
4. incidents of the account whose ``monitors`` overlap the page's monitors (GIN index
   ``incidents_by_monitors``): the open ones and those resolved in the last
   :data:`RESOLVED_WINDOW_SECONDS`, at most :data:`MAX_INCIDENTS` of each;
5. the latest entries of their timelines (``incident_updates``, by the index on
   ``(incident_id, seq)``), bounded (docs/status-pages.md, Bounds): at most
   :data:`UPDATES_PER_INCIDENT` of each incident, and at most
   :data:`UPDATE_BYTES_PER_PAGE` bytes of messages in all, given out in the order the
   page shows them (open incidents newest first, then resolved ones, each incident's
   newest entries first) until spent; an entry that does not fit is left out whole, with
   every older one of its incident. Each incident's timeline length comes along, so the
   page can say how many it left out. Messages that are never public are not read: the
   first entry's (the incident's description) and those the engine wrote on a move of
   the incident's opener (``generated_by``, migration 0015: written from its private
   name); of an engine's recovery entry the time since the incident opened comes
   instead (``human_duration``, as the engine wrote it);
6. the maintenance of its monitors (:mod:`store.page_maintenance`, one statement): those
   an open occurrence of a window covers now, and the occurrences of the next 7 days
   (docs/status-pages.md, Maintenance).

The open status period (``status_since`` to now) is not in the rollups yet: it is added
here, split by UTC day, as :mod:`store.history` does, and as far as it counts: a
monitor without a check for more than two intervals counts only until one interval after
its last check (:func:`store.rollups.counted_until`), so the bars, the rollups and the
availability endpoint agree.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import page_maintenance
from .database import Connection
from .events import EventCause
from .owned import delete_owned, insert_owned, select_owned, update_owned
from .pagination import Page, PageRequest, fetch_page
from .records import IncidentRecord, StatusPageRecord, column_names
from .rollups import counted_until, last_check_sql

__all__ = [
    "DAYS",
    "DAY_SECONDS",
    "MAX_INCIDENTS",
    "RESOLVED_WINDOW_SECONDS",
    "SLUG_CONSTRAINT",
    "UPDATABLE",
    "UPDATES_PER_INCIDENT",
    "UPDATE_BYTES_PER_PAGE",
    "PublicMonitor",
    "PublicPage",
    "PublicUpdate",
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
UPDATES_PER_INCIDENT = 10
"""A public page shows at most this many of an incident's timeline entries: the latest."""
UPDATE_BYTES_PER_PAGE = 256 * 1024
"""A public page shows at most this many bytes (UTF-8) of timeline messages in all,
256 KiB (module docstring)."""
SLUG_CONSTRAINT = "status_pages_slug_key"
"""The unique constraint on ``slug`` (migration 0005)."""

_COLUMNS = column_names(StatusPageRecord)
_SELECT = ", ".join(f"t.{c}" for c in _COLUMNS)
_INCIDENT_SELECT = ", ".join(f"t.{c}" for c in column_names(IncidentRecord))
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
    """Delete the account's status page (no event: status pages have none,
    docs/status-pages.md, API; so ``cause`` is unused). Must run in a transaction. False
    when the account has no such page."""
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
class PublicUpdate:
    """One timeline entry a public page may show (module docstring, query 5).

    Attributes:
        status: the incident's status after it.
        created: epoch seconds.
        message: a person's message, or None: none was written, or it is never public
            (the first entry's, the engine's).
        generated: the engine wrote it on a move of the incident's opener.
        recovered_after: for an entry the engine wrote on the opener's recovery, the
            time from the incident's opening to it (``"5m 12s"``), else None.
    """

    status: str
    created: int
    message: str | None
    generated: bool
    recovered_after: str | None


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
        updates: incident id to the entries of its timeline the page shows (the latest,
            within the budgets), oldest first.
        timeline_lengths: incident id to the number of entries of its whole timeline.
        maintenance: which monitors are under maintenance now, and the occurrences of the
            next 7 days to list (:class:`store.page_maintenance.PageMaintenance`).
    """

    page: StatusPageRecord
    now: int
    day_starts: list[int]
    monitors: dict[str, PublicMonitor]
    days: dict[str, list[tuple[int, int]]]
    incidents: list[IncidentRecord]
    updates: dict[str, list[PublicUpdate]]
    timeline_lengths: dict[str, int]
    maintenance: page_maintenance.PageMaintenance


async def public_page(
    connection: Connection, slug: str, now: int, *, bars: bool = True
) -> PublicPage | None:
    """Everything the public page of ``slug`` shows at ``now`` (epoch seconds), or None
    when no page has that slug (module docstring: six queries, no raw checks). With
    ``bars`` False, query 3 is skipped and every day reads ``(0, 0)``: for what shows no
    daily figures (the page's feeds, docs/status-pages.md, Feeds)."""
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
    if bars:  # the daily figures
        for r in await connection.fetch(_DAILY_SECONDS, ids, first):
            pairs = days[r["monitor_id"]]
            for k, up, down in _CELL.iter_unpack(r["cells"]):
                if k < DAYS:
                    pairs[k] = (up, down)
        for monitor_id, monitor in monitors.items():
            if monitor.status in ("up", "down"):
                _add_open_period(days[monitor_id], monitor, first, counted[monitor_id])

    rows = await connection.fetch(
        f"(SELECT {_INCIDENT_SELECT} FROM incidents t "
        "WHERE t.account_id = $1 AND t.monitors && $2::text[] AND t.resolved_at IS NULL "
        f"ORDER BY t.created DESC, t.seq DESC LIMIT {MAX_INCIDENTS}) UNION ALL "
        f"(SELECT {_INCIDENT_SELECT} FROM incidents t "
        "WHERE t.account_id = $1 AND t.monitors && $2::text[] AND t.resolved_at >= $3 "
        f"ORDER BY t.resolved_at DESC, t.seq DESC LIMIT {MAX_INCIDENTS})",
        page.account_id,
        ids,
        now - RESOLVED_WINDOW_SECONDS,
    )
    incidents = [IncidentRecord.from_row(r) for r in rows]
    updates: dict[str, list[PublicUpdate]] = {i.id: [] for i in incidents}
    lengths = dict.fromkeys(updates, 0)
    if incidents:
        for r in await connection.fetch(
            _LATEST_UPDATES,
            [i.id for i in incidents],
            [i.created for i in incidents],
            UPDATES_PER_INCIDENT,
            UPDATE_BYTES_PER_PAGE,
        ):
            lengths[r["incident_id"]] = int(r["total"])
            if r["fits"]:
                updates[r["incident_id"]].append(
                    PublicUpdate(
                        status=r["status"],
                        created=int(r["created"]),
                        message=r["message"],
                        generated=r["generated"],
                        recovered_after=r["recovered_after"],
                    )
                )
    return PublicPage(
        page=page,
        now=now,
        day_starts=day_starts,
        monitors=monitors,
        days=days,
        incidents=incidents,
        updates=updates,
        timeline_lengths=lengths,
        maintenance=await page_maintenance.read(connection, page.account_id, ids, now),
    )


# Query 3 (module docstring): per monitor, its days since $2 (a day's first second) as
# one bytea of 12-byte cells, each the day's offset from $2 in days, its up and its down
# seconds (int4send: 32-bit big-endian integers; `_CELL`): a 100-component page's 9,000
# days come as 100 values that `struct` unpacks, where arrays of integers took asyncpg
# some 2 ms more to decode (bench/RESULTS.md, Status pages).
_DAILY_SECONDS = """
SELECT monitor_id, string_agg(int4send(((day - $2) / 86400)::integer) || int4send(up_seconds)
                              || int4send(down_seconds), ''::bytea) AS cells
FROM daily_rollups WHERE monitor_id = ANY($1::text[]) AND day >= $2
GROUP BY monitor_id
"""
_CELL = struct.Struct("!iii")

# Query 5 (module docstring). $1, $2: the incidents' ids and creation times in the order
# the page shows them; $3: entries per incident; $4: bytes of messages per page. `spent`
# is what the entries before this one (in that order) and this one cost; an entry that
# does not `fit` comes without its message, for its incident's timeline length.
_LATEST_UPDATES = """
WITH i AS (
    SELECT i.id, i.created, i.ord, f.first, f.total
    FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS i(id, created, ord)
    CROSS JOIN LATERAL (
        SELECT min(x.seq) AS first, count(*) AS total
        FROM incident_updates x WHERE x.incident_id = i.id) AS f),
e AS (
    SELECT i.id AS incident_id, i.ord, i.total, u.seq, u.status, u.created,
           u.generated_by IS NOT NULL AS generated,
           CASE WHEN u.generated_by IS NULL AND u.seq <> i.first THEN u.message END
               AS message,
           CASE WHEN u.generated_by IS NOT NULL AND u.status = 'resolved'
               THEN human_duration(u.created - i.created) END AS recovered_after
    FROM i CROSS JOIN LATERAL (
        SELECT x.seq, x.status, x.created, x.message, x.generated_by
        FROM incident_updates x WHERE x.incident_id = i.id
        ORDER BY x.seq DESC LIMIT $3) AS u)
SELECT incident_id, status, created, generated, recovered_after, total,
       CASE WHEN spent <= $4 THEN message END AS message, spent <= $4 AS fits
FROM (SELECT e.*, sum(coalesce(octet_length(e.message), 0))
          OVER (ORDER BY e.ord, e.seq DESC) AS spent
      FROM e) AS s
ORDER BY ord, seq
"""


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
