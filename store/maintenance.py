"""The maintenance actor: partitions ahead of time, retention by whole partitions
(docs/history.md: "a maintenance actor in store/ creates the next partitions
ahead of time and drops expired ones").

Every ``interval_seconds`` (and once before it reports started), :func:`maintain`:

* makes the partitions of ``checks`` from one partition back to ``partitions_ahead``
  partitions ahead of now (``StoreSettings.partition_seconds`` wide: a day);
* drops every partition whose rows are all older than ``check_retention_days``: first
  ``DETACH PARTITION ... CONCURRENTLY`` (inserts into the other partitions go on), then
  ``DROP TABLE``. Checks are never deleted row by row, except with their monitor;
* deletes rollup rows older than ``rollup_retention_days`` (hourly, per region, and the
  daily seconds of the days they fill) and the logs of status moves
  of that age (monitors' ``status_changes``, heartbeats' ``heartbeat_moves``), keeping
  each resource's last move before the cutoff (the status an availability range starts
  with);
* deletes events older than ``event_retention_days`` (docs/incidents.md, Events: 30 days) with
  their webhook deliveries, and heartbeats' pings older than ``ping_retention_days``, in
  bulk (:func:`purge_before`);
* forgets the nodes stopped or expired for ``node_retention_days``
  (:func:`store.leases.prune_nodes`; docs/several-nodes.md, Operations);
* keeps every maintenance window's occurrences written
  ``store.windows.HORIZON_SECONDS`` (35 days) ahead (:func:`store.windows.extend_horizons`,
  a few hundred windows per transaction; docs/maintenance.md), and deletes occurrences
  that ended before the rollups' retention (availability reads nothing older);
* deletes the shift reminders (and their notifications) of shifts that started before
  ``event_retention_days`` (docs/on-call.md, "Shift reminders").

A failure (the database away) is logged and tried again at the next round; the actor
never crashes the service for it.

Once across the cluster (docs/several-nodes.md): several services on one database each run
this actor, but a round is done only by the holder of the ``maintenance`` job lease
(:func:`claim_job`, table ``job_leases``): the first node to claim it holds it for two
intervals and renews it at each of its rounds; the others skip their rounds while it is
held, and take it over once its holder has missed two rounds (stopped, killed, cut off).
Everything a round does is idempotent anyway (partition creation is serialised by an
advisory lock), so a round run twice at a hand-over costs time, not correctness; and the
store actor makes a partition a batch needs itself, so a node that does not hold the
lease never waits for one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog
import trio

from . import windows
from .checks import ensure_partitions
from .database import Connection, Database
from .errors import StoreError
from .events import RETENTION_DAYS
from .leases import prune_nodes

__all__ = [
    "MAINTENANCE_JOB",
    "MaintenanceReport",
    "MaintenanceSettings",
    "claim_job",
    "maintain",
    "purge_before",
    "run_maintenance",
]

log = structlog.get_logger("uptrio.store")

DAY_SECONDS = 86_400

MAINTENANCE_JOB = "maintenance"
"""The job lease a maintenance round needs (table ``job_leases``)."""


async def claim_job(connection: Connection, job: str, holder: str, hold_seconds: float) -> bool:
    """Claim or renew the lease on ``job`` for ``holder`` (a node's name) for
    ``hold_seconds`` from now on the database's clock; True when ``holder`` now holds it,
    False when another holder's lease has not expired (docs/several-nodes.md: work done once,
    by whichever node claims it). One statement: two nodes claiming at once cannot both
    win (the row's lock orders them).

    Raises:
        asyncpg errors, translated by the caller's :class:`store.Database` bridge.
    """
    row = await connection.fetchval(
        "INSERT INTO job_leases AS l (job, holder, expires_at) "
        "VALUES ($1, $2, extract(epoch FROM clock_timestamp()) + $3) "
        "ON CONFLICT (job) DO UPDATE SET holder = excluded.holder, "
        "expires_at = excluded.expires_at "
        "WHERE l.holder = excluded.holder "
        "OR l.expires_at <= extract(epoch FROM clock_timestamp()) "
        "RETURNING true",
        job,
        holder,
        hold_seconds,
    )
    return bool(row)


@dataclass(frozen=True, slots=True, kw_only=True)
class MaintenanceSettings:
    """Retention and the maintenance round (``uptrio serve`` flags).

    Attributes:
        check_retention_days: raw checks are kept at least this many days
            (``--check-retention-days``, default 30, at least 1; docs/history.md).
        rollup_retention_days: rollups and the log of status moves are kept this many days
            (``--rollup-retention-days``, default 400).
        event_retention_days: events (and their deliveries) are kept this many days
            (default 30, docs/incidents.md, Events).
        ping_retention_days: heartbeats' pings are kept this many days
            (``--ping-retention-days``, default 30, as checks; docs/checks.md says
            "recent pings"; the per-key rate limit bounds how many a day can hold).
        node_retention_days: a node stopped or expired (not renewing) this many days is
            taken off ``uptrio nodes list`` (default 3).
        partitions_ahead: partitions made ahead of now (default 3).
        interval_seconds: seconds between two rounds (default 600).
    """

    check_retention_days: int = 30
    rollup_retention_days: int = 400
    event_retention_days: int = RETENTION_DAYS
    ping_retention_days: int = 30
    node_retention_days: int = 3
    partitions_ahead: int = 3
    interval_seconds: float = 600.0


@dataclass(frozen=True, slots=True)
class MaintenanceReport:
    """What one round did: partitions dropped (names), rows deleted, nodes forgotten
    (names)."""

    dropped_partitions: list[str]
    rollups_deleted: int
    status_moves_deleted: int
    events_deleted: int = 0
    pings_deleted: int = 0
    nodes_forgotten: list[str] = field(default_factory=list)
    windows_extended: int = 0


async def _expired_partitions(connection: Connection, cutoff: int) -> list[str]:
    rows = await connection.fetch(
        "SELECT name FROM check_partition_bounds() WHERE range_to <= $1 ORDER BY range_from",
        cutoff,
    )
    return [str(r["name"]) for r in rows]


async def _detach(connection: Connection, name: str) -> None:
    # Outside a transaction block (CONCURRENTLY); the name comes from the catalogue.
    await connection.execute(f'ALTER TABLE checks DETACH PARTITION "{name}" CONCURRENTLY')


async def _drop(connection: Connection, name: str) -> None:
    await connection.execute(f'DROP TABLE IF EXISTS "{name}"')


_MOVE_LOGS = (
    ("status_changes", ("monitor_id",)),
    ("heartbeat_moves", ("heartbeat_id",)),
    ("region_moves", ("monitor_id", "region")),
)
"""The logs of status moves (``(table, the columns of one resource's log)``): monitors',
heartbeats', and the region views' of monitors with regions (docs/regions.md)."""


_PURGE_ROLLUPS = (
    "WITH gone AS (DELETE FROM check_rollups WHERE hour + 3600 <= $1 "
    "RETURNING monitor_id, hour, up_seconds, down_seconds, paused_seconds), "
    "kept AS (UPDATE daily_rollups d SET up_seconds = d.up_seconds - g.up, "
    "down_seconds = d.down_seconds - g.down, paused_seconds = d.paused_seconds - g.paused "
    "FROM (SELECT monitor_id, hour - hour % 86400 AS day, sum(up_seconds)::int AS up, "
    "sum(down_seconds)::int AS down, sum(paused_seconds)::int AS paused FROM gone "
    "GROUP BY 1, 2) AS g WHERE d.monitor_id = g.monitor_id AND d.day = g.day "
    "AND d.day + 86400 > $1), "
    "days AS (DELETE FROM daily_rollups WHERE day + 86400 <= $1) "
    "SELECT count(*) FROM gone"
)
"""The hourly rollups older than the cutoff ($1, epoch seconds) and the daily seconds of
the days they fill (``store.rollups``, Daily seconds): a whole day's row goes, and a day
the cutoff cuts keeps the sum of its hours that stay, so a status page reads the same from
either."""


async def _purge(connection: Connection, rollup_cutoff: int) -> tuple[int, int]:
    rollups = int(await connection.fetchval(_PURGE_ROLLUPS, rollup_cutoff))
    status = await connection.execute(
        "DELETE FROM region_rollups WHERE hour + 3600 <= $1", rollup_cutoff
    )
    rollups += int(status.rsplit(" ", 1)[-1])
    moves = 0
    for table, columns in _MOVE_LOGS:
        same = " AND ".join(f"n.{column} = s.{column}" for column in columns)
        status = await connection.execute(
            f"DELETE FROM {table} s WHERE s.created < $1 AND EXISTS ("
            f"SELECT 1 FROM {table} n WHERE {same} "
            "AND n.created < $1 AND (n.created, n.seq) > (s.created, s.seq))",
            rollup_cutoff,
        )
        moves += int(status.rsplit(" ", 1)[-1])
    return rollups, moves


async def _purge_occurrences(connection: Connection, cutoff: int) -> None:
    await connection.execute(
        "DELETE FROM maintenance_occurrences WHERE ends_at < $1 AND end_handled", cutoff
    )


async def _purge_reminders(connection: Connection, cutoff: int) -> None:
    await connection.execute(
        "DELETE FROM shift_reminders WHERE starts_at < $1 AND status <> 'planned'", cutoff
    )


async def purge_before(
    connection: Connection, table: str, cutoff: int, *, batch: int = 10_000
) -> int:
    """Delete the rows of ``table`` (``events`` or ``pings``: from code, never from a
    request) created before ``cutoff`` (epoch seconds), ``batch`` rows per statement so
    no transaction holds many locks (an event's deliveries go with it: foreign key ``ON
    DELETE CASCADE``). Returns the number deleted."""
    total = 0
    while True:
        status = await connection.execute(
            f"DELETE FROM {table} WHERE seq IN (SELECT seq FROM {table} WHERE created < $1 "
            f"LIMIT {int(batch)})",
            cutoff,
        )
        deleted = int(status.rsplit(" ", 1)[-1])
        total += deleted
        if deleted < batch:
            return total


async def maintain(
    db: Database, settings: MaintenanceSettings, *, partition_seconds: int, now: int
) -> MaintenanceReport:
    """One round at ``now`` (epoch seconds); see the module docstring.

    Raises:
        store.StoreError: the database failed (``DatabaseUnavailable`` when away).
    """
    width = partition_seconds
    await db.run(ensure_partitions, now - width, now + settings.partitions_ahead * width, width)
    cutoff = now - int(settings.check_retention_days * DAY_SECONDS)
    dropped = []
    for name in await db.run(_expired_partitions, cutoff):
        started = time.perf_counter()
        await db.run(_detach, name)
        await db.run(_drop, name)
        dropped.append(name)
        log.info(
            "check partition dropped",
            partition=name,
            seconds=round(time.perf_counter() - started, 3),
        )
    rollup_cutoff = now - int(settings.rollup_retention_days * DAY_SECONDS)
    rollups, moves = await db.run(_purge, rollup_cutoff)
    events = await db.run(
        purge_before, "events", now - int(settings.event_retention_days * DAY_SECONDS)
    )
    pings = await db.run(
        purge_before, "pings", now - int(settings.ping_retention_days * DAY_SECONDS)
    )
    nodes = await db.transaction(prune_nodes, settings.node_retention_days * DAY_SECONDS)
    extended = 0
    while step := await db.transaction(windows.extend_horizons, now):
        extended += step
    await db.run(_purge_occurrences, rollup_cutoff)
    await db.run(_purge_reminders, now - int(settings.event_retention_days * DAY_SECONDS))
    return MaintenanceReport(dropped, rollups, moves, events, pings, nodes, extended)


async def run_maintenance(
    db: Database,
    settings: MaintenanceSettings,
    *,
    partition_seconds: int,
    holder: str,
    clock: Callable[[], float] = time.time,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Report started, run :func:`maintain` now and then every ``interval_seconds`` until
    cancelled, each round only while ``holder`` (this node's name) holds the
    :data:`MAINTENANCE_JOB` lease (claimed for two intervals; see the module docstring).
    ``clock`` is wall-clock epoch seconds (tests move it). A round that fails is logged
    and the next one tries again; nothing but a bug escapes. It reports started at once,
    so a database that hangs at start-up does not hold the service's start (the store
    actor makes a partition a batch needs if this has not yet)."""
    task_status.started()
    while True:
        try:
            if not await db.run(claim_job, MAINTENANCE_JOB, holder, 2 * settings.interval_seconds):
                log.debug("maintenance round skipped: another node holds it")
                await trio.sleep(settings.interval_seconds)
                continue
            report = await maintain(
                db, settings, partition_seconds=partition_seconds, now=int(clock())
            )
            if (
                report.rollups_deleted
                or report.status_moves_deleted
                or report.events_deleted
                or report.pings_deleted
            ):
                log.info(
                    "history purged",
                    rollups=report.rollups_deleted,
                    status_moves=report.status_moves_deleted,
                    events=report.events_deleted,
                    pings=report.pings_deleted,
                )
            if report.nodes_forgotten:
                log.info("stopped nodes forgotten", nodes=report.nodes_forgotten)
            if report.windows_extended:
                log.info("maintenance occurrences written ahead", windows=report.windows_extended)
        except StoreError as exc:
            log.warning("maintenance round failed; next round tries again", error=str(exc))
        await trio.sleep(settings.interval_seconds)
