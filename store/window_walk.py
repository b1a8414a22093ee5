"""The walk of maintenance occurrences' starts and ends (docs/maintenance.md, "When a window
starts and ends"): a window's start and end are rows, acted on once by whichever node claims
them first, never by a timer in an actor.

:func:`walk_due` claims, ``FOR UPDATE SKIP LOCKED`` (every node walks; none acts twice),
the occurrences of ``maintenance_occurrences`` (migration 0019) whose start or end has
come and that no node has handled yet (``start_handled``, ``end_handled``: the partial
indexes find them), and in the claiming transaction:

* **a start**: writes ``maintenance.started`` (its ``created`` the occurrence's start, or
  the window's creation if later: a window created already in progress) and, for a
  window with ``pause_checks``, tells every node its resources changed
  (:func:`store.notify.notify_resources`): their actors stop probing until the end;
* **an end** (only after its start): writes ``maintenance.ended`` (``created`` the
  occurrence's end), releases what the window held back (:func:`release_window`) and,
  with ``pause_checks``, tells the nodes again (the actors resume by themselves at the
  end in any case: ``engine.monitor``).

An occurrence that started and ended while no node walked (every node down) gets both
events in one walk, in order. ``end`` cuts an occurrence's row short, so its end comes
due at once; ``cancel`` and a changed schedule delete later rows, which then never come
due; deleting a window releases what it held at once (the API's delete calls
:func:`release_window` in its transaction).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import page_notices
from .alerting import HEARTBEAT_MOVES, MONITOR_MOVES, apply_moves
from .database import Connection
from .events import record_event
from .notify import notify_resources
from .windows import get_window

__all__ = ["END_DESCRIPTION", "release_window", "walk_due"]

END_DESCRIPTION = "Still down when the maintenance window that held its alert back ended."
"""The incident's description of a heartbeat released at a window's end (a monitor's
names its newest failed check)."""

_CLAIM = """
SELECT o.window_id, o.starts_at, o.ends_at, w.account_id, w.created, w.pause_checks
FROM maintenance_occurrences o JOIN maintenance_windows w ON w.id = o.window_id
WHERE NOT o.{flag} AND o.{column} <= $1{also}
ORDER BY o.{column}, o.window_id LIMIT $2
FOR UPDATE OF o SKIP LOCKED
"""

# The monitors a window held back that are still down, locked in id order (the batch's
# release locks the same rows: store.alerting), with the newest check that failed.
_HELD_MONITORS = """
SELECT m.id, c.id AS check_id, c.created AS checked
FROM (SELECT id FROM monitors WHERE id = ANY($1::text[]) AND status = 'down'
      AND suppressed_by = jsonb_build_object('type', 'maintenance', 'id', $2::text)
      ORDER BY id FOR UPDATE) m
CROSS JOIN LATERAL (SELECT c.id, c.created FROM checks c WHERE c.monitor_id = m.id
                    ORDER BY c.created DESC LIMIT 1) c
"""

_HELD_HEARTBEATS = """
SELECT id FROM heartbeats WHERE id = ANY($1::text[]) AND status = 'down'
    AND suppressed_by = jsonb_build_object('type', 'maintenance', 'id', $2::text)
ORDER BY id FOR UPDATE
"""


async def release_window(
    connection: Connection, window_id: str, resource_ids: Sequence[str], at: int
) -> int:
    """Open the incidents and raise the alerts that window ``window_id`` held back, for
    those of ``resource_ids`` still ``down`` with ``suppressed_by`` naming it, as of
    ``at`` (epoch seconds: its occurrence's end, or a delete's instant), inside the
    caller's transaction (docs/maintenance.md, "Alerts held back").

    Each goes through the batch's round (``store.alerting``) as a move from ``down`` to
    ``down`` at ``at``: another window open then, or (a monitor) a monitor it depends on
    still down, holds it back again and ``suppressed_by`` says which; else the round
    opens the incident (its description names the monitor's newest failed check) and
    raises the alert, once: ``suppressed_by`` is cleared in the same transaction, and
    the rows are locked against a batch's release of the same episode. Returns how many
    were released or held again."""
    ids = list(resource_ids)
    monitors = await connection.fetch(_HELD_MONITORS, ids, window_id)
    if monitors:
        await apply_moves(
            connection,
            MONITOR_MOVES,
            [(r["id"], r["check_id"], "down", "down", at) for r in monitors],
            checked=[r["checked"] for r in monitors],
        )
    heartbeats = await connection.fetch(_HELD_HEARTBEATS, ids, window_id)
    if heartbeats:
        await apply_moves(
            connection,
            HEARTBEAT_MOVES,
            [(r["id"], END_DESCRIPTION, "down", "down", at) for r in heartbeats],
        )
    return len(monitors) + len(heartbeats)


async def _event(connection: Connection, row: Any, type: str, at: int) -> list[str]:
    """Write ``type`` about the claimed occurrence's window at ``at``; its resources."""
    record = await get_window(connection, row["account_id"], row["window_id"])
    if record is None:  # deleted meanwhile: the rows went with it
        return []
    await record_event(connection, type=type, record=record, created=at, cause=None)
    kind = type.rpartition(".")[2]
    ends_at = int(row["ends_at"])
    await page_notices.maintenance_notice(connection, record, kind, row["starts_at"], ends_at, at)
    return record.monitors


async def _handled(connection: Connection, flag: str, rows: Sequence[Any]) -> None:
    """Mark the claimed occurrences ``rows`` acted on: ``flag`` (``start_handled`` or
    ``end_handled``, from code) set, in the claiming transaction."""
    if rows:
        await connection.execute(
            f"UPDATE maintenance_occurrences o SET {flag} = true "
            "FROM unnest($1::text[], $2::bigint[]) AS d(window_id, starts_at) "
            "WHERE o.window_id = d.window_id AND o.starts_at = d.starts_at",
            [r["window_id"] for r in rows],
            [r["starts_at"] for r in rows],
        )


async def walk_due(connection: Connection, now: int, limit: int) -> int:
    """Act on up to ``limit`` starts and ``limit`` ends of occurrences due at ``now``
    (epoch seconds), as the module docstring says. Must run in a transaction. Returns how
    many starts and ends it handled (fewer than ``limit`` of each: nothing more is due)."""
    handled = 0
    starts = await connection.fetch(
        _CLAIM.format(flag="start_handled", column="starts_at", also=""), now, limit
    )
    for row in starts:
        at = max(int(row["starts_at"]), int(row["created"]))
        resources = await _event(connection, row, "maintenance.started", at)
        if row["pause_checks"]:
            await notify_resources(connection, resources)
    await _handled(connection, "start_handled", starts)
    ends = await connection.fetch(
        _CLAIM.format(flag="end_handled", column="ends_at", also=" AND o.start_handled"),
        now,
        limit,
    )
    for row in ends:
        at = int(row["ends_at"])
        resources = await _event(connection, row, "maintenance.ended", at)
        await release_window(connection, row["window_id"], resources, at)
        if row["pause_checks"]:
            await notify_resources(connection, resources)
    await _handled(connection, "end_handled", ends)
    handled += len(starts) + len(ends)
    return handled
