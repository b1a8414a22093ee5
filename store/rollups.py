"""Hourly rollups (docs/history.md): what one row holds, and the histogram arithmetic.

``check_rollups`` has one row per monitor per hour (``hour``: the hour's first second,
epoch seconds, UTC): ``checks``, ``failed_checks`` (checks whose status is ``down``),
``response_time_sum_ms``, a sparse response-time histogram, ``last_check`` (the hour's
newest check, epoch seconds; NULL in an hour with status seconds only), and the
``up_seconds``, ``down_seconds`` and ``paused_seconds`` of status periods that have
closed. They are
written in the transactions that write what they count (``store.checks``:
``write_check_batch``; ``store.monitors``: pause and resume), never by a job that
rescans checks.

**Daily seconds.** ``daily_rollups`` (migration 0029) has one row per monitor per UTC day
(``day``: its first second): the ``up_seconds``, ``down_seconds`` and ``paused_seconds``
of that day's hourly rows, always their sum. The statements that add seconds to the hourly
rows add the same pieces to the daily ones in the same statement (:data:`ADD_DAILY`, fed
by :data:`SPLIT_PERIODS`), so the two cannot disagree: not the maintenance round, because
a finished day's seconds still change (a period is added to the rollups when it closes,
and it may have begun many days earlier), and a later fold would have to know which days
a move touched. A status page reads its 90 days from them: 90 rows per component instead
of 2,160 (docs/status-pages.md, Built for the stampede). They are purged with the hourly
rows (``store.maintenance``: a whole day's row goes with its last hour, and a day the
cutoff cuts loses the seconds of the hours that go). Hourly rows written by a statement
other than the store's (a bench's seeded history) need their daily rows written too, as
migration 0029 backfilled them.

**Histogram.** Bucket 0 holds responses under 0.001 ms; bucket ``b`` (1 to 199) holds
``[0.001 * 1.1^(b-1), 0.001 * 1.1^b)`` ms (the SQL function ``histogram_bucket`` of
migration 0003, the one definition). A percentile is read as the geometric middle of the
bucket holding its rank (nearest-rank method), so it lies within ``sqrt(1.1) - 1`` = 4.9 % of
the true value of that rank: the part's "within 5 %". A row stores the histogram
sparsely, one integer per non-empty bucket: ``bucket * 65536 + count`` (a monitor checks
at most once a second: at most 3,600 checks an hour), merged by ``histogram_merge``.

**Status periods.** A monitor's status holds since ``monitors.status_since`` (NULL: since
``created``). A move (a status change in a batch, a pause, a resume) closes the period it
ends: :data:`CLOSE_PERIODS` splits it at hour boundaries and adds its seconds to the rows of
those hours, in the move's own transaction. ``pending`` periods count nowhere (they are
"unknown" to the availability endpoint). The open period is added when read
(``store.history``, ``store.status_pages``). Two rules make the periods honest
(docs/history.md, Availability):

* **Backdating.** A move into ``down`` holds from the first failed check of its episode
  (the failed checks after the monitor's last good one, within the period the move ends),
  not from the check that reached the failure threshold: a monitor with threshold 3 that
  fails at 10:00:00, 10:01:00 and 10:02:00 is down from 10:00:00. The store finds that
  check in SQL (``store.checks``), so it holds across a restart or a failover, which reset
  the engine's streaks. The period the move ends is open until the move, so it is not in
  the rollups yet: closing it at the backdated time puts every second in its own hour,
  also when the first failure is in an earlier hour than the move.
* **Unknown spans.** The last check of each hour is kept (``last_check``; a monitor's
  newest is read by :func:`last_check_sql`). A check that comes more than
  :data:`STALE_INTERVALS` intervals after the monitor's previous one (or after the start
  of its period, if later: a resume) means the service recorded nothing in between (it
  was stopped, or every node was down): the status period is closed one interval after
  the previous check (that check's result stands for the interval it opens), the span
  until the new check counts nowhere (``unknown``), and the status holds again from the
  new check. The span is logged in ``status_changes`` as a move into ``unknown`` and one
  back. A pause closes a period the same way (:func:`known_end_sql`), and a read counts
  the open period of an ``up`` or ``down`` monitor only to :func:`counted_until`: "now"
  with a stopped service is unknown, not up.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

__all__ = [
    "ADD_DAILY",
    "BUCKET_RATIO",
    "CLOSE_PERIODS",
    "HOUR_SECONDS",
    "MIN_MS",
    "SPLIT_PERIODS",
    "STALE_INTERVALS",
    "bucket_of",
    "bucket_value_ms",
    "counted_until",
    "gap_sql",
    "known_end_sql",
    "last_check_sql",
    "percentile_ms",
]

HOUR_SECONDS = 3600
MIN_MS = 0.001
"""The lower bound of bucket 1, milliseconds."""
BUCKET_RATIO = 1.1
"""The ratio of a bucket's upper bound to its lower bound."""
_LAST_BUCKET = 199

