"""What a status move of a monitor or a heartbeat causes, in the store actor's batch
transaction (docs/incidents.md, Incidents opened by monitors, and docs/heartbeats.md: "the
batch that writes a down also opens the incident and writes monitor.down and
incident.created").

:func:`apply_moves` takes the status moves the batch has just applied (for monitors the
rows ``store.checks.write_check_batch`` logged in ``status_changes``; for heartbeats
those ``store.pings.write_ping_batch`` logged in ``heartbeat_moves``) and, on the same
connection and in the same transaction:

* writes ``<kind>.down`` for each move into ``down`` and ``<kind>.up`` for each move into
  ``up`` (``monitor.*`` or ``heartbeat.*``), the resource's snapshot showing the status it
  moved to;
* for a move into ``down`` of a resource with ``auto_incidents`` and no open incident it
  opened: opens one (title ``"<name> is down"``, a description saying why, status
  ``investigating``, the resource's ``incident_severity``, ``monitor`` and ``monitors``
  naming its id: a ``mon_`` or an ``hbt_`` id), its first timeline entry, and
  ``incident.created``;
* for a move into ``up``: resolves every open incident the resource opened
  (``resolved_at`` the move's time, ``resolution_message`` ``"<name> is up again after
  <duration>"``), with a timeline entry and ``incident.resolved``. An incident resolved
  by hand is not open, so it is left alone, and the next move into ``down`` opens a new
  one;
* raises and resolves alerts (docs/alerts.md; the SQL is :mod:`store.alerts`'s): a move
  into ``down`` of a resource with an escalation policy (its own, else the account's
  default) and no open alert raises one (``"<name> is down: <error>"``, the error of the
  failing check or the heartbeat's reason, the episode's incident) with
  ``alert.triggered``, and, when the policy's first step waits 0 s, writes that step's
  notifications too; a move into ``up`` resolves the open alert (pending pages
  cancelled, acknowledge links dead, ``resolved`` notices, ``alert.resolved``);
* writes the mails of status page subscribers about the incidents it opened and resolved
  (``store.page_notices.ENGINE_NOTICES_CTE``; docs/status-pages.md, "Subscribers");
* holds back the incident and the alert of a move into ``down`` at an instant inside an
  open occurrence of a maintenance window with ``suppress_alerts`` covering the resource
  (docs/maintenance.md, "Alerts held back"; the window is read in the round's own
  statement, :func:`store.coverage.open_windows_sql`), and of a monitor's move into
  ``down`` while a monitor of its ``depends_on`` is ``down`` (docs/incidents.md,
  "Dependencies"); the window first, when both apply: the move and its ``<kind>.down``
  event are written, the event's snapshot and the resource's ``suppressed_by`` column
  saying ``{"type": "maintenance", "id": "mnt_…"}`` or ``{"type": "dependency", "id":
  "mon_…"}``; a later batch's failure of it (a monitor's failed check, a heartbeat's
  ``/fail`` ping), once neither holds it back any more, opens them (:func:`release_held`).

The timeline entries written here carry the resource's id in ``generated_by`` (migration
0015): their texts hold its private name, so a public status page builds its own from the
component's display name (docs/status-pages.md, Incidents a monitor or a heartbeat opened).

The rules are written once (:data:`_ROUND`); what differs between monitors and
heartbeats is only where a move's resource is read and how the description of the
incident is made (:class:`MoveSource`: :data:`MONITOR_MOVES`, :data:`HEARTBEAT_MOVES`).

Several moves of one resource in one batch (a flapping target with a short interval) are
applied in their order, one round per rank, so a down then an up in one batch opens and
resolves one incident. A batch without moves costs nothing here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from . import alerts, page_notices, quorum
from .coverage import in_maintenance_sql, open_windows_sql
from .database import Connection

# One round: $1..$6 are the moves of this rank (at most one per resource; `checked`: when
# the failure behind it was seen, the move's own instant but for a release at a window's
# end). The source
# (MoveSource.resources) reads, per move: the account, name, auto_incidents,
# incident_severity, the snapshot as the resource shows right after the move, and the
# description of an incident the move would open. Data-modifying CTEs see the same
# snapshot, so `prior` locks and reads the incidents `resolved` changes.
_ROUND = """
WITH mv AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[],
                         $6::bigint[])
        AS u(resource_id, detail, from_status, to_status, created, checked)),
