"""Monitor queries (asyncio side; run them through :class:`store.Database`).

Every function taking ``account_id`` scopes to that account: another account's monitor is
indistinguishable from a missing one (docs/api.md, Conventions: another account's resource
is a 404).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import accounts, dependencies, quorum
from .coverage import NOW_SQL, in_maintenance_sql, paused_until_sql
from .database import Connection
from .evented import EventedTable
from .events import EventCause
from .pagination import Page, PageRequest, fetch_first_page_with_token, fetch_page
from .records import MonitorRecord, TokenContext
from .rollups import CLOSE_PERIODS, known_end_sql, last_check_sql

_COLUMNS = (
    "id",
    "account_id",
    "name",
    "url",
    "type",
    "status",
    "interval_seconds",
    "timeout_seconds",
    "method",
    "expected_status_code",
    "failure_threshold",
    "success_threshold",
    "run_epoch",
    "created",
    "updated",
    "metadata",
    "auto_incidents",
    "incident_severity",
    "request_headers",
    "request_body",
    "assertions",
    "tls_expiry_days",
    "tls_verify",
    "tls_ca_bundle",
    "escalation_policy",
    "depends_on",
    "suppressed_by",
    "regions",
    "region_quorum",
    "badge_key",
)
_NOT_RUN_BY = (
    "status",
    "updated",
    "escalation_policy",
    "depends_on",
    "suppressed_by",
    "badge_key",
)
_SETTINGS_DIGEST = (
    "hashtextextended(row("
    + ", ".join(f"t.{c}" for c in _COLUMNS if c not in _NOT_RUN_BY)
    + f", {paused_until_sql('t.id')})::text, 0)"
)
"""A 64-bit hash of what an actor runs by (every column but the ones the store moves on
its own, status, ``updated`` and ``suppressed_by``, the alerting's columns,
``escalation_policy`` and ``depends_on``, and ``badge_key``; and until when a maintenance
window pauses its checks, so a reconciliation catches a pause whose notification was
lost); ``MonitorRecord.settings_digest``."""


def _select(region: str | None = None) -> str:
    """The select list of a monitor record over ``t``; ``last_checked_at`` its newest
    check, of region ``region`` (a parameter, text) on a monitor with ``regions`` when
    given: a node catches up on its own region's grid points, not on another region's
    (``engine.monitor``; docs/several-nodes.md, Regions)."""
    of_region = (
        ""
        if region is None
        else f" AND (t.regions IS NULL OR {region}::text IS NULL OR c.region = {region}::text)"
    )
    return (
        ", ".join(f"t.{c}" for c in _COLUMNS)
        + f", (SELECT c.created FROM checks c WHERE c.monitor_id = t.id{of_region}"
        " ORDER BY c.created DESC LIMIT 1) AS last_checked_at"
        + f", {_SETTINGS_DIGEST} AS settings_digest"
        + f", {in_maintenance_sql('t.id')} AS in_maintenance"
        + f", {paused_until_sql('t.id')} AS maintenance_paused_until"
        + f", {quorum.region_status_sql('t', NOW_SQL)} AS region_status"
    )


_SELECT = _select()
UPDATABLE = frozenset(
    {
        "name",
        "url",
        "interval_seconds",
        "timeout_seconds",
        "method",
        "expected_status_code",
        "failure_threshold",
        "success_threshold",
        "metadata",
        "auto_incidents",
        "incident_severity",
        "request_headers",
        "request_body",
        "assertions",
        "tls_expiry_days",
        "tls_verify",
        "tls_ca_bundle",
        "escalation_policy",
        "depends_on",
        "regions",
        "region_quorum",
    }
)
"""Columns :func:`update_monitor` may change."""


async def insert_monitor(
    connection: Connection, values: Mapping[str, Any], cause: EventCause | None = None
) -> MonitorRecord:
    """Insert a monitor and its ``monitor.created`` event (docs/incidents.md, Events; run inside
    a transaction); ``values`` holds every column of the table but ``seq`` and
    ``run_epoch`` (``depends_on`` and ``suppressed_by`` may be left out). Returns the
    stored record.

    Raises:
        store.dependencies.UnknownDependency: ``depends_on`` names no monitor of the
            account (checked under the account's graph lock: :mod:`store.dependencies`).
    """
    if values.get("regions") is not None:
        await quorum.sync_views(connection, values["id"], values["regions"], values["created"])
    record = await _MONITORS.insert(connection, values, cause)
    if record.depends_on:
        await dependencies.check_dependencies(
            connection, record.account_id, record.id, record.depends_on
        )
    return record


async def get_monitor(
    connection: Connection, account_id: str | None, monitor_id: str, *, for_update: bool = False
) -> MonitorRecord | None:
    """The monitor ``monitor_id`` of ``account_id`` (any account when None), or None.
    ``for_update`` locks the row until the transaction ends."""
    lock = " FOR UPDATE OF t" if for_update else ""
    if account_id is None:
        row = await connection.fetchrow(
            f"SELECT {_SELECT} FROM monitors t WHERE t.id = $1{lock}", monitor_id
        )
    else:
        row = await connection.fetchrow(
            f"SELECT {_SELECT} FROM monitors t WHERE t.id = $1 AND t.account_id = $2{lock}",
            monitor_id,
            account_id,
        )
    return None if row is None else MonitorRecord.from_row(row)


async def get_monitor_with_token(
    connection: Connection, token_id: str, monitor_id: str
) -> tuple[TokenContext | None, MonitorRecord | None]:
    """The token ``token_id`` (:func:`store.accounts.token_context`) and the monitor
    ``monitor_id`` of its account (:func:`get_monitor`), in one statement: (None, None)
    for an unknown token. The monitor is read whatever the token's state: the caller
    hands it to no one before the token passed (``web.http.middleware.authenticate``)."""
    row = await connection.fetchrow(
        accounts.with_token_sql(
            f"SELECT {_SELECT} FROM monitors t WHERE t.id = $2 AND t.account_id = tk.account_id"
        ),
        token_id,
        monitor_id,
    )
    if row is None:
        return None, None
    monitor = None if row["id"] is None else MonitorRecord.from_row(row)
    return accounts.token_of_row(row), monitor


async def list_monitors(
    connection: Connection,
    account_id: str,
    page: PageRequest,
    *,
    status: str | None = None,
    type: str | None = None,
    search: str | None = None,
) -> Page[MonitorRecord]:
    """One page of the account's monitors, filtered by exact ``status`` and ``type`` and a
    case-insensitive substring ``search`` on the name (``%`` and ``_`` match literally).

    Raises:
        CursorNotFound: the page's cursor names no monitor of the account.
    """
    rows, has_more = await fetch_page(
        connection,
        table="monitors",
        select=_SELECT,
        account_id=account_id,
        filters=_list_filters(status, type, search),
        page=page,
    )
    return Page([MonitorRecord.from_row(r) for r in rows], has_more)


async def list_monitors_with_token(
    connection: Connection,
    token_id: str,
    page: PageRequest,
    *,
    status: str | None = None,
    type: str | None = None,
    search: str | None = None,
) -> tuple[TokenContext | None, Page[MonitorRecord] | None]:
    """The token ``token_id`` (:func:`store.accounts.token_context`) and the first page
    of its account's monitors (:func:`list_monitors`), in one statement; (None, None) for
    an unknown token. The page is read whatever the token's state: the caller hands it
    to no one before the token passed (``web.http.middleware.authenticate``).

    Raises:
        ValueError: ``page`` has a cursor (:func:`store.pagination.fetch_first_page_with_token`).
    """
    first, rows, has_more = await fetch_first_page_with_token(
        connection,
        accounts.with_token_sql,
        token_id,
        table="monitors",
        select=_SELECT,
        filters=_list_filters(status, type, search),
        page=page,
    )
    if first is None:
        return None, None
    monitors = [MonitorRecord.from_row(r) for r in rows]
    return accounts.token_of_row(first), Page(monitors, has_more)


def _list_filters(
    status: str | None, type: str | None, search: str | None
) -> list[tuple[str, object]]:
    """The conditions of :func:`list_monitors` (:func:`store.pagination.fetch_page`)."""
    filters: list[tuple[str, object]] = []
    if status is not None:
        filters.append(("t.status = {}", status))
    if type is not None:
        filters.append(("t.type = {}", type))
    if search is not None:
        escaped = search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        filters.append(("t.name ILIKE {}", f"%{escaped}%"))
    return filters


async def update_monitor(
    connection: Connection,
    account_id: str,
    monitor_id: str,
    apply: Callable[[MonitorRecord], dict[str, Any]],
    now: int,
    cause: EventCause | None = None,
) -> MonitorRecord | None:
    """Lock the monitor, compute its changes with ``apply(current)`` (columns of
    :data:`UPDATABLE`) and write them, as `store.owned.update_owned` says, with a
    ``monitor.updated`` event when something changed. Must run inside a transaction.
    None when the monitor does not exist for the account.

    Raises:
        store.dependencies.UnknownDependency, store.dependencies.DependencyCycle: a
            changed ``depends_on`` names no monitor of the account, or closes a cycle
            (checked after the write under the account's graph lock:
            :mod:`store.dependencies`).
    """
    moved_edges = False

    def tracked(current: MonitorRecord) -> dict[str, Any]:
        nonlocal moved_edges
        changes = apply(current)
        moved_edges = "depends_on" in changes
        if "regions" in changes:  # the region views follow (store.quorum.sync_views)
            regions_moved.append(changes["regions"])
        return changes

    regions_moved: list[list[str] | None] = []
    record = await _MONITORS.update(connection, account_id, monitor_id, tracked, now, cause)
    if record is not None and regions_moved:
        await quorum.sync_views(connection, monitor_id, regions_moved[-1], now)
        record = await get_monitor(connection, account_id, monitor_id)
    if record is not None and moved_edges:
        await dependencies.check_dependencies(connection, account_id, monitor_id, record.depends_on)
    return record


async def pause_monitor(
    connection: Connection,
    account_id: str,
    monitor_id: str,
    now: int,
    cause: EventCause | None = None,
) -> tuple[MonitorRecord | None, bool]:
    """Pause a monitor: status ``paused``, a new run epoch (docs/checks.md, Up and down), and a
    ``monitor.paused`` event. Its open incident is left as it is (docs/incidents.md).

    Returns ``(record, changed)``: ``changed`` is False when it was already paused, and then
    nothing was written (docs/api.md, Conventions: pause on paused is a no-op, ``updated``
    unchanged). The record is None when the monitor does not exist for the account.
    """
    return await _move(connection, account_id, monitor_id, now, cause, to="paused", only_from=None)


async def resume_monitor(
    connection: Connection,
    account_id: str,
    monitor_id: str,
    now: int,
    cause: EventCause | None = None,
) -> tuple[MonitorRecord | None, bool]:
    """Resume a paused monitor: status ``pending`` (docs/api.md, Conventions), a new run
    epoch, and a ``monitor.resumed`` event.

    Returns ``(record, changed)``; resuming a monitor that is not paused changes nothing.
    """
    return await _move(
        connection, account_id, monitor_id, now, cause, to="pending", only_from="paused"
    )


async def _move(
    connection: Connection,
    account_id: str,
    monitor_id: str,
    now: int,
    cause: EventCause | None,
    *,
    to: str,
    only_from: str | None,
) -> tuple[MonitorRecord | None, bool]:
    condition = "status <> 'paused'" if only_from is None else f"status = '{only_from}'"
    # The move closes the period it ends into the rollups and is logged, in this
    # transaction (docs/history.md; store.rollups): an up or down period left without
    # checks for more than two intervals only until one interval after its last check,
    # the rest logged as unknown.
    since_sql = "coalesce(status_since, created)"
    old_status = await connection.fetchval(
        f"WITH m AS (SELECT id, status, {since_sql} AS since, "
        f"greatest({since_sql}, {last_check_sql('id', since_sql)}) AS before, "
        "interval_seconds AS iv "
        f"FROM monitors WHERE id = $1 AND account_id = $2 AND {condition} FOR UPDATE), "
        "moved AS (UPDATE monitors t SET status = $3, updated = $4, "
        "run_epoch = run_epoch + 1, status_since = $4 FROM m WHERE t.id = m.id "
        "RETURNING t.id), "
        "periods AS (SELECT id AS monitor_id, status, since AS started, "
        f"{known_end_sql('status', 'before', '$4::bigint', 'iv')} AS ended FROM m), "
        f"{CLOSE_PERIODS}, "
        "logged AS (INSERT INTO status_changes (monitor_id, check_id, from_status, "
        "to_status, created) SELECT m.id, NULL, m.status, 'unknown', p.ended "
        "FROM m JOIN periods p ON p.monitor_id = m.id WHERE p.ended < $4 "
        "UNION ALL SELECT id, NULL, status, $3, $4 FROM m ORDER BY 5) "
        "SELECT m.status FROM m JOIN moved ON moved.id = m.id",
        monitor_id,
        account_id,
        to,
        now,
    )
    if old_status is not None:
        await quorum.restart_views(connection, monitor_id, to, now)
    return await _MONITORS.moved(connection, account_id, monitor_id, old_status, now, cause)


async def delete_monitor(
    connection: Connection,
    account_id: str,
    monitor_id: str,
    now: int,
    cause: EventCause | None = None,
) -> bool:
    """Delete a monitor for good, with its checks and status history (docs/api.md: permanent
    deletion), and write ``monitor.deleted`` (its last state). Incidents it opened or
    affects are left as they are (docs/incidents.md). The monitors that depend on it
    lose it from their ``depends_on``, each with a ``monitor.updated`` event, under the
    account's graph lock (:mod:`store.dependencies`). Must run inside a transaction.
    False when it does not exist."""
    if not await _MONITORS.delete(connection, account_id, monitor_id, now, cause):
        return False
    for dependent in await dependencies.dependents(connection, account_id, monitor_id):
        await _MONITORS.update(
            connection,
            account_id,
            dependent,
            lambda current: {"depends_on": [p for p in current.depends_on if p != monitor_id]},
            now,
            cause,
        )
    return True


_SLOT = "CASE WHEN t.regions IS NULL THEN t.bucket ELSE t.bucket + 256 END"
"""A monitor's lease slot for a node whose region it lists, or without ``regions``
(``store.leases.slot_of``)."""


def _mine(slots: str, region: str) -> str:
    """In SQL: a monitor a node of region ``region`` (a parameter, text) runs under its
    lease slots ``slots`` (a parameter, smallint[]); without a region (NULL), every monitor
    of buckets ``slots``."""
    return (
        f"({region}::text IS NULL AND t.bucket = ANY({slots}::smallint[]) OR {region}::text "
        f"IS NOT NULL AND (t.regions IS NULL OR {region}::text = ANY(t.regions)) "
        f"AND {_SLOT} = ANY({slots}::smallint[]))"
    )


async def load_active_monitors(
    connection: Connection,
    buckets: Sequence[int] | None = None,
    ids: Sequence[str] | None = None,
    region: str | None = None,
) -> list[MonitorRecord]:
    """Every monitor this node runs: all that are not paused, under lease slots
    ``buckets`` of a node of ``region`` (``store.leases.slot_of``: a monitor without
    ``regions`` under its bucket, one listing ``region`` under 256 plus its bucket; None:
    every monitor), and among ``ids`` when given (the monitors a notification named:
    ``store.notify``). Without ``region``, ``buckets`` are plain bucket numbers
    (``store.leases.bucket_of``) and ``regions`` is not looked at.

    The one query by which the engine learns its work (docs/several-nodes.md: only the
    buckets it holds a lease on, in the any-region pool and its region's); a regional
    monitor's ``last_checked_at`` is of ``region``'s checks.
    """
    rows = await connection.fetch(
        f"SELECT {_select('$3')} FROM monitors t WHERE t.status <> 'paused' "
        f"AND ($1::smallint[] IS NULL OR {_mine('$1', '$3')}) "
        "AND ($2::text[] IS NULL OR t.id = ANY($2::text[])) ORDER BY t.seq",
        None if buckets is None else list(buckets),
        None if ids is None else list(ids),
        region,
    )
    return [MonitorRecord.from_row(r) for r in rows]


async def settings_digests(
    connection: Connection, buckets: Sequence[int], region: str | None = None
) -> dict[int, tuple[int, int]]:
    """Per lease slot of ``buckets`` (as :func:`load_active_monitors` takes them, for a
    node of ``region``) that has any: the number of active (not paused) monitors and the
    sum of their ``settings_digest`` (a Python int; Postgres sums as numeric, so nothing
    overflows). One aggregate query, 512 rows at most, whatever the number of monitors:
    the engine's reconciliation compares it with the same sums over the actors it runs
    and reads again only the slots that differ (docs/several-nodes.md)."""
    rows = await connection.fetch(
        f"SELECT CASE WHEN $2::text IS NULL THEN t.bucket ELSE {_SLOT} END AS slot, "
        f"count(*) AS n, sum({_SETTINGS_DIGEST}) AS digest FROM monitors t "
        f"WHERE t.status <> 'paused' AND {_mine('$1', '$2')} GROUP BY 1",
        list(buckets),
        region,
    )
    return {r["slot"]: (r["n"], int(r["digest"])) for r in rows}


_MONITORS: EventedTable[MonitorRecord] = EventedTable(
    kind="monitor",
    table="monitors",
    columns=_COLUMNS,
    select=_SELECT,
    get=get_monitor,
    from_row=MonitorRecord.from_row,
    updatable=UPDATABLE,
    owned_by=(
        ("checks", "monitor_id"),
        ("status_changes", "monitor_id"),
        ("check_rollups", "monitor_id"),
        ("daily_rollups", "monitor_id"),
        ("maintenance_window_resources", "resource_id"),
        ("monitor_regions", "monitor_id"),
        ("region_moves", "monitor_id"),
        ("region_rollups", "monitor_id"),
    ),
)
"""Monitors' changes and their ``monitor.*`` events (:mod:`store.evented`)."""
