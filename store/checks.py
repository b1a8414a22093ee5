"""Check results, status changes and their hourly rollups: the engine's high-volume
writes, and their reads (extensions part 4).

Writes come from the store actor in batches (:func:`write_check_batch`), in the caller's
transaction (DESIGN: "a status change is written in the same transaction as the check
that caused it"; part 4: "rollups are written as checks are written"):

* one statement inserts every check of the batch through ``unnest`` arrays and, from the
  rows it actually inserted (``RETURNING``), upserts the hourly rollups: checks, failed
  checks, the response-time sum and histogram (:mod:`store.rollups`). Check ids are made
  by the engine, so a batch retried after a lost commit acknowledgement inserts nothing
  twice and counts nothing twice (``ON CONFLICT DO NOTHING``);
* when the batch holds status changes, a second statement applies them, logs them in
  ``status_changes``, and closes the status periods they end into the rollups' up, down
  and paused seconds (:data:`store.rollups.CLOSE_PERIODS`). A change already logged is
  skipped, so a retried batch closes nothing twice;
* the moves it applied then open and resolve incidents and write their events
  (:mod:`store.alerting`), in the same transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .alerting import MONITOR_MOVES, apply_moves
from .database import Connection
from .errors import CursorNotFound
from .ids import check_created
from .pagination import CreatedBounds, fetch_newest_first
from .records import CheckRecord
from .rollups import CLOSE_PERIODS

_CHECK_COLUMNS = (
    "id, monitor_id, status, response_time_ms, status_code, error_code, error_message, "
    "created, tls_expires_at"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusChange:
    """A monitor's status moving because of check ``check_id``.

    ``run_epoch`` is the epoch the engine ran the monitor under: the change is written only
    while the stored monitor still has that epoch and is not paused, so a result that
    arrives after a pause or a resume never overrides it. ``created`` is epoch seconds.
    """

    monitor_id: str
    check_id: str
    from_status: str
    to_status: str
    run_epoch: int
    created: int
    lease_epoch: int | None = None
    """The lease epoch its actor ran under (``store.fencing``), or None: not fenced."""


async def write_check_batch(
    connection: Connection, checks: Sequence[CheckRecord], changes: Sequence[StatusChange]
) -> int:
    """Insert ``checks`` with their rollups and apply ``changes`` (asyncio side; call
    inside a transaction when there are ``changes``; without them it is one statement,
    atomic by itself).

    Checks of monitors deleted meanwhile are dropped, and those of a paused monitor
    whose probe started (``created``) at or after the pause's second (a pause response
    means no new check starts after it; spec 3.1); when several changes of one monitor
    are in the batch, the monitor ends with the last. Returns the number of check rows
    inserted.
    """
    inserted = 0
    if checks:
        result = await connection.fetchval(
            "WITH ins AS ("
            f"INSERT INTO checks ({_CHECK_COLUMNS}) "
            f"SELECT {_CHECK_COLUMNS} FROM unnest($1::text[], $2::text[], $3::text[], "
            "$4::float8[], $5::int[], $6::text[], $7::text[], $8::bigint[], $9::bigint[]) "
            f"WITH ORDINALITY AS u({_CHECK_COLUMNS}, ord) "
            # A check of a paused monitor whose probe started at the pause's second or
            # later is refused: probed by the owner between a pause committed through
            # another node and the notification (extensions part 6).
            "WHERE EXISTS (SELECT 1 FROM monitors m WHERE m.id = u.monitor_id AND "
            "(m.status <> 'paused' OR m.status_since IS NULL OR u.created < m.status_since)) "
            "ORDER BY ord ON CONFLICT DO NOTHING "
            "RETURNING monitor_id, created, status, response_time_ms), "
            "by_bucket AS (SELECT monitor_id, created - created % 3600 AS hour, "
            "histogram_bucket(response_time_ms) AS bucket, count(*) AS n, "
            "count(*) FILTER (WHERE status = 'down') AS failed, "
            "sum(response_time_ms) AS total FROM ins GROUP BY 1, 2, 3), "
            "rolled AS (INSERT INTO check_rollups AS r (monitor_id, hour, checks, "
            "failed_checks, response_time_sum_ms, histogram) "
            "SELECT monitor_id, hour, sum(n)::int, sum(failed)::int, sum(total), "
            "array_agg(bucket * 65536 + least(n, 65535)::int ORDER BY bucket) "
            "FROM by_bucket GROUP BY monitor_id, hour "
            "ON CONFLICT (monitor_id, hour) DO UPDATE SET "
            "checks = r.checks + EXCLUDED.checks, "
            "failed_checks = r.failed_checks + EXCLUDED.failed_checks, "
            "response_time_sum_ms = r.response_time_sum_ms + EXCLUDED.response_time_sum_ms, "
            "histogram = histogram_merge(r.histogram, EXCLUDED.histogram)) "
            "SELECT count(*) FROM ins",
            [c.id for c in checks],
            [c.monitor_id for c in checks],
            [c.status for c in checks],
            [c.response_time_ms for c in checks],
            [c.status_code for c in checks],
            [c.error_code for c in checks],
            [c.error_message for c in checks],
            [c.created for c in checks],
            [c.tls_expires_at for c in checks],
        )
        inserted = int(result)
    if changes:
        moves = await connection.fetch(
            "WITH ch AS (SELECT u.* FROM unnest($1::text[], $2::text[], $3::text[], "
            "$4::text[], $5::int[], $6::bigint[]) WITH ORDINALITY "
            "AS u(monitor_id, check_id, from_status, to_status, epoch, created, ord)), "
            # Changes of the monitor's current run, not logged yet (a retry logs nothing).
            "ok AS (SELECT ch.*, m.status AS stored, "
            "coalesce(m.status_since, m.created) AS since FROM ch JOIN monitors m "
            "ON m.id = ch.monitor_id AND m.run_epoch = ch.epoch AND m.status <> 'paused' "
            "WHERE NOT EXISTS (SELECT 1 FROM status_changes s WHERE s.check_id = ch.check_id)), "
            "last AS (SELECT DISTINCT ON (monitor_id) * FROM ok ORDER BY monitor_id, ord DESC), "
            "moved AS (UPDATE monitors m SET status = last.to_status, updated = last.created, "
            "status_since = last.created FROM last WHERE m.id = last.monitor_id RETURNING m.id), "
            # The periods the changes end: the stored one, then each change's own.
            "periods AS (SELECT monitor_id, "
            "coalesce(lag(to_status) OVER w, stored) AS status, "
            "coalesce(lag(created) OVER w, since) AS started, created AS ended "
            "FROM ok WINDOW w AS (PARTITION BY monitor_id ORDER BY ord)), "
            f"{CLOSE_PERIODS} "
            "INSERT INTO status_changes (monitor_id, check_id, from_status, to_status, created) "
            "SELECT monitor_id, check_id, from_status, to_status, created FROM ok "
            "ORDER BY ord ON CONFLICT (check_id) DO NOTHING "
            "RETURNING seq, monitor_id, check_id, from_status, to_status, created",
            [c.monitor_id for c in changes],
            [c.check_id for c in changes],
            [c.from_status for c in changes],
            [c.to_status for c in changes],
            [c.run_epoch for c in changes],
            [c.created for c in changes],
        )
        await apply_moves(
            connection,
            MONITOR_MOVES,
            [
                (m["monitor_id"], m["check_id"], m["from_status"], m["to_status"], m["created"])
                for m in sorted(moves, key=lambda m: m["seq"])
            ],
        )
    return inserted


async def ensure_partitions(connection: Connection, lo: int, hi: int, width: int) -> None:
    """Make the partitions of ``checks`` that rows created in ``[lo, hi]`` (epoch
    seconds) need, ``width`` seconds each (the SQL function ``ensure_check_partitions``
    of migration 0003; a slot an existing partition overlaps is left alone)."""
    await connection.execute("SELECT ensure_check_partitions($1, $2, $3)", lo, hi, width)


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckFilter(CreatedBounds):
    """Filters of ``GET /monitors/:id/checks`` (extensions part 4): ``status`` (``up`` or
    ``down``) and bounds on ``created`` (epoch seconds), each None when absent."""

    status: str | None = None


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
    of them after ``starting_after`` or before ``ending_before`` (spec 4.4; at most one of
    the two), with ``filters``. Returns ``(checks, has_more)``; ``has_more`` looks in the
    direction of travel, as ``store.pagination`` does.

    Raises:
        store.errors.CursorNotFound: a cursor is not a check of this monitor.
    """
    args: list[object] = [monitor_id]
    where = ["monitor_id = $1"]
    if filters.status is not None:
        args.append(filters.status)
        where.append("status = $2")
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
