"""Maintenance windows (docs/maintenance.md; asyncio side: run them through
:class:`store.Database`): create, read, list, update, end, cancel, delete, the daily
extension of their occurrences. Which resources a window covers at an instant is
:mod:`store.coverage`'s.

CRUD follows the other account-owned tables (:mod:`store.owned`): keyset pages by
``created``, ``updated`` or ``title``, PATCH as lock-diff-write, delete with a cursor
tombstone. The monitors (``mon_``) and heartbeats (``hbt_``) a window covers are rows of
``maintenance_window_resources`` (migration 0019), in the order given; the record's
``monitors`` lists them.

**Occurrences are rows** (``maintenance_occurrences``): each write of a window's schedule
expands it (:mod:`store.recurrence`) from the write's instant to :data:`HORIZON_SECONDS`
ahead, in the same transaction; :func:`extend_horizons` (the daily job) keeps every
window's rows that far ahead. A window whose schedule has nothing left after its rows
gets ``materialized_until`` = :data:`COMPLETE` and is never claimed again. ``end`` cuts
the open rows; ``cancel`` deletes the later ones; a changed schedule replaces the rows
that end after the change (past rows stay).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import page_notices
from .database import Connection
from .errors import StoreError
from .events import EventCause
from .owned import Updated, delete_owned, insert_owned, select_owned, write_changes
from .pagination import Page, PageRequest, fetch_page
from .records import _FromRow, column_names
from .recurrence import Occurrence, Recurrence, Schedule, next_window, occurrences, status_at

__all__ = [
    "COMPLETE",
    "EFFECTS",
    "HORIZON_SECONDS",
    "SCHEDULE_FIELDS",
    "UPDATABLE",
    "NothingToCancel",
    "WindowNotInProgress",
    "WindowRecord",
    "cancel_window",
    "delete_window",
    "end_window",
    "extend_horizons",
    "get_window",
    "insert_window",
    "list_windows",
    "missing_resources",
    "update_window",
]

HORIZON_SECONDS = 35 * 86_400
"""How far ahead occurrences are rows (35 days, seconds)."""
COMPLETE = 2**62
"""``materialized_until`` of a window whose every occurrence is a row already."""
EFFECTS = frozenset({"suppress_alerts", "exclude_from_availability", "pause_checks"})
"""The boolean effects a window has (docs/maintenance.md)."""
SCHEDULE_FIELDS = frozenset({"starts_at", "ends_at", "recurrence"})
"""Columns whose change rewrites a window's future occurrences."""
UPDATABLE = frozenset({"title", "description", "monitors", "metadata", *EFFECTS, *SCHEDULE_FIELDS})
"""What :func:`update_window` may change (``monitors``: the covered resources)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WindowRecord(_FromRow):
    """A maintenance window (docs/maintenance.md). ``starts_at``/``ends_at`` (one-off) or
    ``recurrence`` (``{"rrule", "time_zone", "start", "duration_seconds"}``); ``monitors``
    the ``mon_``/``hbt_`` ids it covers, in order; ``ended_at``, ``canceled_at``,
    ``created``, ``updated`` epoch seconds. ``status`` and ``next_window`` are computed
    at an instant (:meth:`status`, :meth:`next_window`)."""

    id: str
    account_id: str
    title: str
    description: str | None
    starts_at: int | None
    ends_at: int | None
    recurrence: dict[str, Any] | None
    suppress_alerts: bool
    exclude_from_availability: bool
    pause_checks: bool
    ended_at: int | None
    canceled_at: int | None
    created: int
    updated: int
    metadata: dict[str, str]
    monitors: list[str] = field(default_factory=list)
    materialized_until: int = field(default=0, metadata={"internal": True})

    def schedule(self) -> Schedule:
        """Its schedule, for :mod:`store.recurrence`."""
        return _schedule(self)

    def status(self, at: int) -> str:
        """``scheduled``, ``in_progress``, ``completed`` or ``canceled`` at ``at``
        (epoch seconds)."""
        return status_at(self.schedule(), at)

    def next_window(self, at: int) -> Occurrence | None:
        """The occurrence open at ``at`` (epoch seconds), or the next one, or None."""
        return next_window(self.schedule(), at)


def _schedule(values: Any) -> Schedule:
    get = values.get if isinstance(values, Mapping) else lambda k: getattr(values, k)
    recurrence = get("recurrence")
    return Schedule(
        starts_at=get("starts_at"),
        ends_at=get("ends_at"),
        recurrence=None if recurrence is None else Recurrence.from_json(recurrence),
        ended_at=get("ended_at"),
        canceled_at=get("canceled_at"),
    )


_COLUMNS = [c for c in column_names(WindowRecord) if c != "monitors"]
_SELECT = ", ".join(f"t.{c}" for c in _COLUMNS) + (
    ", ARRAY(SELECT r.resource_id FROM maintenance_window_resources r "
    "WHERE r.window_id = t.id ORDER BY r.position) AS monitors"
)


class WindowNotInProgress(StoreError):
    """``end`` on a window with no occurrence open now."""


class NothingToCancel(StoreError):
    """``cancel`` on a window already canceled, or with no occurrence starting later."""


async def _set_resources(connection: Connection, window_id: str, ids: Sequence[str]) -> None:
    await connection.execute(
        "DELETE FROM maintenance_window_resources WHERE window_id = $1", window_id
    )
    # an id given twice counts once, where it first stands
    await connection.execute(
        "INSERT INTO maintenance_window_resources (window_id, resource_id, position) "
        "SELECT DISTINCT ON (r) $1, r, p FROM unnest($2::text[]) WITH ORDINALITY AS u(r, p) "
        "ORDER BY r, p",
        window_id,
        list(ids),
    )


async def _materialize(
    connection: Connection, window_id: str, schedule: Schedule, lo: int, hi: int
) -> None:
    """Write the occurrences that start in ``[lo, hi)`` (and, when ``lo`` is the write's
    instant, the one open at it) and move ``materialized_until`` to ``hi``, or to
    :data:`COMPLETE` when nothing is left after ``hi``."""
    rows = occurrences(schedule, lo, hi)
    await connection.execute(
        "INSERT INTO maintenance_occurrences (window_id, starts_at, ends_at) "
        "SELECT $1, s, e FROM unnest($2::bigint[], $3::bigint[]) AS u(s, e) "
        "ON CONFLICT (window_id, starts_at) DO NOTHING",
        window_id,
        [o.starts_at for o in rows],
        [o.ends_at for o in rows],
    )
    until = COMPLETE if next_window(schedule, hi) is None else hi
    await connection.execute(
        "UPDATE maintenance_windows SET materialized_until = $2 WHERE id = $1", window_id, until
    )


async def insert_window(
    connection: Connection, values: Mapping[str, Any], *, now: int
) -> WindowRecord:
    """Insert a window (``values``: every field of :class:`WindowRecord` but
    ``materialized_until``; ``recurrence`` as :meth:`store.recurrence.Recurrence.as_json`
    gives it, already checked) with its resources, and write its occurrences from
    ``now`` to :data:`HORIZON_SECONDS` ahead (epoch seconds). Must run in a
    transaction."""
    row = dict(values, materialized_until=now)
    await insert_owned(
        connection, table="maintenance_windows", columns=_COLUMNS, select="t.id", values=row
    )
    await _set_resources(connection, row["id"], row["monitors"])
    await _materialize(connection, row["id"], _schedule(row), now, now + HORIZON_SECONDS)
    record = await get_window(connection, row["account_id"], row["id"])
    assert record is not None
    first = await connection.fetchrow(
        "SELECT starts_at, ends_at FROM maintenance_occurrences WHERE window_id = $1 "
        "AND starts_at > $2 ORDER BY starts_at LIMIT 1",
        record.id,
        now,
    )
    if first is not None:  # subscribers hear of the next occurrence (docs/status-pages.md)
        starts_at, ends_at = int(first["starts_at"]), int(first["ends_at"])
        await page_notices.maintenance_notice(
            connection, record, "scheduled", starts_at, ends_at, now
        )
    return record


async def get_window(
    connection: Connection, account_id: str, window_id: str, *, for_update: bool = False
) -> WindowRecord | None:
    """The account's window, or None. ``for_update`` locks it."""
    row = await select_owned(
        connection,
        table="maintenance_windows",
        select=_SELECT,
        account_id=account_id,
        row_id=window_id,
        for_update=for_update,
    )
    return None if row is None else WindowRecord.from_row(row)