SPLIT_PERIODS = (
    "split AS (SELECT p.monitor_id, h AS hour, "
    "CASE WHEN p.status = 'up' THEN piece.seconds ELSE 0 END AS up, "
    "CASE WHEN p.status = 'down' THEN piece.seconds ELSE 0 END AS down, "
    "CASE WHEN p.status = 'paused' THEN piece.seconds ELSE 0 END AS paused "
    "FROM periods p, "
    "generate_series(p.started - p.started % 3600, p.ended - 1, 3600) AS h, "
    "LATERAL (SELECT least(p.ended, h + 3600) - greatest(p.started, h) AS seconds) AS piece "
    "WHERE p.ended > p.started AND p.status IN ('up', 'down', 'paused'))"
)
"""A CTE (``split``) of the pieces of the periods of a CTE ``periods(monitor_id, status,
started, ended)`` (epoch seconds, ``[started, ended)``) in each hour they touch:
``(monitor_id, hour, up, down, paused)`` seconds, one of the three non-zero. Periods of
other statuses (``pending``, ``unknown``) count nowhere."""

ADD_DAILY = (
    "daily AS (INSERT INTO daily_rollups AS d (monitor_id, day, up_seconds, down_seconds, "
    "paused_seconds) SELECT monitor_id, hour - hour % 86400, sum(up)::int, sum(down)::int, "
    "sum(paused)::int FROM split GROUP BY 1, 2 ORDER BY 1, 2 "
    "ON CONFLICT (monitor_id, day) DO UPDATE SET "
    "up_seconds = d.up_seconds + EXCLUDED.up_seconds, "
    "down_seconds = d.down_seconds + EXCLUDED.down_seconds, "
    "paused_seconds = d.paused_seconds + EXCLUDED.paused_seconds)"
)
"""A CTE (``daily``) that adds the pieces of a CTE ``split`` (:data:`SPLIT_PERIODS`) to
``daily_rollups``, summed by UTC day, locking their rows in key order (module docstring,
Daily seconds). Every statement that adds ``split`` to ``check_rollups`` carries it."""

CLOSE_PERIODS = (
    f"{SPLIT_PERIODS}, {ADD_DAILY}, "
    "closed AS (INSERT INTO check_rollups AS r (monitor_id, hour, up_seconds, "
    "down_seconds, paused_seconds) "
    "SELECT monitor_id, hour, sum(up)::int, sum(down)::int, sum(paused)::int "
    "FROM split GROUP BY monitor_id, hour ORDER BY monitor_id, hour "
    "ON CONFLICT (monitor_id, hour) DO UPDATE SET "
    "up_seconds = r.up_seconds + EXCLUDED.up_seconds, "
    "down_seconds = r.down_seconds + EXCLUDED.down_seconds, "
    "paused_seconds = r.paused_seconds + EXCLUDED.paused_seconds)"
)
"""CTEs (``split``, ``daily``, ``closed``) that add the periods of a CTE ``periods`` (as
:data:`SPLIT_PERIODS`) to the rollups, split by hour, locking their rows in key order (as
the checks' upsert does: two nodes writing one monitor's rows never deadlock), and to the
daily seconds (:data:`ADD_DAILY`). Follow them
with the statement's main part. (A batch of checks adds the same pieces in its one upsert of
the rollups: ``store.checks``.)"""


