"""Regions and quorum: each region's view of a monitor, and the monitor's status decided
from them, in one place and in the batch's transaction (docs/regions.md).

A monitor with ``regions`` is probed by one node of each listed region. That node's
monitor actor runs the failure and recovery thresholds over its own region's checks; a
move of its status is a *region move* (``store.checks.StatusChange`` with ``region``
set). The batch that writes region moves (:func:`decide`, called by
``store.checks.write_check_batch`` before its statement) for each monitor:

* locks the monitor's row (``FOR UPDATE``, in id order), so two regions' batches
  committing at the same instant decide one after the other, the later one reading the
  view the earlier wrote: no move is lost and no second incident opened;
* logs the move in ``region_moves`` (once per check: a retried batch logs nothing
  twice, and decides nothing again) and stores it in the region's view
  (``monitor_regions``);
* counts the regions that see it down against ``region_quorum``: the monitor is
  ``down`` when at least that many see it down; else ``up`` once a region sees it up
  (a monitor no region sees up stays as it is: ``pending`` before any, ``down`` when a
  down region went silent and none has seen it up since);
* answers the *monitor move* that answer makes, if it changed: the batch's statement
  then applies it exactly as a move of a monitor without regions (status changes,
  ``monitor.down``/``monitor.up``, incidents, alerts: ``store.alerting``).

A region whose view was not heard (no check of that region stored) for more than two
intervals and :data:`SILENCE_SLACK_SECONDS` is ``unknown``: its node is gone (its
lease expired with no other node of the region to take it). An unknown view never
counts as down, at the decision or on the monitor object (``region_status``). The
views' ``heard`` is kept by the batch's statement from the checks of monitors with
regions (``store.checks``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol, TypeVar

from .database import Connection

__all__ = [
    "SILENCE_SLACK_SECONDS",
    "MonitorMove",
    "RegionMove",
    "decide",
    "monitor_moves",
    "region_status_sql",
    "regional_batch",
    "restart_views",
    "seen_down_sql",
    "sync_views",
]

SILENCE_SLACK_SECONDS = 10
"""Seconds beyond two intervals a region's view may go unheard before it is unknown:
the default lease (``uptrio serve --lease-seconds``, 10 s) in which another node of
the region takes over a gone node's buckets."""


def _fresh(view: str, interval: str, at: str) -> str:
    """SQL: region view ``view`` (alias of ``monitor_regions``) was heard (or, never
    heard, made) within two intervals (SQL ``interval``, seconds) and the slack of
    ``at`` (SQL epoch seconds)."""
    return (
        f"coalesce({view}.heard, {view}.since) >= {at} - (2 * {interval} + {SILENCE_SLACK_SECONDS})"
    )


def region_status_sql(monitor: str, at: str) -> str:
    """SQL: the ``region_status`` object of monitor alias ``monitor`` at ``at`` (SQL
    epoch seconds): region to ``up``/``down``/``pending``, or ``unknown`` when unheard
    (module docstring); NULL without regions."""
    return (
        f"CASE WHEN {monitor}.regions IS NOT NULL THEN (SELECT coalesce(jsonb_object_agg("
        f"r.region, CASE WHEN {_fresh('r', f'{monitor}.interval_seconds', at)} "
        "THEN r.status ELSE 'unknown' END ORDER BY r.region), '{}'::jsonb) "
        f"FROM monitor_regions r WHERE r.monitor_id = {monitor}.id "
        f"AND r.region = ANY({monitor}.regions)) END"
    )


