"""The maintenance a public status page shows (docs/status-pages.md, Maintenance):
which of its monitors an open occurrence of a maintenance window covers now, and the
occurrences of the next :data:`AHEAD_SECONDS` of the windows that cover any of them. One
statement per page render (:data:`_SQL`), whatever the number of components, read by
:func:`store.status_pages.public_page`.

- **Under maintenance now**: a monitor in an occurrence open at the render's instant
  (``[starts_at, ends_at)``) of any window, whatever its effects (docs/maintenance.md:
  the rule the batch applies to ``suppress_alerts``, here for any window), read from
  the same rows as the list: a window's occurrences end in the order they start, so
  the first of its rows ending after now is the open one if any is.
- **Listed**: each occurrence that has not ended (``ends_at`` after now) and starts
  before now + 7 days, of a window of the account covering at least one of the page's
  monitors: in progress first, then by start (``starts_at``, ``ends_at``, then the
  window's id, which is never shown), at most :data:`MAX_LISTED`. A canceled occurrence
  is no row any more and one ended early has its ``ends_at`` cut to the end
  (:mod:`store.windows`), so neither is listed. Per window, its occurrences come by the
  index ``(window_id, ends_at, starts_at)``, at most :data:`MAX_LISTED` of them.

- **Ended** (:func:`ended`, for the page's feeds only: docs/status-pages.md, Feeds): the
  occurrences of those windows that ended in the last :data:`RECENT_SECONDS`, the latest
  end first, at most :data:`MAX_LISTED`, by the same index read backwards. Past
  occurrences are kept until the rollups' retention (``store.maintenance``).

Only the public part of a window is read: title, description and the occurrence's
times; of its resources only those that are the page's monitors (docs/maintenance.md,
API: "titles, descriptions and times are public on the status pages"); its id only
orders ties and makes each occurrence's opaque ``key`` (80 bits of a SHA-256 of the
window's id and the occurrence's start, inside the statement: the id never leaves it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .database import Connection

__all__ = [
    "AHEAD_SECONDS",
    "MAX_LISTED",
    "RECENT_SECONDS",
    "PageMaintenance",
    "PublicMaintenance",
    "ended",
    "read",
]

AHEAD_SECONDS = 7 * 86_400
"""How far ahead a page lists maintenance, seconds (7 days, docs/status-pages.md, Maintenance)."""
MAX_LISTED = 50
"""At most this many occurrences listed on a page (in progress first, then by start)."""
RECENT_SECONDS = 14 * 86_400
"""How far back :func:`ended` reads ended occurrences, seconds (14 days, as a page's
resolved incidents)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PublicMaintenance:
    """One occurrence of a window as a page may show it.

    Attributes:
        title: the window's title.
        description: the window's description, or None.
        starts_at: the occurrence's start, epoch seconds.
        ends_at: its end (exclusive), epoch seconds.
        monitors: the page's monitor ids (of those asked about) the window covers, in the
            window's order; for mapping to display names, never shown.
        key: 20 hex digits, the same for the occurrence on every read and saying nothing
            of the window (module docstring): a feed entry's id.
    """

    title: str
    description: str | None
    starts_at: int
    ends_at: int
    monitors: list[str]
    key: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PageMaintenance:
    """What :func:`read` answers: ``under_maintenance``, the monitor ids an open
    occurrence covers now; ``listed``, the occurrences to list (module docstring)."""

    under_maintenance: frozenset[str]
    listed: list[PublicMaintenance]


# The windows covering any of $1, with those of $1 they cover (by the index on
# resource_id); an occurrence's opaque key (module docstring).
_COVERED = """
WITH covered AS (
    SELECT r.window_id, array_agg(r.resource_id ORDER BY r.position) AS monitors
    FROM maintenance_window_resources r
    WHERE r.resource_id = ANY($1::text[])
    GROUP BY r.window_id)"""
