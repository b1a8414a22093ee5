"""Hourly rollups (extensions part 4): what one row holds, and the histogram arithmetic.

``check_rollups`` has one row per monitor per hour (``hour``: the hour's first second,
epoch seconds, UTC): ``checks``, ``failed_checks`` (checks whose status is ``down``),
``response_time_sum_ms``, a sparse response-time histogram, and the ``up_seconds``,
``down_seconds`` and ``paused_seconds`` of status periods that have closed. They are
written in the transactions that write what they count (``store.checks``:
``write_check_batch``; ``store.monitors``: pause and resume), never by a job that
rescans checks.

**Histogram.** Bucket 0 holds responses under 0.001 ms; bucket ``b`` (1 to 199) holds
``[0.001 * 1.1^(b-1), 0.001 * 1.1^b)`` ms (the SQL function ``histogram_bucket`` of
migration 0003, the one definition). A percentile is read as the geometric middle of the
bucket holding its rank (nearest-rank method), so it lies within ``sqrt(1.1) - 1`` = 4.9 % of
the true value of that rank: the part's "within 5 %". A row stores the histogram
sparsely, one integer per non-empty bucket: ``bucket * 65536 + count`` (a monitor checks
at most once a second: at most 3,600 checks an hour), merged by ``histogram_merge``.

**Status periods.** A monitor's status holds since ``monitors.status_since`` (NULL: since
``created``). A move (a status change in a batch, a pause, a resume) closes the period
it ends: :data:`CLOSE_PERIODS` splits it at hour boundaries and adds its seconds to the
rows of those hours, in the move's own transaction. ``pending`` periods count nowhere
(they are "unknown" to the availability endpoint). The open period is added when read
(``store.history``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

__all__ = [
    "BUCKET_RATIO",
    "CLOSE_PERIODS",
    "HOUR_SECONDS",
    "MIN_MS",
    "bucket_of",
    "bucket_value_ms",
    "percentile_ms",
]

HOUR_SECONDS = 3600
MIN_MS = 0.001
"""The lower bound of bucket 1, milliseconds."""
BUCKET_RATIO = 1.1
"""The ratio of a bucket's upper bound to its lower bound."""
_LAST_BUCKET = 199

CLOSE_PERIODS = (
    "closed AS (INSERT INTO check_rollups AS r (monitor_id, hour, up_seconds, "
    "down_seconds, paused_seconds) "
    "SELECT monitor_id, hour, "
    "coalesce(sum(seconds) FILTER (WHERE status = 'up'), 0)::int, "
    "coalesce(sum(seconds) FILTER (WHERE status = 'down'), 0)::int, "
    "coalesce(sum(seconds) FILTER (WHERE status = 'paused'), 0)::int "
    "FROM (SELECT p.monitor_id, p.status, h AS hour, "
    "least(p.ended, h + 3600) - greatest(p.started, h) AS seconds FROM periods p, "
    "generate_series(p.started - p.started % 3600, p.ended - 1, 3600) AS h "
    "WHERE p.ended > p.started AND p.status IN ('up', 'down', 'paused')) AS split "
    "GROUP BY monitor_id, hour "
    "ON CONFLICT (monitor_id, hour) DO UPDATE SET "
    "up_seconds = r.up_seconds + EXCLUDED.up_seconds, "
    "down_seconds = r.down_seconds + EXCLUDED.down_seconds, "
    "paused_seconds = r.paused_seconds + EXCLUDED.paused_seconds)"
)
"""A CTE (``closed``) that adds the periods of a CTE ``periods(monitor_id, status,
started, ended)`` (epoch seconds, ``[started, ended)``) to the rollups, split by hour.
Follow it with the statement's main part; its own SQL functions come from migration
0003."""


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
