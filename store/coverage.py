"""Which resources a maintenance window covers at an instant (docs/maintenance.md;
asyncio side): the question the batch asks before it opens an incident or raises an
alert, what a monitor or a heartbeat shows as ``in_maintenance``, and until when its
checks are paused.

**Is a resource in a window at t** (:func:`open_windows_sql`, :func:`suppressing`): its
windows by the index on ``maintenance_window_resources (resource_id)``, then each
window's first occurrence ending after t by ``maintenance_occurrences (window_id,
ends_at, starts_at)``: one index row per window. That first row is the open one if any
is, since a window's occurrences end in the order they start (one duration; ``end``
cuts every open one to the same instant). The scalar forms
(:func:`in_maintenance_sql`, :func:`paused_until_sql`) ask the same of one resource, for
the records' reads (``store.monitors``, ``store.heartbeats``): a resource in no window
costs one index probe.

Engines learn that a pause starts or ends through the change notification
(:func:`store.notify.notify_resources`), which the occurrence walk
(``store.window_walk``) and every API write of a window with ``pause_checks`` send in
their own transaction.
"""

from __future__ import annotations

from collections.abc import Sequence

from .database import Connection
from .windows import EFFECTS

__all__ = [
    "in_maintenance_sql",
    "open_windows",
    "open_windows_sql",
    "paused_until_sql",
    "suppressing",
]

NOW_SQL = "floor(extract(epoch FROM now()))::bigint"
"""The transaction's instant as SQL epoch seconds: what a record's read calls "now"."""


def _covering(resource: str, at: str, effect: str | None) -> str:
    """The ``FROM``/``WHERE`` of the occurrences open at ``at`` (SQL epoch seconds)
    covering ``resource`` (a SQL text expression), of windows with ``effect`` (None:
    any); both from code, never from a request."""
    having = "" if effect is None else f" AND w.{effect}"
    return (
        "FROM maintenance_window_resources r "
        f"JOIN maintenance_windows w ON w.id = r.window_id{having} "
        "JOIN maintenance_occurrences o ON o.window_id = r.window_id "
        f"AND o.ends_at > ({at})::bigint AND o.starts_at <= ({at})::bigint "
        f"WHERE r.resource_id = {resource}"
    )


def in_maintenance_sql(resource: str, at: str = NOW_SQL) -> str:
    """A SQL boolean: an occurrence of any window open at ``at`` (SQL epoch seconds;
    default the transaction's instant) covers ``resource`` (a SQL text expression, e.g.
    ``t.id``): the resource's ``in_maintenance`` (docs/maintenance.md)."""
    return f"EXISTS (SELECT 1 {_covering(resource, at, None)})"


def paused_until_sql(resource: str, at: str = NOW_SQL) -> str:
    """A SQL scalar: when (epoch seconds) the latest open occurrence of a window with
    ``pause_checks`` covering ``resource`` at ``at`` ends, or NULL: its checks are not
    paused by maintenance (docs/maintenance.md, "Paused checks")."""
    return f"(SELECT max(o.ends_at) {_covering(resource, at, 'pause_checks')})"


def open_windows_sql(resources: str, at: str, *, effect: str | None = "suppress_alerts") -> str:
    """A query of ``(resource_id, window_id)``: each resource of the SQL ``text[]``
    expression ``resources`` that an occurrence open at the SQL epoch-seconds expression
    ``at`` covers, with that window (the one whose occurrence began first; by id on a
    tie), among windows with ``effect`` (a column of :data:`EFFECTS`) or any window
    (None). For the batch to embed, e.g. ``open_windows_sql("$1::text[]", "$2")``;
    both expressions come from code, never from a request.

    Raises:
        ValueError: ``effect`` is no column of :data:`EFFECTS`.
    """
    if effect is not None and effect not in EFFECTS:
        raise ValueError(f"no window effect {effect!r}")
    having = "" if effect is None else f" AND w.{effect}"
    return (
        "SELECT DISTINCT ON (r.resource_id) r.resource_id, r.window_id "
        "FROM maintenance_window_resources r "
        f"JOIN maintenance_windows w ON w.id = r.window_id{having} "
        "CROSS JOIN LATERAL (SELECT o.starts_at FROM maintenance_occurrences o "
        f"WHERE o.window_id = r.window_id AND o.ends_at > ({at})::bigint "
        "ORDER BY o.ends_at, o.starts_at LIMIT 1) o "
        f"WHERE r.resource_id = ANY({resources}) AND o.starts_at <= ({at})::bigint "
        "ORDER BY r.resource_id, o.starts_at, r.window_id"
    )


async def open_windows(
    connection: Connection,
    resource_ids: Sequence[str],
    at: int,
    *,
    effect: str | None = None,
) -> dict[str, str]:
    """Each of ``resource_ids`` in an open occurrence at ``at`` (epoch seconds) of a
    window with ``effect`` (or any, None), mapped to that window's id
    (:func:`open_windows_sql`); the others are left out."""
    rows = await connection.fetch(
        open_windows_sql("$1::text[]", "$2", effect=effect), list(resource_ids), at
    )
    return {r["resource_id"]: r["window_id"] for r in rows}


async def suppressing(
    connection: Connection, resource_ids: Sequence[str], at: int
) -> dict[str, str]:
    """Each of ``resource_ids`` that a window with ``suppress_alerts`` holds back at
    ``at`` (epoch seconds), mapped to the window's id: the resources whose move into
    ``down`` opens no incident and raises no alert."""
    return await open_windows(connection, resource_ids, at, effect="suppress_alerts")