mon AS ({resources}),
opened AS (
    INSERT INTO incidents AS i (id, account_id, title, description, status, severity,
                                created, updated, monitor_id, monitors)
    SELECT new_id('inc'), mon.account_id, left(mon.name || ' is down', 200),
           left(mon.description, 10000), 'investigating', mon.incident_severity,
           mon.created, mon.created, mon.resource_id, ARRAY[mon.resource_id]
    FROM mon
    WHERE mon.to_status = 'down' AND mon.auto_incidents AND mon.suppressed_by IS NULL
        AND NOT EXISTS (
        SELECT 1 FROM incidents o WHERE o.monitor_id = mon.resource_id AND o.resolved_at IS NULL)
    RETURNING i.*),
prior AS (
    SELECT i.id, i.status, i.resolution_message, mon.created AS at, mon.name
    FROM incidents i JOIN mon ON i.monitor_id = mon.resource_id
    WHERE mon.to_status = 'up' AND i.resolved_at IS NULL
    FOR UPDATE OF i),
resolved AS (
    UPDATE incidents i SET status = 'resolved', resolved_at = prior.at, updated = prior.at,
        resolution_message = left(prior.name || ' is up again after '
            || human_duration(prior.at - i.created), 10000)
    FROM prior WHERE i.id = prior.id
    RETURNING i.*, prior.status AS old_status, prior.resolution_message AS old_message),
timeline AS (
    INSERT INTO incident_updates (id, account_id, incident_id, status, message, created,
                                  generated_by)
    SELECT new_id('inu'), account_id, id, status, description, created, monitor_id
    FROM opened
    UNION ALL
    SELECT new_id('inu'), account_id, id, status, resolution_message, resolved_at, monitor_id
    FROM resolved),
alert_closing AS (
    SELECT a.id, a.status AS old_status, mon.created AS at
    FROM alerts a JOIN mon ON a.resource_id = mon.resource_id
    WHERE mon.to_status = 'up' AND a.status <> 'resolved'
    FOR UPDATE OF a),
{resolve_alerts},
{raise_alert},
{remember},
{page_mailed},
written AS (
INSERT INTO events (id, account_id, type, resource_id, created, object, previous)
SELECT new_id('evt'), account_id, type, resource_id, created, object, previous FROM (
    SELECT 1 AS ord, account_id, '{kind}.' || to_status AS type, resource_id,
           created, snapshot AS object, jsonb_build_object('status', from_status) AS previous
    FROM mon WHERE to_status IN ('up', 'down') AND from_status <> to_status
    UNION ALL
    SELECT 2, account_id, 'incident.created', id, created, to_jsonb(opened), NULL FROM opened
    UNION ALL
    SELECT 2, account_id, 'incident.resolved', id, resolved_at,
           to_jsonb(resolved) - 'old_status' - 'old_message',
           jsonb_build_object('status', old_status, 'resolved_at', NULL,
                              'resolution_message', old_message)
    FROM resolved
    UNION ALL
    SELECT 3, account_id, 'alert.triggered', id, created, to_jsonb(alert_raised) - 'seq', NULL
    FROM alert_raised
    UNION ALL
    SELECT 3, r.* FROM ({resolved_events}) r) AS e
ORDER BY ord, resource_id)
SELECT id, triggered_at FROM alert_raised WHERE next_step_at <= triggered_at
"""


@dataclass(frozen=True, slots=True)
class MoveSource:
    """Where the moves of one kind of resource are read.

    Attributes:
        kind: the event family, ``monitor`` or ``heartbeat``.
        table: the resources' table (its ``suppressed_by`` column remembers why a down
            episode is held back: migrations 0020 and 0021).
        resources: a ``SELECT`` over ``mv`` (the moves) returning ``mv.*`` and
            ``account_id, name, auto_incidents, incident_severity, escalation_policy,
            error, suppressed_by, snapshot, description`` per move (SQL from code, never
            from a request). ``suppressed_by`` (jsonb, or NULL) holds back the incident
            and the alert of a move into ``down``.
    """

    kind: str
    table: str
    resources: str

    @property
    def remember(self) -> str:
        """A CTE named ``remembered`` storing each moved resource's ``suppressed_by``."""
        return f"""remembered AS (
    UPDATE {self.table} t SET suppressed_by = mon.suppressed_by FROM mon
    WHERE t.id = mon.resource_id AND t.suppressed_by IS DISTINCT FROM mon.suppressed_by)"""

    @property
    def sql(self) -> str:
        """The round's statement for this source."""
        return _ROUND.format(
            resources=self.resources,
            kind=self.kind,
            resolve_alerts=alerts.RESOLVE_CTES,
            raise_alert=alerts.RAISE_CTE,
            remember=self.remember,
            resolved_events=alerts.RESOLVED_EVENTS,
            page_mailed=page_notices.ENGINE_NOTICES_CTE,
        )