STALE_INTERVALS = 2
"""A monitor with no check for more than this many intervals was not watched: the time
from one interval after its last check is unknown (docs/history.md)."""


def last_check_sql(monitor_id: str, since: str) -> str:
    """A scalar subquery: the monitor's newest check time (epoch seconds) in its rollups,
    NULL without one since the hour of ``since``. ``monitor_id`` and ``since`` are SQL
    expressions from code, never from a request. One backward probe of the rollups'
    primary key: the newest hour holds it, unless that hour has only status seconds."""
    return (
        f"(SELECT r.last_check FROM check_rollups r WHERE r.monitor_id = {monitor_id} "
        f"AND r.last_check IS NOT NULL AND r.hour >= {since} - {since} % 3600 "
        "ORDER BY r.hour DESC LIMIT 1)"
    )


def gap_sql(before: str, at: str, interval: str) -> str:
    """A SQL condition: ``at`` comes more than :data:`STALE_INTERVALS` intervals after
    ``before`` (epoch seconds; ``interval`` seconds; SQL expressions from code)."""
    return f"({at} - {before} > {STALE_INTERVALS} * {interval})"


def known_end_sql(status: str, before: str, at: str, interval: str) -> str:
    """A SQL expression: where a period of ``status`` that a move at ``at`` closes stops
    being known: ``at``, or one interval after ``before`` (the later of the monitor's last
    check and the period's start) when no check came for longer than
    :data:`STALE_INTERVALS` intervals (only ``up`` and ``down`` periods: the others do not
    depend on checks)."""
    return (
        f"CASE WHEN {status} IN ('up', 'down') AND {gap_sql(before, at, interval)} "
        f"THEN {before} + {interval} ELSE {at} END"
    )


def counted_until(
    now: int, status: str, since: int, last_check: int | None, interval_seconds: int
) -> int:
    """Up to when (epoch seconds) the open period ``[since, …)`` of a monitor in
    ``status`` counts at ``now``: ``now``, or one interval after its last check (or
    ``since``, if later) once no check came for longer than :data:`STALE_INTERVALS`
    intervals and the status is ``up`` or ``down`` (as :func:`known_end_sql`)."""
    if status not in ("up", "down"):
        return now
    before = since if last_check is None else max(since, last_check)
    if now - before > STALE_INTERVALS * interval_seconds:
        return before + interval_seconds
    return now


def bucket_of(ms: float) -> int:
    """The histogram bucket of a response time in milliseconds (as ``histogram_bucket``
    in SQL; tests compare the two)."""
    if ms < MIN_MS:
        return 0
    return min(_LAST_BUCKET, math.floor(math.log(ms / MIN_MS) / math.log(BUCKET_RATIO)) + 1)


def bucket_value_ms(bucket: int) -> float:
    """The value read for ``bucket``: the geometric middle of its bounds, milliseconds
    (bucket 0: half of :data:`MIN_MS`)."""
    if bucket <= 0:
        return MIN_MS / 2
    return MIN_MS * BUCKET_RATIO ** (bucket - 1) * math.sqrt(BUCKET_RATIO)


def percentile_ms(histogram: Mapping[int, int], percent: float) -> float | None:
    """The ``percent`` percentile (0 < percent ≤ 100, nearest rank) of ``histogram``
    (bucket → count), milliseconds; None when it is empty."""
    total = sum(histogram.values())
    if total == 0:
        return None
    rank = max(1, math.ceil(percent / 100 * total))
    seen = 0
    for bucket in sorted(histogram):
        seen += histogram[bucket]
        if seen >= rank:
            return round(bucket_value_ms(bucket), 3)
    raise AssertionError("unreachable: the ranks add up to the total")


def merge_into(target: dict[int, int], buckets: Iterable[int], counts: Iterable[int]) -> None:
    """Add the ``(bucket, count)`` pairs to ``target`` (bucket → count)."""
    for bucket, count in zip(buckets, counts, strict=True):
        target[bucket] = target.get(bucket, 0) + count
