"""Check results, status changes and their hourly rollups: the engine's high-volume
writes, and their reads (docs/history.md).

Writes come from the store actor in batches (:func:`write_check_batch`), in the caller's
transaction (docs/design-notes.md, Writes: "a status change is written in the same
transaction as the check that caused it"; docs/history.md, Rollups: "written in the
transaction that writes what they count"). One statement writes the whole batch:

* it inserts every check through ``unnest`` arrays and, from the rows it actually
  inserted (``RETURNING``), counts them into the hourly rollups: checks, failed checks,
  the response-time sum and histogram, the hour's last check (:mod:`store.rollups`).
  Check ids are made by the engine, so a batch retried after a lost commit
  acknowledgement inserts nothing twice and counts nothing twice (``ON CONFLICT DO
  NOTHING``);
* it finds the *unknown spans* the inserted checks end: a check more than two intervals
  after its monitor's previous one (in the batch, else the newest ``last_check`` of its
  rollups: one backward probe of their primary key per monitor of the batch, beside the
  monitor's row) or after the start of its status period;
* it dates the batch's status changes (a move into ``down`` from the first failed check
  of its episode, found in the stored checks and the batch's: a few index probes per
  such move, none for the others), applies them and the spans in time order to the
  monitors' status and ``status_since``, logs them and the spans' edges in
  ``status_changes``, and adds the status periods they close to the rollups' up, down and
  paused seconds (:data:`store.rollups.SPLIT_PERIODS`) in the same upsert as the counts,
  and to the daily seconds (:data:`store.rollups.ADD_DAILY`) (a span's seconds count
  nowhere: unknown). A change already logged is skipped, and a
  retried batch inserts no check so finds no span: nothing is closed twice.

Without changes or spans those parts run on empty sets. The moves it applied then open
and resolve incidents and write their events (:mod:`store.alerting`), in the same
transaction, at the time of the check that caused each.

Checks are the ``checks`` family of the store actor's batches (:mod:`store.family`;
docs/history.md, "Raw checks"): a producer hands over a :class:`WriteCheck` (one check
and the :class:`StatusChange` it caused), and the family writes its part of a batch with
:func:`write_check_batch`, the partitions of ``checks`` made first (:data:`CHECKS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import trio

from . import quorum
from .alerting import MONITOR_MOVES, apply_moves, release_held
from .database import Connection
from .errors import CursorNotFound
from .family import Family, Partitions, register
from .ids import check_created
from .pagination import CreatedBounds, fetch_newest_first
from .records import CheckRecord
from .rollups import ADD_DAILY, SPLIT_PERIODS, gap_sql, last_check_sql

_CHECK_COLUMNS = (
    "id, monitor_id, status, response_time_ms, status_code, error_code, error_message, "
    "created, tls_expires_at, region"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusChange:
    """A monitor's status moving because of check ``check_id``.

    ``run_epoch`` is the epoch the engine ran the monitor under: the change is written only
    while the stored monitor still has that epoch and is not paused, so a result that
    arrives after a pause or a resume never overrides it. ``created`` is the check's time,
    epoch seconds; the store dates a move into ``down`` from the first failed check of
    its episode (:mod:`store.rollups`: backdating), the engine need not know it.
    """

    monitor_id: str
    check_id: str
    from_status: str
    to_status: str
    run_epoch: int
    created: int
    lease_epoch: int | None = None
    """The lease epoch its actor ran under (``store.fencing``), or None: not fenced."""
    region: str | None = None
    """Set on a monitor with regions: the region whose view moved (a *region move*: the
    monitor's own move is decided by ``store.quorum``); None: the monitor moves."""
    lease_region: str | None = None
    """The pool of that lease: a region, or None: the any-region pool (``store.fencing``)."""

    family: ClassVar[str] = "checks"
    """Written by the ``checks`` family (:data:`CHECKS`)."""

    @property
    def resource_id(self) -> str:
        """The monitor's id (the fence's bucket)."""
        return self.monitor_id


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteCheck:
    """One check result handed to the store actor (``StoreWriter.write``), with the
    status change it caused (or None): an item of the ``checks`` family.

    ``queued_at`` is when the producer handed it over: when it was built, by default
    (trio clock, seconds; about when its probe ended): the store measures each item's
    delay to the commit of its batch from it (``uptrio_store_commit_delay_seconds``).
    """

    check: CheckRecord
    change: StatusChange | None = None
    lease_epoch: int | None = None
    """The lease epoch the monitor's actor ran under (``store.fencing``), or None."""
    region: str | None = None
    """On a monitor with regions, the region whose view the check counts in (the node's
    region: its view is heard; docs/regions.md); None on a monitor without regions."""
    lease_region: str | None = None
    """The pool of that lease: the node's region for a monitor with ``regions``, or None:
    the any-region pool (``store.fencing``; docs/several-nodes.md, Regions)."""
    queued_at: float = field(default_factory=trio.current_time)

    family: ClassVar[str] = "checks"
    """Written by the ``checks`` family (:data:`CHECKS`)."""

    @property
    def resource_id(self) -> str:
        """The monitor's id (the fence's bucket)."""
        return self.check.monitor_id


async def write_check_batch(
    connection: Connection,
    checks: Sequence[CheckRecord],
    changes: Sequence[StatusChange],
    views: Sequence[str | None] | None = None,
) -> int:
    """Insert ``checks`` with their rollups, close the unknown spans they end, and apply
    ``changes`` (module docstring; asyncio side): one statement, atomic by itself; call it
    inside a transaction when there are ``changes`` or failed checks, for the incidents,
    alerts and events they cause (a failed check may release an incident a maintenance
    window or a dependency held back: :func:`store.alerting.release_held`).

    Checks of monitors deleted meanwhile are dropped, and those of a paused monitor
    whose probe started (``created``) at or after the pause's second (a pause response
    means no new check starts after it; docs/checks.md); when several changes of one monitor
    are in the batch, the monitor ends with the last. Returns the number of check rows
    inserted.

    ``views`` (one per check, or None: all None) names, for a check of a monitor with
    regions, the region whose view it keeps heard (:mod:`store.quorum`). Region moves
    (changes with ``region``) are first applied to their views and decided
    (:func:`store.quorum.decide`, locking those monitors' rows): the monitor moves they
    decide are applied here as any other change.
    """
    if any(c.region is not None for c in changes):
        changes = await quorum.monitor_moves(connection, changes)
    heard = () if views is None or not any(views) else (list(views),)
    row = await connection.fetchrow(
        _WRITE_BATCH_HEARD if heard else _WRITE_BATCH,
        [c.id for c in checks],
        [c.monitor_id for c in checks],
        [c.status for c in checks],
        [c.response_time_ms for c in checks],
        [c.status_code for c in checks],
        [c.error_code for c in checks],
        [c.error_message for c in checks],
        [c.created for c in checks],
        [c.tls_expires_at for c in checks],
        [c.region for c in checks],
        [c.monitor_id for c in changes],
        [c.check_id for c in changes],
        [c.from_status for c in changes],
        [c.to_status for c in changes],
        [c.run_epoch for c in changes],
        [c.created for c in changes],
        *heard,
    )
    if row["monitor_ids"] is not None:
        await apply_moves(
            connection,
            MONITOR_MOVES,
            list(
                zip(
                    row["monitor_ids"],
                    row["check_ids"],
                    row["from_statuses"],
                    row["to_statuses"],
                    row["times"],
                    strict=True,
                )
            ),
        )
    await release_held(
        connection,
        MONITOR_MOVES,
        [(c.monitor_id, c.id, c.created) for c in checks if c.status == "down"],
        row["monitor_ids"] or [],
    )
    return int(row["inserted"])


def _stored_or_batch(aggregate: str, where: str) -> str:
    """The ``aggregate`` (``min`` or ``max``) of ``c.created`` over the checks matching
    ``where`` (on alias ``c``): the stored ones and those this statement inserts (``ins``;
    a statement does not see its own rows)."""
    pick = "least" if aggregate == "min" else "greatest"
    return (
        f"{pick}((SELECT {aggregate}(c.created) FROM checks c WHERE {where}), "
        f"(SELECT {aggregate}(c.created) FROM ins c WHERE {where}))"
    )


_SINCE = "coalesce(m.status_since, m.created)"
_EPISODE = "c.monitor_id = b.monitor_id AND c.created >= b.bound AND c.created <= b.created"
_LAST_GOOD = _stored_or_batch("max", f"{_EPISODE} AND c.status = 'up'")
_FIRST_FAILED = _stored_or_batch(
    "min", f"{_EPISODE} AND c.status = 'down' AND c.created > coalesce(b.last_good, 0)"
)

_WRITE_BATCH = (
    "WITH ins AS ("
    f"INSERT INTO checks ({_CHECK_COLUMNS}) "
    f"SELECT {_CHECK_COLUMNS} FROM unnest($1::text[], $2::text[], $3::text[], "
    "$4::float8[], $5::int[], $6::text[], $7::text[], $8::bigint[], $9::bigint[], "
    "$10::text[]) "
    f"WITH ORDINALITY AS u({_CHECK_COLUMNS}, ord) "
    # A check of a paused monitor whose probe started at the pause's second or later is
    # refused: probed by the owner between a pause committed through another node and the
    # notification (docs/several-nodes.md).
    "WHERE EXISTS (SELECT 1 FROM monitors m WHERE m.id = u.monitor_id AND "
    "(m.status <> 'paused' OR m.status_since IS NULL OR u.created < m.status_since)) "
    "ORDER BY ord ON CONFLICT DO NOTHING "
    "RETURNING id, monitor_id, created, status, response_time_ms), "
    "ch AS (SELECT u.* FROM unnest($11::text[], $12::text[], $13::text[], $14::text[], "
    "$15::int[], $16::bigint[]) WITH ORDINALITY "
    "AS u(monitor_id, check_id, from_status, to_status, epoch, created, ord)), "
    # The monitors the batch moves, as stored before it (not paused), with their previous
    # check (the newest in their rollups, or the start of their period if later).
    "mon AS (SELECT m.id AS monitor_id, m.status AS stored, m.run_epoch, "
    f"m.interval_seconds AS iv, {_SINCE} AS since, "
    f"greatest({_SINCE}, {last_check_sql('m.id', _SINCE)}) AS before FROM monitors m "
    "WHERE m.id IN (SELECT monitor_id FROM ins UNION SELECT monitor_id FROM ch) "
    "AND m.status <> 'paused'), "
    # Unknown spans (store.rollups): each inserted check more than two intervals after
    # the one before it (in the batch, else stored). A retried batch inserts none.
    "seen AS (SELECT monitor_id, created, "
    "lag(created) OVER (PARTITION BY monitor_id ORDER BY created) AS prev FROM ins), "
    "spans AS (SELECT s.monitor_id, greatest(s.prev, mon.before) + mon.iv AS gap_from, "
    "s.created AS gap_to FROM seen s JOIN mon ON mon.monitor_id = s.monitor_id "
    f"WHERE {gap_sql('greatest(s.prev, mon.before)', 's.created', 'mon.iv')}), "
    # Changes of the monitor's current run, not logged yet (a retry logs nothing).
    "ok AS (SELECT ch.*, mon.since FROM ch JOIN mon ON mon.monitor_id = ch.monitor_id "
    "AND mon.run_epoch = ch.epoch "
    "WHERE NOT EXISTS (SELECT 1 FROM status_changes s WHERE s.check_id = ch.check_id)), "
    # When each change's status began: not before the period it ends, nor inside a span
    # (a change whose check a full buffer dropped); a move into down at the first failed
    # check after the last good one (store.rollups: backdating).
    "bounded AS (SELECT ok.*, greatest(ok.since, (SELECT max(g.gap_to) FROM spans g "
    "WHERE g.monitor_id = ok.monitor_id AND g.gap_from <= ok.created)) AS bound FROM ok), "
    "good AS (SELECT b.*, CASE WHEN b.to_status = 'down' THEN "
    f"{_LAST_GOOD} END AS last_good "
    "FROM bounded b), "
    "dated AS (SELECT b.*, greatest(b.bound, CASE WHEN b.to_status = 'down' THEN "
    f"coalesce({_FIRST_FAILED}, b.created) ELSE b.created END) AS at FROM good b), "
    # Each span's edges, in the status it interrupts (a pending one is unknown anyway).
    "edges AS (SELECT * FROM (SELECT g.monitor_id, g.gap_from, g.gap_to, "
    "coalesce((SELECT d.to_status FROM dated d WHERE d.monitor_id = g.monitor_id "
    "AND d.at < g.gap_from ORDER BY d.at DESC, d.ord DESC LIMIT 1), mon.stored) AS was "
    "FROM spans g JOIN mon ON mon.monitor_id = g.monitor_id) AS e "
    "WHERE was IN ('up', 'down')), "
    # Every point where a status begins, in time order (rank breaks ties).
    "pts AS (SELECT monitor_id, check_id, from_status, to_status, at, 2 AS rank, ord "
    "FROM dated UNION ALL SELECT monitor_id, NULL, was, 'unknown', gap_from, 0, 0 "
    "FROM edges UNION ALL SELECT monitor_id, NULL, 'unknown', was, gap_to, 1, 0 FROM edges), "
    "last AS (SELECT DISTINCT ON (monitor_id) * FROM dated ORDER BY monitor_id, ord DESC), "
    "newest AS (SELECT DISTINCT ON (monitor_id) monitor_id, at FROM pts "
    "ORDER BY monitor_id, at DESC, rank DESC, ord DESC), "
    "moved AS (UPDATE monitors m SET status = coalesce(last.to_status, m.status), "
    "updated = coalesce(last.created, m.updated), status_since = newest.at "
    "FROM newest LEFT JOIN last ON last.monitor_id = newest.monitor_id "
    "WHERE m.id = newest.monitor_id), "
    # The periods the points close: the stored one, then each point's own.
    "periods AS (SELECT p.monitor_id, coalesce(lag(p.to_status) OVER w, mon.stored) "
    "AS status, coalesce(lag(p.at) OVER w, mon.since) AS started, p.at AS ended "
    "FROM pts p JOIN mon ON mon.monitor_id = p.monitor_id "
    "WINDOW w AS (PARTITION BY p.monitor_id ORDER BY p.at, p.rank, p.ord)), "
    f"{SPLIT_PERIODS}, {ADD_DAILY}, "
    "by_bucket AS (SELECT monitor_id, created - created % 3600 AS hour, "
    "histogram_bucket(response_time_ms) AS bucket, count(*) AS n, "
    "count(*) FILTER (WHERE status = 'down') AS failed, "
    "sum(response_time_ms) AS total, max(created) AS last FROM ins GROUP BY 1, 2, 3), "
    # One upsert of the rollups: the checks' counts and the closed periods' seconds.
    "rolled AS (INSERT INTO check_rollups AS r (monitor_id, hour, checks, failed_checks, "
    "response_time_sum_ms, histogram, last_check, up_seconds, down_seconds, "
    "paused_seconds) SELECT monitor_id, hour, sum(n)::int, sum(failed)::int, sum(total), "
    "coalesce(array_agg(bucket * 65536 + least(n, 65535)::int ORDER BY bucket) "
    "FILTER (WHERE bucket IS NOT NULL), '{}'), max(last), sum(up)::int, sum(down)::int, "
    "sum(paused)::int FROM (SELECT monitor_id, hour, bucket, n, failed, total, last, "
    "0 AS up, 0 AS down, 0 AS paused FROM by_bucket UNION ALL SELECT monitor_id, hour, "
    "NULL, 0, 0, 0, NULL, up, down, paused FROM split) AS x GROUP BY monitor_id, hour "
    # in key order: the nodes of several regions write one monitor's rows at once, and
    # rows locked in one order by every batch cannot deadlock (docs/regions.md)
    "ORDER BY monitor_id, hour "
    "ON CONFLICT (monitor_id, hour) DO UPDATE SET "
    "checks = r.checks + EXCLUDED.checks, "
    "failed_checks = r.failed_checks + EXCLUDED.failed_checks, "
    "response_time_sum_ms = r.response_time_sum_ms + EXCLUDED.response_time_sum_ms, "
    "histogram = histogram_merge(r.histogram, EXCLUDED.histogram), "
    "last_check = greatest(r.last_check, EXCLUDED.last_check), "
    "up_seconds = r.up_seconds + EXCLUDED.up_seconds, "
    "down_seconds = r.down_seconds + EXCLUDED.down_seconds, "
    "paused_seconds = r.paused_seconds + EXCLUDED.paused_seconds), "
    "logged AS (INSERT INTO status_changes (monitor_id, check_id, from_status, to_status, "
    "created) SELECT monitor_id, check_id, from_status, to_status, at FROM pts "
    "ORDER BY at, rank, ord ON CONFLICT (check_id) DO NOTHING RETURNING seq, check_id), "
    # The moves applied, in log order, at the time of the check that caused each.
    "moves AS (SELECT l.seq, d.* FROM logged l JOIN dated d ON d.check_id = l.check_id) "
    "SELECT (SELECT count(*) FROM ins) AS inserted, "
    "array_agg(monitor_id ORDER BY seq) AS monitor_ids, "
    "array_agg(check_id ORDER BY seq) AS check_ids, "
    "array_agg(from_status ORDER BY seq) AS from_statuses, "
    "array_agg(to_status ORDER BY seq) AS to_statuses, "
    "array_agg(created ORDER BY seq) AS times FROM moves"
)
"""The batch (:func:`write_check_batch`): checks $1-$10, changes $11-$16. One row: the
number of checks inserted and the moves applied (arrays, NULL without any)."""

_WRITE_BATCH_HEARD = quorum.regional_batch(_WRITE_BATCH)
"""The batch of a batch holding checks of monitors with regions (``$17``: each check's
view, or NULL): also keeps their views heard and their regions' rollups
(:func:`store.quorum.regional_batch`). A batch without any runs :data:`_WRITE_BATCH`,
which touches neither."""


async def ensure_partitions(connection: Connection, lo: int, hi: int, width: int) -> None:
    """Make the partitions of ``checks`` that rows created in ``[lo, hi]`` (epoch
    seconds) need, ``width`` seconds each (the SQL function ``ensure_check_partitions``
    of migration 0003; a slot an existing partition overlaps is left alone)."""
    await connection.execute("SELECT ensure_check_partitions($1, $2, $3)", lo, hi, width)


async def _write_part(
    connection: Connection, items: Sequence[WriteCheck], changes: Sequence[StatusChange]
) -> int:
    """The ``checks`` family's part of a batch (:func:`write_check_batch`)."""
    return await write_check_batch(
        connection, [item.check for item in items], changes, [item.region for item in items]
    )


def _check_time(item: WriteCheck) -> int:
    return item.check.created


CHECKS = register(
    Family(
        name="checks",
        write=_write_part,
        partitions=Partitions(row_time=_check_time, ensure=ensure_partitions),
    )
)
"""The ``checks`` family of the store actor's batches (:mod:`store.family`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckFilter(CreatedBounds):
    """Filters of ``GET /monitors/:id/checks`` (docs/history.md): ``status`` (``up`` or
    ``down``), ``region`` (the checks one region's node made: docs/regions.md) and
    bounds on ``created`` (epoch seconds), each None when absent."""

    status: str | None = None
    region: str | None = None


async def _cursor_key(
    connection: Connection, monitor_id: str, check_id: str, param: str
) -> tuple[int, str]:
    """The ``(created, id)`` of cursor ``check_id``: looked up by the key a check id
    carries (``store.ids.check_created``), else by id alone (ids made before migration
    0003).

    Raises:
        CursorNotFound: ``check_id`` is no check of ``monitor_id``.
    """
    created = check_created(check_id)
    found = None
    if created is not None:
        found = await connection.fetchval(
            "SELECT created FROM checks WHERE monitor_id = $1 AND created = $2 AND id = $3",
            monitor_id,
            created,
            check_id,
        )
    if found is None:
        found = await connection.fetchval(
            "SELECT created FROM checks WHERE monitor_id = $1 AND id = $2", monitor_id, check_id
        )
    if found is None:
        raise CursorNotFound(param, check_id)
    return int(found), check_id


async def list_checks(
    connection: Connection,
    monitor_id: str,
    *,
    limit: int,
    starting_after: str | None = None,
    ending_before: str | None = None,
    filters: CheckFilter = CheckFilter(),
) -> tuple[list[CheckRecord], bool]:
    """Checks of ``monitor_id``, newest first (by ``created``, then id), ``limit`` (1-100)
    of them after ``starting_after`` or before ``ending_before`` (docs/api.md, Conventions;
    at most one of the two), with ``filters``. Returns ``(checks, has_more)``; ``has_more``
    looks in the direction of travel, as ``store.pagination`` does.

    Raises:
        store.errors.CursorNotFound: a cursor is not a check of this monitor.
    """
    args: list[object] = [monitor_id]
    where = ["monitor_id = $1"]
    if filters.status is not None:
        args.append(filters.status)
        where.append(f"status = ${len(args)}")
    if filters.region is not None:
        args.append(filters.region)
        where.append(f"region = ${len(args)}")
    forward = ending_before is None
    cursor = starting_after if forward else ending_before
    cursor_key = None
    if cursor is not None:
        param = "starting_after" if forward else "ending_before"
        cursor_key = await _cursor_key(connection, monitor_id, cursor, param)
    rows, has_more = await fetch_newest_first(
        connection,
        table="checks",
        select=_CHECK_COLUMNS,
        where=where,
        args=args,
        bounds=filters,
        tiebreak="id",
        cursor_key=cursor_key,
        forward=forward,
        limit=limit,
    )
    return [CheckRecord.from_row(r) for r in rows], has_more
