"""What a monitor's status move causes, in the store actor's batch transaction
(extensions parts 1 and 3; DESIGN: "the batch that writes a down also opens the incident
and writes monitor.down and incident.created").

:func:`apply_moves` takes the status moves the batch has just applied (the rows
``store.checks.write_check_batch`` logged in ``status_changes``) and, on the same
connection and in the same transaction:

* writes ``monitor.down`` for each move into ``down`` and ``monitor.up`` for each move into
  ``up``, the monitor's snapshot showing the status it moved to;
* for a move into ``down`` of a monitor with ``auto_incidents`` and no open incident it
  opened: opens one (title ``"<name> is down"``, the failing check's error in the
  description, status ``investigating``, the monitor's ``incident_severity``, ``monitor``
  and ``monitors`` naming it), its first timeline entry, and ``incident.created``;
* for a move into ``up``: resolves every open incident the monitor opened (``resolved_at``
  the move's time, ``resolution_message`` ``"<name> is up again after <duration>"``), with
  a timeline entry and ``incident.resolved``. An incident resolved by hand is not open,
  so it is left alone, and the next move into ``down`` opens a new one.

Several moves of one monitor in one batch (a flapping target with a short interval) are
applied in their order, one round per rank, so a down then an up in one batch opens and
resolves one incident. A batch without moves costs nothing here.
"""

from __future__ import annotations

from collections.abc import Sequence

from .database import Connection

# One round: $1..$5 are the moves of this rank (at most one per monitor). Data-modifying
# CTEs see the same snapshot, so `prior` locks and reads the incidents `resolved` changes.
_ROUND = """
WITH mv AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[])
        AS u(monitor_id, check_id, from_status, to_status, created)),
mon AS (
    SELECT mv.*, m.account_id, m.name, m.auto_incidents, m.incident_severity,
           to_jsonb(m) || jsonb_build_object('status', mv.to_status, 'updated', mv.created,
               'last_checked_at', mv.created) AS snapshot
    FROM mv JOIN monitors m ON m.id = mv.monitor_id),
opened AS (
    INSERT INTO incidents AS i (id, account_id, title, description, status, severity,
                                created, updated, monitor_id, monitors)
    SELECT new_id('inc'), mon.account_id, left(mon.name || ' is down', 200),
           'Check ' || mon.check_id || ' failed: ' || coalesce(c.error_code, 'unknown')
               || coalesce(' (' || c.error_message || ')', ''),
           'investigating', mon.incident_severity, mon.created, mon.created,
           mon.monitor_id, ARRAY[mon.monitor_id]
    FROM mon LEFT JOIN checks c
        ON c.monitor_id = mon.monitor_id AND c.created = mon.created AND c.id = mon.check_id
    WHERE mon.to_status = 'down' AND mon.auto_incidents AND NOT EXISTS (
        SELECT 1 FROM incidents o WHERE o.monitor_id = mon.monitor_id AND o.resolved_at IS NULL)
    RETURNING i.*),
prior AS (
    SELECT i.id, i.status, i.resolution_message, mon.created AS at, mon.name
    FROM incidents i JOIN mon ON i.monitor_id = mon.monitor_id
    WHERE mon.to_status = 'up' AND i.resolved_at IS NULL
    FOR UPDATE OF i),
resolved AS (
    UPDATE incidents i SET status = 'resolved', resolved_at = prior.at, updated = prior.at,
        resolution_message = left(prior.name || ' is up again after '
            || human_duration(prior.at - i.created), 10000)
    FROM prior WHERE i.id = prior.id
    RETURNING i.*, prior.status AS old_status, prior.resolution_message AS old_message),
timeline AS (
    INSERT INTO incident_updates (id, account_id, incident_id, status, message, created)
    SELECT new_id('inu'), account_id, id, status, description, created FROM opened
    UNION ALL
    SELECT new_id('inu'), account_id, id, status, resolution_message, resolved_at FROM resolved)
INSERT INTO events (id, account_id, type, resource_id, created, object, previous)
SELECT new_id('evt'), account_id, type, resource_id, created, object, previous FROM (
    SELECT 1 AS ord, account_id, 'monitor.' || to_status AS type, monitor_id AS resource_id,
           created, snapshot AS object, jsonb_build_object('status', from_status) AS previous
    FROM mon WHERE to_status IN ('up', 'down')
    UNION ALL
    SELECT 2, account_id, 'incident.created', id, created, to_jsonb(opened), NULL FROM opened
    UNION ALL
    SELECT 2, account_id, 'incident.resolved', id, resolved_at,
           to_jsonb(resolved) - 'old_status' - 'old_message',
           jsonb_build_object('status', old_status, 'resolved_at', NULL,
                              'resolution_message', old_message)
    FROM resolved) AS e
ORDER BY ord, resource_id
"""


Move = tuple[str, str, str, str, int]
"""``(monitor_id, check_id, from_status, to_status, created)``, ``created`` epoch seconds."""


async def apply_moves(connection: Connection, moves: Sequence[Move]) -> None:
    """Write what ``moves`` cause (module docstring), inside the caller's transaction.

    ``moves`` are ``(monitor_id, check_id, from_status, to_status, created)`` in the order
    they were applied; ``created`` is epoch seconds.
    """
    rounds: list[list[Move]] = []
    seen: dict[str, int] = {}
    for move in moves:
        rank = seen.get(move[0], 0)
        seen[move[0]] = rank + 1
        if rank == len(rounds):
            rounds.append([])
        rounds[rank].append(move)
    for batch in rounds:
        await connection.execute(_ROUND, *(list(column) for column in zip(*batch, strict=True)))