async def list_windows(
    connection: Connection, account_id: str, page: PageRequest, *, monitor: str | None = None
) -> Page[WindowRecord]:
    """One page of the account's windows (``page.sort``: ``created``, ``updated`` or
    ``title``), only those covering ``monitor`` (a ``mon_`` or ``hbt_`` id) when given.

    Raises:
        CursorNotFound: the cursor names no window of the account.
    """
    filters: list[tuple[str, object]] = []
    if monitor is not None:
        filters.append(
            (
                "t.id IN (SELECT window_id FROM maintenance_window_resources "
                "WHERE resource_id = {})",
                monitor,
            )
        )
    rows, has_more = await fetch_page(
        connection,
        table="maintenance_windows",
        select=_SELECT,
        account_id=account_id,
        filters=filters,
        page=page,
    )
    return Page([WindowRecord.from_row(r) for r in rows], has_more)


async def update_window(
    connection: Connection,
    account_id: str,
    window_id: str,
    apply: Callable[[WindowRecord], dict[str, Any]],
    now: int,
) -> Updated[WindowRecord]:
    """Lock the window, compute changes with ``apply(current)`` (a subset of
    :data:`UPDATABLE`, only values that differ; it may raise to refuse) and write them,
    ``updated`` = ``now`` (epoch seconds) when something changed. A change of
    :data:`SCHEDULE_FIELDS` replaces the occurrences that end after ``now`` with the
    new schedule's (``end`` and ``cancel`` still apply: a canceled window stays
    canceled). Must run in a transaction. The record is None when the account has no
    such window; ``previous`` holds the old values of what changed."""
    current = await get_window(connection, account_id, window_id, for_update=True)
    if current is None:
        return Updated(None, {})
    changes = apply(current)
    if not changes:
        return Updated(current, {})
    columns = {k: v for k, v in changes.items() if k != "monitors"}
    if "monitors" in changes:
        await _set_resources(connection, window_id, changes["monitors"])
    if columns:
        await write_changes(
            connection,
            table="maintenance_windows",
            account_id=account_id,
            row_id=window_id,
            changes=columns,
            updatable=UPDATABLE,
            now=now,
        )
    else:
        await connection.execute(
            "UPDATE maintenance_windows SET updated = $2 WHERE id = $1", window_id, now
        )
    if SCHEDULE_FIELDS & set(changes):
        await _reschedule(connection, account_id, window_id, now)
    record = await get_window(connection, account_id, window_id)
    return Updated(record, {n: getattr(current, n) for n in changes})