# Per move into down: the window with suppress_alerts open at the move's instant that
# covers the resource (store.windows; read in the round's own snapshot, so a window and a
# move written at once never race), as a suppressed_by, or NULL.
_IN_WINDOW = f"""
    LEFT JOIN LATERAL (
        SELECT jsonb_build_object('type', 'maintenance', 'id', w.window_id) AS suppressed_by
        FROM ({open_windows_sql("ARRAY[mv.resource_id]", "mv.created")}) w
        WHERE mv.to_status = 'down') mw ON true"""

MONITOR_MOVES = MoveSource(
    kind="monitor",
    table="monitors",
    # detail: the id of the check that caused the move; a down's description names its
    # error (the check is in the same batch, so it is read by its key). A move into down
    # is suppressed by a maintenance window covering it (_IN_WINDOW), else by the first
    # monitor of its depends_on that is down now (the batch has already written every
    # status it moves): the window wins, as the one a person planned.
    #
    # A monitor with regions (store.quorum) names the regions that see it down, in the
    # description ("Down in eu-west, us-east (2 of 3). Check ..."), the alert's error
    # ("down in eu-west, us-east (2 of 3): <error>") and the event's region_status.
    resources=f"""
    SELECT mv.*, m.account_id, m.name, m.auto_incidents, m.incident_severity,
           m.escalation_policy,
           CASE WHEN q.seen IS NULL THEN coalesce(c.error_message, c.error_code)
               ELSE 'down in ' || q.seen
                   || coalesce(': ' || coalesce(c.error_message, c.error_code), '')
           END AS error,
           coalesce(mw.suppressed_by, s.suppressed_by) AS suppressed_by,
           to_jsonb(m) || jsonb_build_object('status', mv.to_status, 'updated', mv.created,
               'last_checked_at', mv.created,
               'suppressed_by', coalesce(mw.suppressed_by, s.suppressed_by),
               'in_maintenance', {in_maintenance_sql("m.id", "mv.created")},
               'region_status', {quorum.region_status_sql("m", "mv.created")}) AS snapshot,
           coalesce('Down in ' || q.seen || '. ', '')
               || 'Check ' || mv.detail || ' failed: ' || coalesce(c.error_code, 'unknown')
               || coalesce(' (' || c.error_message || ')', '') AS description
    FROM mv JOIN monitors m ON m.id = mv.resource_id
    LEFT JOIN LATERAL (SELECT {quorum.seen_down_sql("m", "mv.created")} AS seen
        WHERE mv.to_status = 'down' AND m.regions IS NOT NULL) q ON true
    LEFT JOIN checks c ON mv.to_status = 'down' AND c.monitor_id = mv.resource_id
        AND c.created = mv.checked AND c.id = mv.detail{_IN_WINDOW}
    LEFT JOIN LATERAL (
        SELECT jsonb_build_object('type', 'dependency', 'id', p.id) AS suppressed_by
        FROM unnest(m.depends_on) WITH ORDINALITY AS d(id, n)
        JOIN monitors p ON p.id = d.id AND p.account_id = m.account_id AND p.status = 'down'
        WHERE mv.to_status = 'down' AND mw.suppressed_by IS NULL
        ORDER BY d.n LIMIT 1) s ON true""",
)
"""Monitors' moves (``store.checks``): ``detail`` is the check that caused the move."""

HEARTBEAT_MOVES = MoveSource(
    kind="heartbeat",
    table="heartbeats",
    # detail: the description itself (the engine knows why: a deadline or a /fail).
    # Heartbeats have no dependencies: only a maintenance window holds them back.
    resources=f"""
    SELECT mv.*, h.account_id, h.name, h.auto_incidents, h.incident_severity,
           h.escalation_policy, mv.detail AS error, mw.suppressed_by,
           to_jsonb(h) || jsonb_build_object('status', mv.to_status, 'updated', mv.created,
               'suppressed_by', mw.suppressed_by,
               'in_maintenance', {in_maintenance_sql("h.id", "mv.created")}) AS snapshot,
           mv.detail AS description
    FROM mv JOIN heartbeats h ON h.id = mv.resource_id{_IN_WINDOW}""",
)
"""Heartbeats' moves (``store.pings``): ``detail`` is the incident's description."""


Move = tuple[str, str, str, str, int]
"""``(resource_id, detail, from_status, to_status, created)``, ``created`` epoch seconds;
``detail`` as the :class:`MoveSource` says."""