_KEY = "left(encode(sha256(convert_to(w.id || '@' || o.starts_at, 'UTF8')), 'hex'), 20)"


# $1: the page's monitor ids; $2: now; $3: now + AHEAD_SECONDS; $4: the account.
# `occ`: per window, its occurrences not ended and starting before $3 (by
# the index on (window_id, ends_at, starts_at)); `key`: module docstring. A window's
# occurrences end in the order they start, so its first row is the open one if any is:
# `under` is exact whatever the limits. The one-row `u` keeps the answer's first row even
# when nothing is listed.
_SQL = f"""{_COVERED},
occ AS (
    SELECT w.id, w.title, w.description, o.starts_at, o.ends_at, c.monitors, {_KEY} AS key
    FROM covered c
    JOIN maintenance_windows w ON w.id = c.window_id AND w.account_id = $4
    CROSS JOIN LATERAL (
        SELECT x.starts_at, x.ends_at FROM maintenance_occurrences x
        WHERE x.window_id = c.window_id AND x.ends_at > $2 AND x.starts_at < $3
        ORDER BY x.ends_at, x.starts_at LIMIT {MAX_LISTED}) o),
listed AS (
    SELECT * FROM occ ORDER BY starts_at, ends_at, id LIMIT {MAX_LISTED})
SELECT u.under, l.title, l.description, l.starts_at, l.ends_at, l.monitors, l.key
FROM (SELECT ARRAY(SELECT DISTINCT m FROM occ, unnest(occ.monitors) AS m
                   WHERE occ.starts_at <= $2) AS under) u
LEFT JOIN listed l ON true
ORDER BY l.starts_at, l.ends_at, l.id
"""


async def read(
    connection: Connection, account_id: str, monitor_ids: Sequence[str], now: int
) -> PageMaintenance:
    """The maintenance of the account's ``monitor_ids`` (a page's component monitors) at
    ``now`` (epoch seconds): one statement (module docstring)."""
    rows = await connection.fetch(_SQL, list(monitor_ids), now, now + AHEAD_SECONDS, account_id)
    under = frozenset(rows[0]["under"]) if rows else frozenset()
    listed = [_occurrence(r) for r in rows if r["starts_at"] is not None]  # else: `u` alone
    return PageMaintenance(under_maintenance=under, listed=listed)


# $1: the page's monitor ids; $2: now; $3: now - RECENT_SECONDS; $4: the account.
_ENDED_SQL = f"""{_COVERED}
SELECT w.title, w.description, o.starts_at, o.ends_at, c.monitors, {_KEY} AS key
FROM covered c
JOIN maintenance_windows w ON w.id = c.window_id AND w.account_id = $4
CROSS JOIN LATERAL (
    SELECT x.starts_at, x.ends_at FROM maintenance_occurrences x
    WHERE x.window_id = c.window_id AND x.ends_at <= $2 AND x.ends_at > $3
    ORDER BY x.ends_at DESC, x.starts_at DESC LIMIT {MAX_LISTED}) o
ORDER BY o.ends_at DESC, o.starts_at DESC, w.id
LIMIT {MAX_LISTED}
"""


async def ended(
    connection: Connection, account_id: str, monitor_ids: Sequence[str], now: int
) -> list[PublicMaintenance]:
    """The occurrences that ended in the :data:`RECENT_SECONDS` before ``now`` (epoch
    seconds) of the account's windows covering any of ``monitor_ids``, the latest end
    first, at most :data:`MAX_LISTED` (module docstring, Ended)."""
    rows = await connection.fetch(
        _ENDED_SQL, list(monitor_ids), now, now - RECENT_SECONDS, account_id
    )
    return [_occurrence(r) for r in rows]


def _occurrence(row: Any) -> PublicMaintenance:
    return PublicMaintenance(
        title=row["title"],
        description=row["description"],
        starts_at=int(row["starts_at"]),
        ends_at=int(row["ends_at"]),
        monitors=list(row["monitors"]),
        key=row["key"],
    )