async def _reschedule(connection: Connection, account_id: str, window_id: str, now: int) -> None:
    """Replace the window's occurrences that end after ``now`` (epoch seconds) with its new
    schedule's. An occurrence open at ``now`` whose start was already acted on
    (``store.window_walk``) stays started: the new schedule's open one takes its place
    (no second ``maintenance.started``), or, with none open, it is cut to end at ``now``,
    so the walk ends it (``maintenance.ended``, what it held back released)."""
    started = await connection.fetchval(
        "SELECT starts_at FROM maintenance_occurrences WHERE window_id = $1 "
        "AND starts_at < $2 AND ends_at > $2 AND start_handled",
        window_id,
        now,
    )
    await connection.execute(
        "DELETE FROM maintenance_occurrences WHERE window_id = $1 AND ends_at > $2",
        window_id,
        now,
    )
    after = await get_window(connection, account_id, window_id)
    assert after is not None
    await _materialize(connection, window_id, after.schedule(), now, now + HORIZON_SECONDS)
    if started is None:
        return
    replaced = await connection.execute(
        "UPDATE maintenance_occurrences SET start_handled = true "
        "WHERE window_id = $1 AND starts_at <= $2 AND ends_at > $2",
        window_id,
        now,
    )
    if replaced == "UPDATE 0":
        await connection.execute(
            "INSERT INTO maintenance_occurrences (window_id, starts_at, ends_at, start_handled) "
            "VALUES ($1, $2, $3, true) ON CONFLICT (window_id, starts_at) DO NOTHING",
            window_id,
            started,
            now,
        )