async def apply_moves(
    connection: Connection,
    source: MoveSource,
    moves: Sequence[Move],
    *,
    checked: Sequence[int] | None = None,
) -> None:
    """Write what ``moves`` of ``source``'s resources cause (module docstring), inside the
    caller's transaction.

    ``moves`` are ``(resource_id, detail, from_status, to_status, created)`` in the order
    they were applied; ``created`` is epoch seconds. ``checked`` (one per move, epoch
    seconds; default each move's ``created``) is when a monitor's failed check named by
    ``detail`` was stored, where that is earlier than the move (a release at a window's
    end: ``store.window_walk``).
    """
    rounds: list[list[tuple[str, str, str, str, int, int]]] = []
    seen: dict[str, int] = {}
    times = [move[4] for move in moves] if checked is None else checked
    for move, at in zip(moves, times, strict=True):
        rank = seen.get(move[0], 0)
        seen[move[0]] = rank + 1
        if rank == len(rounds):
            rounds.append([])
        rounds[rank].append((*move, at))
    statement = source.sql
    for batch in rounds:
        ups = [move[0] for move in batch if move[3] == "up"]
        if ups:
            # Lock the open alerts first: the round's statement then reads with a snapshot
            # taken after a walk in flight committed, so it cancels the pages that walk wrote.
            await connection.execute(alerts.LOCK_OPEN, ups)
        raised = await connection.fetch(
            statement, *(list(column) for column in zip(*batch, strict=True))
        )
        due: dict[int, list[str]] = {}
        for row in raised:
            due.setdefault(row["triggered_at"], []).append(row["id"])
        for at, alert_ids in due.items():
            await alerts.walk_alerts(connection, alert_ids, at)


# The held-back down episodes a batch's failures may release: per resource of the source's
# table still down and suppressed by a window or a dependency (and not moved by this
# batch: its round decided), its newest failure of the batch.
# The rows are locked (in id order), so a release by the walk of a window's end
# (store.window_walk) and this one never both open an incident: the later waits, then
# finds suppressed_by cleared.
_HELD = """
WITH held AS (
    SELECT r.id, r.suppressed_by FROM {table} r
    WHERE r.id = ANY($1::text[]) AND r.suppressed_by IS NOT NULL AND r.status = 'down'
        AND NOT r.id = ANY($4::text[])
    ORDER BY r.id FOR UPDATE)
SELECT DISTINCT ON (held.id) held.id, c.detail, c.created
FROM held JOIN unnest($1::text[], $2::text[], $3::bigint[]) AS c(resource_id, detail, created)
    ON c.resource_id = held.id
WHERE NOT EXISTS (  -- the window that holds it still covers it then: nothing to decide
    SELECT 1 FROM maintenance_window_resources w
    JOIN maintenance_occurrences o ON o.window_id = w.window_id
        AND o.starts_at <= c.created AND o.ends_at > c.created
    WHERE held.suppressed_by ->> 'type' = 'maintenance'
        AND w.window_id = held.suppressed_by ->> 'id' AND w.resource_id = held.id)
ORDER BY held.id, c.created DESC
"""


async def release_held(
    connection: Connection,
    source: MoveSource,
    failures: Sequence[tuple[str, str, int]],
    moved: Sequence[str],
) -> None:
    """Open the incident and raise the alert a maintenance window or a dependency held
    back, once no window with ``suppress_alerts`` covers the resource at its failure and
    (a monitor) no monitor it depends on is down (docs/maintenance.md, "Alerts held
    back"; docs/incidents.md, "Dependencies"), inside the batch's transaction.

    ``failures`` are the batch's failures of ``source``'s resources ``(resource_id,
    detail, created)`` (``created`` epoch seconds; ``detail`` as the source's moves have
    it: a monitor's failed check's id, a heartbeat's ``/fail`` ping's description),
    ``moved`` the resources the batch moved (their rounds decided already). Each one
    still ``down`` with a ``suppressed_by`` goes through the round again as a move from
    ``down`` to ``down`` at its newest failure: in a window then, or with a parent still
    down, it stays suppressed (``suppressed_by`` naming that window or parent); else the
    round opens its incident and raises its alert (their ``incident.created`` and
    ``alert.triggered`` events, no second ``<kind>.down``) and clears ``suppressed_by``,
    so it happens once. A batch without failures costs nothing here; one with some, one
    indexed query, and a round only for the held resources that may be released: one
    whose window still covers it at its failure is left alone there (a monitor that
    stays down through a long window costs no round per check).
    """
    if not failures:
        return
    if not connection.is_in_transaction():
        # a batch of one statement (no moves, no fence): the rows stay locked until what
        # they release is written, in a transaction of its own
        async with connection.transaction():
            await release_held(connection, source, failures, moved)
        return
    held = await connection.fetch(
        _HELD.format(table=source.table),
        *(list(c) for c in zip(*failures, strict=True)),
        list(moved),
    )
    if held:
        await apply_moves(
            connection,
            source,
            [(r["id"], r["detail"], "down", "down", r["created"]) for r in held],
        )