def seen_down_sql(monitor: str, at: str) -> str:
    """SQL text: which regions see monitor alias ``monitor`` down at ``at`` (SQL epoch
    seconds), as ``"eu-west, us-east (2 of 3)"``; NULL without regions or when none
    does. Incidents, alerts and ``monitor.down`` name them (``store.alerting``)."""
    return (
        f"(SELECT string_agg(r.region, ', ' ORDER BY r.region) || ' (' || count(*) "
        f"|| ' of ' || cardinality({monitor}.regions) || ')' FROM monitor_regions r "
        f"WHERE {monitor}.regions IS NOT NULL AND r.monitor_id = {monitor}.id "
        f"AND r.region = ANY({monitor}.regions) AND r.status = 'down' "
        f"AND {_fresh('r', f'{monitor}.interval_seconds', at)})"
    )


class RegionMove(Protocol):
    """A region's view of ``monitor_id`` moving from ``from_status`` to ``to_status``
    because of check ``check_id`` made at ``created`` (epoch seconds) by a node of
    ``region``, whose actor ran under ``run_epoch`` (``store.checks.StatusChange``)."""

    @property
    def monitor_id(self) -> str: ...
    @property
    def region(self) -> str | None: ...
    @property
    def check_id(self) -> str: ...
    @property
    def from_status(self) -> str: ...
    @property
    def to_status(self) -> str: ...
    @property
    def run_epoch(self) -> int: ...
    @property
    def created(self) -> int: ...


MonitorMove = tuple[str, str, int]
"""The monitor's own move a region move decided: ``(from_status, to_status,
run_epoch)``."""


_LOCK = (
    "SELECT id FROM monitors WHERE id = ANY($1::text[]) AND regions IS NOT NULL "
    "ORDER BY id FOR UPDATE"
)

# The batch's region moves, in one statement once their monitors are locked: each logged
# once per check and only for the run the monitor has now (not paused) and a region it
# lists; each region's view takes its last move. One row per monitor with a move logged:
# what the quorum needs (its status, run, interval, quorum, the check ids logged) and the
# views of the regions this batch did not move (a statement does not see its own writes).
_APPLY = """
WITH mv AS (SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::text[],
    $6::text[], $7::bigint[]) WITH ORDINALITY
    AS u(monitor_id, run_epoch, region, check_id, from_status, to_status, created, ord)),
ok AS (SELECT mv.* FROM mv JOIN monitors m ON m.id = mv.monitor_id
    AND m.run_epoch = mv.run_epoch AND m.status <> 'paused' AND mv.region = ANY(m.regions)),
logged AS (
    INSERT INTO region_moves (monitor_id, region, check_id, from_status, to_status, created)
    SELECT monitor_id, region, check_id, from_status, to_status, created FROM ok ORDER BY ord
    ON CONFLICT (check_id) DO NOTHING RETURNING monitor_id, region, check_id),
last AS (SELECT DISTINCT ON (ok.monitor_id, ok.region) ok.* FROM ok
    JOIN logged l ON l.check_id = ok.check_id ORDER BY ok.monitor_id, ok.region, ok.ord DESC),
viewed AS (
    INSERT INTO monitor_regions AS r (monitor_id, region, status, since, heard)
    SELECT monitor_id, region, to_status, created, created FROM last
    ORDER BY monitor_id, region
    ON CONFLICT (monitor_id, region) DO UPDATE SET status = EXCLUDED.status,
        since = EXCLUDED.since, heard = greatest(r.heard, EXCLUDED.heard))
SELECT m.id, m.status, m.run_epoch, m.interval_seconds,
    coalesce(m.region_quorum, cardinality(m.regions) / 2 + 1) AS region_quorum,
    array(SELECT l.check_id FROM logged l WHERE l.monitor_id = m.id) AS logged,
    array(SELECT row(r.region, r.status, coalesce(r.heard, r.since))
        FROM monitor_regions r WHERE r.monitor_id = m.id AND r.region = ANY(m.regions)
        AND r.region NOT IN (SELECT l.region FROM logged l WHERE l.monitor_id = m.id))
        AS views
FROM monitors m WHERE m.id IN (SELECT monitor_id FROM logged)
"""