async def end_window(
    connection: Connection, account_id: str, window_id: str, now: int
) -> WindowRecord | None:
    """End the occurrence open at ``now`` (epoch seconds) there: ``ended_at`` = ``now``
    and the open rows cut to end at ``now``. Must run in a transaction. None when the
    account has no such window.

    Raises:
        WindowNotInProgress: no occurrence is open at ``now``.
    """
    current = await get_window(connection, account_id, window_id, for_update=True)
    if current is None:
        return None
    if current.status(now) != "in_progress":
        raise WindowNotInProgress(f"maintenance window {window_id} is not in progress")
    await connection.execute(
        "DELETE FROM maintenance_occurrences WHERE window_id = $1 AND starts_at = $2",
        window_id,
        now,
    )
    await connection.execute(
        "UPDATE maintenance_occurrences SET ends_at = $2 "
        "WHERE window_id = $1 AND starts_at < $2 AND ends_at > $2",
        window_id,
        now,
    )
    await connection.execute(
        "UPDATE maintenance_windows SET ended_at = $2, updated = $2 WHERE id = $1",
        window_id,
        now,
    )
    return await get_window(connection, account_id, window_id)


async def cancel_window(
    connection: Connection, account_id: str, window_id: str, now: int
) -> WindowRecord | None:
    """Cancel every occurrence that starts after ``now`` (epoch seconds): ``canceled_at``
    = ``now``, their rows deleted; one open at ``now`` runs on. Must run in a
    transaction. None when the account has no such window.

    Raises:
        NothingToCancel: it is canceled already, or nothing starts after ``now``.
    """
    current = await get_window(connection, account_id, window_id, for_update=True)
    if current is None:
        return None
    upcoming = current.next_window(now)
    if current.canceled_at is not None or upcoming is None:
        raise NothingToCancel(f"maintenance window {window_id} has nothing left to cancel")
    if upcoming.starts_at <= now and next_window(current.schedule(), upcoming.ends_at) is None:
        raise NothingToCancel(f"maintenance window {window_id} has no later occurrence")
    await connection.execute(
        "DELETE FROM maintenance_occurrences WHERE window_id = $1 AND starts_at > $2",
        window_id,
        now,
    )
    await connection.execute(
        "UPDATE maintenance_windows SET canceled_at = $2, updated = $2, "
        "materialized_until = $3 WHERE id = $1",
        window_id,
        now,
        COMPLETE,
    )
    return await get_window(connection, account_id, window_id)


async def delete_window(
    connection: Connection,
    account_id: str,
    window_id: str,
    now: int,
    cause: EventCause | None = None,
) -> bool:
    """Delete the account's window with its resources and occurrences (``cause`` is
    unused here: the caller writes the event). Must run in a transaction. False when the
    account has no such window."""
    return await delete_owned(
        connection, table="maintenance_windows", account_id=account_id, row_id=window_id, now=now
    )


async def missing_resources(
    connection: Connection, account_id: str, ids: Sequence[str]
) -> list[str]:
    """The ids of ``ids`` that are neither a monitor nor a heartbeat of the account, in
    their order."""
    rows = await connection.fetch(
        "SELECT id FROM monitors WHERE account_id = $1 AND id = ANY($2::text[]) "
        "UNION ALL SELECT id FROM heartbeats WHERE account_id = $1 AND id = ANY($2::text[])",
        account_id,
        list(ids),
    )
    own = {r["id"] for r in rows}
    return [i for i in ids if i not in own]


async def extend_horizons(connection: Connection, now: int, *, limit: int = 500) -> int:
    """Write the occurrences of up to ``limit`` windows whose rows end less than
    :data:`HORIZON_SECONDS` after ``now`` (epoch seconds), up to that horizon: the daily
    job's step, repeated until it returns 0. Windows claimed by another transaction are
    skipped (``FOR UPDATE SKIP LOCKED``), so nodes can run it together. Must run in a
    transaction. Returns how many windows it extended."""
    hi = now + HORIZON_SECONDS
    rows = await connection.fetch(
        f"SELECT {_SELECT} FROM maintenance_windows t "
        "WHERE t.canceled_at IS NULL AND t.materialized_until < $1 "
        "ORDER BY t.materialized_until LIMIT $2 FOR UPDATE SKIP LOCKED",
        hi,
        limit,
    )
    for row in rows:
        record = WindowRecord.from_row(row)
        lo = max(record.materialized_until, now)
        schedule = record.schedule()
        await _materialize(connection, record.id, schedule, lo, hi)
    return len(rows)