def _answer(status: str, views: dict[str, tuple[str, int]], quorum: int, stale: int) -> str:
    """The quorum's answer (module docstring) for a monitor now ``status`` with region
    ``views`` (region to ``(status, heard)``, epoch seconds), counting only views heard
    after ``stale`` (epoch seconds)."""
    fresh = [seen for seen, heard in views.values() if heard >= stale]
    if fresh.count("down") >= quorum:
        return "down"
    return "up" if "up" in fresh else status


async def decide(connection: Connection, moves: Sequence[RegionMove]) -> dict[str, MonitorMove]:
    """Apply ``moves`` (in their order) to the regions' views and answer the monitor
    moves they decide, by the ``check_id`` of the region move that decided each (module
    docstring), inside the caller's transaction, in two statements whatever the number of
    moves: the lock of the monitors' rows (they stay locked until the transaction ends),
    then the moves logged and stored with what the quorum needs, read after the lock was
    granted. A move of a monitor paused, deleted, run under another epoch, without regions
    or not listing the move's region, or already logged, changes nothing."""
    if not moves:
        return {}
    ids = sorted({move.monitor_id for move in moves})
    await connection.execute(_LOCK, ids)
    rows = await connection.fetch(
        _APPLY,
        [move.monitor_id for move in moves],
        [move.run_epoch for move in moves],
        [move.region for move in moves],
        [move.check_id for move in moves],
        [move.from_status for move in moves],
        [move.to_status for move in moves],
        [move.created for move in moves],
    )
    monitors = {row["id"]: row for row in rows}
    logged = {check_id for row in rows for check_id in row["logged"]}
    views = {row["id"]: {view[0]: (view[1], view[2]) for view in row["views"]} for row in rows}
    status = {row["id"]: row["status"] for row in rows}
    decided: dict[str, MonitorMove] = {}
    for move in moves:
        if move.check_id not in logged:
            continue
        row = monitors[move.monitor_id]
        seen = views[move.monitor_id]
        seen[move.region] = (move.to_status, move.created)
        stale = move.created - (2 * row["interval_seconds"] + SILENCE_SLACK_SECONDS)
        before = status[move.monitor_id]
        after = _answer(before, seen, row["region_quorum"], stale)
        if after != before:
            status[move.monitor_id] = after
            decided[move.check_id] = (before, after, row["run_epoch"])
    return decided


def regional_batch(statement: str) -> str:
    """The check batch's ``statement`` (``store.checks``: its CTE ``ins`` inserts the
    checks, ``$1`` their ids, ``$2`` their monitors, ``$8`` their times; a CTE ``moves``
    follows the rollups) for a batch holding checks of monitors with regions, ``$17``
    each check's view (a region, or NULL): it also keeps those views heard (the newest
    check of each) and each region's own rollups (``region_rollups``, migration 0026:
    checks, failed checks, response times and newest check per monitor, region and hour;
    docs/regions.md, "History"), locked in key order as the monitor's rollups are."""
    return statement.replace(
        "WITH ins AS (",
        "WITH "
        "heard AS (UPDATE monitor_regions r SET heard = h.last FROM (SELECT monitor_id, "
        "region, max(created) AS last FROM unnest($2::text[], $17::text[], $8::bigint[]) "
        "AS u(monitor_id, region, created) WHERE region IS NOT NULL GROUP BY 1, 2) h "
        "WHERE r.monitor_id = h.monitor_id AND r.region = h.region "
        "AND (r.heard IS NULL OR r.heard < h.last)), ins AS (",
        1,
    ).replace("moves AS (", _REGION_ROLLUPS + ", moves AS (", 1)


_REGION_ROLLUPS = (
    "region_rolled AS (INSERT INTO region_rollups AS r (monitor_id, region, hour, checks, "
    "failed_checks, response_time_sum_ms, histogram, last_check) SELECT monitor_id, region, "
    "hour, sum(n)::int, sum(failed)::int, sum(total), coalesce(array_agg(bucket * 65536 + "
    "least(n, 65535)::int ORDER BY bucket) FILTER (WHERE bucket IS NOT NULL), '{}'), "
    "max(last) FROM (SELECT i.monitor_id, v.region, i.created - i.created % 3600 AS hour, "
    "histogram_bucket(i.response_time_ms) AS bucket, count(*) AS n, "
    "count(*) FILTER (WHERE i.status = 'down') AS failed, sum(i.response_time_ms) AS total, "
    "max(i.created) AS last FROM ins i JOIN unnest($1::text[], $17::text[]) AS v(id, region) "
    "ON v.id = i.id AND v.region IS NOT NULL GROUP BY 1, 2, 3, 4) AS x "
    "GROUP BY monitor_id, region, hour ORDER BY monitor_id, region, hour "
    "ON CONFLICT (monitor_id, region, hour) DO UPDATE SET "
    "checks = r.checks + EXCLUDED.checks, "
    "failed_checks = r.failed_checks + EXCLUDED.failed_checks, "
    "response_time_sum_ms = r.response_time_sum_ms + EXCLUDED.response_time_sum_ms, "
    "histogram = histogram_merge(r.histogram, EXCLUDED.histogram), "
    "last_check = greatest(r.last_check, EXCLUDED.last_check))"
)


MoveT = TypeVar("MoveT", bound=RegionMove)


async def monitor_moves(connection: Connection, changes: Sequence[MoveT]) -> list[MoveT]:
    """``changes`` (``store.checks.StatusChange``, a dataclass) with their region moves
    replaced by the monitor moves they decide (:func:`decide`), each in the place of the
    region move that decided it (``region`` None), the others dropped."""
    decided = await decide(connection, [c for c in changes if c.region is not None])
    kept: list[MoveT] = []
    for change in changes:
        if change.region is None:
            kept.append(change)
        elif (move := decided.get(change.check_id)) is not None:
            before, after, epoch = move
            kept.append(
                replace(  # type: ignore[type-var]
                    change, from_status=before, to_status=after, run_epoch=epoch, region=None
                )
            )
    return kept


async def restart_views(connection: Connection, monitor_id: str, to: str, now: int) -> None:
    """After a pause (``to`` ``paused``) or a resume (``pending``) of ``monitor_id`` at
    ``now`` (epoch seconds): its region views start again, ``pending`` since ``now``, and
    each region's log records the move to ``to`` (per-region availability counts the
    paused time as the monitor's). Nothing for a monitor without regions."""
    await connection.execute(
        "WITH old AS (SELECT region, status FROM monitor_regions WHERE monitor_id = $1 "
        "FOR UPDATE), views AS (UPDATE monitor_regions r SET status = 'pending', since = $3 "
        "FROM old WHERE r.monitor_id = $1 AND r.region = old.region) "
        "INSERT INTO region_moves (monitor_id, region, from_status, to_status, created) "
        "SELECT $1, region, status, $2, $3 FROM old",
        monitor_id,
        to,
        now,
    )


async def sync_views(
    connection: Connection, monitor_id: str, regions: Sequence[str] | None, now: int
) -> None:
    """Make the region views of ``monitor_id`` follow its ``regions``: a view for each
    (``pending`` since ``now``, epoch seconds; an existing one kept), none for a region
    no longer listed (all of them when ``regions`` is None)."""
    await connection.execute(
        "WITH gone AS (DELETE FROM monitor_regions WHERE monitor_id = $1 "
        "AND NOT region = ANY(coalesce($2::text[], '{}'))) "
        "INSERT INTO monitor_regions (monitor_id, region, status, since) "
        "SELECT $1, r, 'pending', $3 FROM unnest(coalesce($2::text[], '{}')) AS r "
        "ON CONFLICT (monitor_id, region) DO NOTHING",
        monitor_id,
        None if regions is None else list(regions),
        now,
    )
