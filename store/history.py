"""Availability of one monitor over a range (docs/history.md, ``GET
/monitors/:id/availability``), read from rollups, never from a rescan of raw checks.

A range ``[start, end)`` (epoch seconds) is answered, and each bucket of a series
(``hour`` or ``day``, UTC, the first and last clipped to the range), as a
:class:`Availability`:

* **Known time** is the part after the monitor's creation, after the rollup retention
  cutoff and before now; the rest is ``unknown_seconds`` (so the five seconds fields add
  up to the range's length). ``pending`` periods (after create and resume, until the
  first check decides) are unknown too, and so are spans without checks (the service
  stopped, every node down), from one interval after the last check to the next one,
  the present included: the open period of an ``up`` or ``down`` monitor counts only
  until :func:`store.rollups.counted_until`. Down time starts at the first failed check
  of its episode (the log and ``status_since`` hold that time: :mod:`store.rollups`).
* **Whole hours** inside a range come from the rollups: their closed status periods, plus
  the part of the open period (``monitors.status_since`` to now) that falls in them;
  their checks, failed checks, response-time sum and histogram.
* **The edges** (the part of a range that does not fill an hour) come from the log of
  status moves (``status_changes``: exact seconds) and from the raw checks of those
  minutes (exact counts and histogram), or, where raw checks are past their retention,
  from the rollup of the whole edge hour.
* **Maintenance** (docs/history.md, "Maintenance"): the known time
  inside occurrences of windows with ``exclude_from_availability`` covering the monitor
  (:mod:`store.maintenance_spans`: merged, so no second counts twice) is
  ``maintenance_seconds``. The rollups keep their status seconds; at read time each such
  second leaves the status the log gives it (up, down, paused, or unknown) for
  maintenance, so ``uptime_percent`` (up and down only) leaves it out. Checks, failed
  checks, response times and incidents still count what happened in it.
* ``longest_down_seconds`` is the longest down period overlapping the range, clipped to
  it and outside maintenance, from the log of status moves; ``incidents`` counts
  incidents the monitor opened (docs/incidents.md) whose ``created`` falls in the range.

Every read runs in the caller's connection: one query for the monitor, one for the log,
one for the maintenance occurrences, one for the incidents, one over the rollups and at
most one over raw checks.

**One region** of a monitor with regions (docs/regions.md, ``?region=``) is answered from
that region's own history: its seconds from the log of its view's moves
(``region_moves``; the open period counts as above, until one interval after the
region's last check once it is silent), its checks, failed checks and response times
from its own rollups (``region_rollups``: whole hours) and raw checks (the edges), as
the monitor's; maintenance and incidents as for the monitor (incidents are the
monitor's, opened by its quorum). Spans without checks inside the region's history
before its latest move are not told apart: they count in the view's status then.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .database import Connection
from .maintenance_spans import Excluded, excluded_spans
from .rollups import HOUR_SECONDS, counted_until, last_check_sql, merge_into, percentile_ms

__all__ = ["Availability", "Window", "availability", "series_windows"]

_PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0))
_COUNTED = ("up", "down", "paused")
_MOVED = (*_COUNTED, "unknown")


@dataclass(slots=True, kw_only=True)
class Availability:
    """The figures of one range or series bucket (seconds are whole epoch seconds,
    response times milliseconds); up, down, paused, unknown and maintenance seconds add up
    to ``end - start``."""

    start: int
    end: int
    up_seconds: int = 0
    down_seconds: int = 0
    paused_seconds: int = 0
    unknown_seconds: int = 0
    maintenance_seconds: int = 0
    checks: int = 0
    failed_checks: int = 0
    incidents: int = 0
    longest_down_seconds: int = 0
    response_time_sum_ms: float = 0.0
    histogram: dict[int, int] = field(default_factory=dict)

    @property
    def uptime_percent(self) -> float | None:
        """up / (up + down) * 100, None when there was neither (paused, unknown and
        maintenance time are left out)."""
        known = self.up_seconds + self.down_seconds
        return None if known == 0 else self.up_seconds * 100.0 / known

    def response_time_ms(self) -> dict[str, float | None]:
        """``{"mean", "p50", "p90", "p95", "p99"}`` (ms), each None without checks."""
        mean = self.response_time_sum_ms / self.checks if self.checks else None
        found: dict[str, float | None] = {"mean": None if mean is None else round(mean, 3)}
        for name, percent in _PERCENTILES:
            found[name] = percentile_ms(self.histogram, percent)
        return found


@dataclass(frozen=True, slots=True)
class Window:
    """``[start, end)``, epoch seconds."""

    start: int
    end: int


def _floor_hour(t: int) -> int:
    return t - t % HOUR_SECONDS


def _ceil_hour(t: int) -> int:
    return -(-t // HOUR_SECONDS) * HOUR_SECONDS


def series_windows(start: int, end: int, granularity: str) -> list[Window]:
    """The buckets of a series over ``[start, end)``: whole UTC hours or days
    (``granularity`` ``hour`` or ``day``), the first and last clipped to the range."""
    width = HOUR_SECONDS if granularity == "hour" else 86_400
    windows, at = [], start
    while at < end:
        upper = min(end, at - at % width + width)
        windows.append(Window(at, upper))
        at = upper
    return windows


@dataclass(slots=True)
class _Timeline:
    """The status over time: ``points`` ``(since, status)`` ascending; before the first
    point the status is unknown; the last point holds until ``now`` (the open period's
    counted end: :func:`store.rollups.counted_until`), and is unknown after it."""

    points: list[tuple[int, str]]
    now: int
    sinces: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.sinces = [since for since, _ in self.points]

    def segments(self, window: Window) -> list[tuple[int, int, str]]:
        """``(from, to, status)`` pieces of ``window`` with a known status; the points
        before the window are skipped by bisection (a series asks once per bucket)."""
        pieces = []
        points, count = self.points, len(self.points)
        k = max(0, bisect.bisect_right(self.sinces, window.start) - 1)
        while k < count and points[k][0] < window.end:
            since, status = points[k]
            until = points[k + 1][0] if k + 1 < count else self.now
            lo, hi = max(since, window.start), min(until, window.end)
            if lo < hi:
                pieces.append((lo, hi, status))
            k += 1
        return pieces

    def longest_down(self, window: Window, excluded: Excluded) -> int:
        """The longest down period overlapping ``window``, clipped to it and outside the
        ``excluded`` time (a period maintenance cuts counts as its pieces), seconds."""
        best = 0
        for since, until, status in self.segments(window):
            if status == "down":
                longest = (
                    excluded.longest_uncovered(since, until) if excluded.spans else until - since
                )
                best = max(best, longest)
        return best


_LOG = (
    "(SELECT created, to_status, seq FROM {table} WHERE monitor_id = $1{region} "
    "AND created <= $2 ORDER BY created DESC, seq DESC LIMIT 1) UNION ALL "
    "(SELECT created, to_status, seq FROM {table} WHERE monitor_id = $1{region} "
    "AND created > $2 AND created < $3) ORDER BY created, seq"
)
"""The moves from the last one at or before ``$2`` to ``$3``: the monitor's
(``status_changes``) or one region's (``region_moves``, region ``$4``)."""


async def _timeline(
    connection: Connection, monitor: Any, start: int, end: int, now: int
) -> _Timeline:
    """The log of status moves from the last one at or before ``start`` to ``end``, and
    the current status since ``status_since`` (a monitor migrated from before the log
    began has no move there); for a region (``monitor["region"]``), its view's."""
    region = monitor["region"]
    args: list[Any] = [monitor["id"], start, end]
    if region is None:
        statement = _LOG.format(table="status_changes", region="")
    else:
        statement = _LOG.format(table="region_moves", region=" AND region = $4")
        args.append(region)
    rows = await connection.fetch(statement, *args)
    points = [(int(r["created"]), str(r["to_status"])) for r in rows]
    since, status = int(monitor["since"]), str(monitor["status"])
    if not points or points[-1][0] < since:
        points.append((since, status))
    last_check = None if monitor["last_check"] is None else int(monitor["last_check"])
    until = counted_until(now, status, since, last_check, int(monitor["interval_seconds"]))
    return _Timeline(points, until)


async def _aggregate(
    connection: Connection,
    monitor_id: str,
    table: str,
    windows: Sequence[tuple[int, int, int, bool, bool]],
    region: str | None = None,
) -> list[Any]:
    """Sums per series index over ``windows`` ``(index, from, to, seconds, checks)``:
    of the rollups (``table`` ``check_rollups``: whole hours; the seconds only where
    ``seconds``, the checks only where ``checks``; with ``region``, that region's
    ``region_rollups``, checks only) or of raw checks (``checks``; only ``region``'s when
    given)."""
    if not windows:
        return []
    if table == "check_rollups" and region is not None:  # a region's: checks only
        source = (
            "SELECT w.i, false AS secs, w.chks, 0 AS up_seconds, 0 AS down_seconds, "
            "0 AS paused_seconds, r.checks, r.failed_checks, r.response_time_sum_ms, "
            "r.histogram FROM w JOIN region_rollups r ON r.monitor_id = $1 "
            "AND r.region = $7 AND r.hour >= w.f AND r.hour < w.t"
        )
    elif table == "check_rollups":
        source = (
            "SELECT w.i, w.secs, w.chks, r.up_seconds, r.down_seconds, r.paused_seconds, "
            "r.checks, r.failed_checks, r.response_time_sum_ms, r.histogram "
            "FROM w JOIN check_rollups r ON r.monitor_id = $1 AND r.hour >= w.f "
            "AND r.hour < w.t"
        )
    else:
        source = (
            "SELECT w.i, false AS secs, true AS chks, 0 AS up_seconds, 0 AS down_seconds, "
            "0 AS paused_seconds, 1 AS checks, (c.status = 'down')::int AS failed_checks, "
            "c.response_time_ms AS response_time_sum_ms, "
            "ARRAY[histogram_bucket(c.response_time_ms) * 65536 + 1] AS histogram "
            "FROM w JOIN checks c ON c.monitor_id = $1 AND c.created >= w.f "
            "AND c.created < w.t" + ("" if region is None else " AND c.region = $7")
        )
    return list(
        await connection.fetch(
            "WITH w AS (SELECT * FROM unnest($2::int[], $3::bigint[], $4::bigint[], "
            "$5::bool[], $6::bool[]) AS w(i, f, t, secs, chks)), "
            f"rows AS ({source}), "
            "sums AS (SELECT i, "
            "coalesce(sum(up_seconds) FILTER (WHERE secs), 0) AS up, "
            "coalesce(sum(down_seconds) FILTER (WHERE secs), 0) AS down, "
            "coalesce(sum(paused_seconds) FILTER (WHERE secs), 0) AS paused, "
            "coalesce(sum(checks) FILTER (WHERE chks), 0) AS checks, "
            "coalesce(sum(failed_checks) FILTER (WHERE chks), 0) AS failed, "
            "coalesce(sum(response_time_sum_ms) FILTER (WHERE chks), 0) AS total "
            "FROM rows GROUP BY i), "
            "hist AS (SELECT i, array_agg(b ORDER BY b) AS buckets, "
            "array_agg(n ORDER BY b) AS counts FROM (SELECT i, e / 65536 AS b, "
            "sum(e % 65536)::bigint AS n FROM rows, unnest(histogram) AS e WHERE chks "
            "GROUP BY 1, 2) AS x GROUP BY i) "
            "SELECT sums.*, hist.buckets, hist.counts FROM sums LEFT JOIN hist USING (i)",
            monitor_id,
            [w[0] for w in windows],
            [w[1] for w in windows],
            [w[2] for w in windows],
            [w[3] for w in windows],
            [w[4] for w in windows],
            *(() if region is None else (region,)),
        )
    )


async def availability(
    connection: Connection,
    monitor_id: str,
    windows: Sequence[Window],
    *,
    now: int,
    rollup_cutoff: int,
    check_cutoff: int,
    region: str | None = None,
) -> tuple[Availability, list[Availability]] | None:
    """The :class:`Availability` of the whole range and of each of its ``windows``
    (contiguous, ascending; one window for no series), or None when the monitor does not
    exist. ``rollup_cutoff`` and ``check_cutoff`` (epoch seconds) are where rollups and
    raw checks end by retention; ``now`` is epoch seconds. With ``region``: that region's
    view of it (module docstring)."""
    since_sql = "coalesce(status_since, created)"
    if region is None:
        monitor = await connection.fetchrow(
            f"SELECT id, status, created, interval_seconds, {since_sql} AS since, "
            f"{last_check_sql('id', since_sql)} AS last_check, NULL::text AS region "
            "FROM monitors WHERE id = $1",
            monitor_id,
        )
    else:  # a region no longer listed: its log alone, its last move's status unknown
        monitor = await connection.fetchrow(
            "SELECT m.id, coalesce(v.status, 'unknown') AS status, m.created, "
            "m.interval_seconds, coalesce(v.since, m.created) AS since, "
            "v.heard AS last_check, $2::text AS region FROM monitors m "
            "LEFT JOIN monitor_regions v ON v.monitor_id = m.id AND v.region = $2 "
            "WHERE m.id = $1",
            monitor_id,
            region,
        )
    if monitor is None:
        return None
    start, end = windows[0].start, windows[-1].end
    timeline = await _timeline(connection, monitor, start, end, now)
    known_from = max(int(monitor["created"]), rollup_cutoff)
    span = Window(max(start, known_from), min(end, now))
    excluded = await excluded_spans(connection, monitor_id, span.start, span.end)
    results, overlaps, rollup_windows, raw_windows = [], [], [], []
    for i, window in enumerate(windows):
        result = Availability(start=window.start, end=window.end)
        results.append(result)
        known = Window(max(window.start, known_from), min(window.end, now))
        overlaps.append(_in_maintenance(timeline, excluded, known))
        if known.start >= known.end:
            continue
        result.longest_down_seconds = timeline.longest_down(known, excluded)
        if region is not None:  # a region's seconds, all of them from its log
            for since, until, status in timeline.segments(known):
                if status in _COUNTED:
                    _add_seconds(result, status, until - since)
        hours = Window(_ceil_hour(known.start), _floor_hour(known.end))
        edges = [known] if hours.start >= hours.end else []
        if hours.start < hours.end:
            rollup_windows.append((i, hours.start, hours.end, region is None, True))
            edges = [Window(known.start, hours.start), Window(hours.end, known.end)]
            # The open period's part in these whole hours (the rollups hold closed ones).
            for since, until, status in timeline.segments(hours) if region is None else ():
                if since >= int(monitor["since"]) and status in _COUNTED:
                    _add_seconds(result, status, until - since)
        for edge in edges:
            if edge.start >= edge.end:
                continue
            for since, until, status in timeline.segments(edge) if region is None else ():
                if status in _COUNTED:
                    _add_seconds(result, status, until - since)
            if edge.start >= check_cutoff:
                raw_windows.append((i, edge.start, edge.end, False, True))
            else:  # raw checks are gone: the edge hour's rollup stands for them
                hour = _floor_hour(edge.start)
                rollup_windows.append((i, hour, hour + HOUR_SECONDS, False, True))
    for table, spec in (("check_rollups", rollup_windows), ("checks", raw_windows)):
        for row in await _aggregate(connection, monitor_id, table, spec, region):
            result = results[row["i"]]
            result.up_seconds += int(row["up"])
            result.down_seconds += int(row["down"])
            result.paused_seconds += int(row["paused"])
            result.checks += int(row["checks"])
            result.failed_checks += int(row["failed"])
            result.response_time_sum_ms += float(row["total"])
            if row["buckets"] is not None:
                merge_into(result.histogram, row["buckets"], row["counts"])
    opened = sorted(
        int(r["created"])
        for r in await connection.fetch(
            "SELECT created FROM incidents WHERE monitor_id = $1 AND created >= $2 "
            "AND created < $3",
            monitor_id,
            start,
            end,
        )
    )
    for result, overlap in zip(results, overlaps, strict=True):
        result.incidents = bisect.bisect_left(opened, result.end) - bisect.bisect_left(
            opened, result.start
        )
        counted = result.up_seconds + result.down_seconds + result.paused_seconds
        result.unknown_seconds = result.end - result.start - counted
        _move_to_maintenance(result, overlap)
    overall = _total(results, start, end)
    if span.start < span.end:
        overall.longest_down_seconds = timeline.longest_down(span, excluded)
    return overall, results


def _in_maintenance(timeline: _Timeline, excluded: Excluded, known: Window) -> dict[str, int]:
    """The seconds of ``known`` in ``excluded`` time, by the status the timeline gives them
    (``up``, ``down``, ``paused``; ``unknown`` for the rest: pending, unknown spans, the
    present after :func:`store.rollups.counted_until`)."""
    found = dict.fromkeys(_MOVED, 0)
    if not excluded.spans:
        return found
    for lo, hi in excluded.clip(known.start, known.end):
        found["unknown"] += hi - lo
        for since, until, status in timeline.segments(Window(lo, hi)):
            if status in _COUNTED:
                found[status] += until - since
                found["unknown"] -= until - since
    return found


def _move_to_maintenance(result: Availability, overlap: dict[str, int]) -> None:
    """Move the seconds of ``overlap`` (:func:`_in_maintenance`) from their status to
    ``maintenance_seconds``. Whole hours' status seconds come from the rollups and the
    overlap from the log of moves; they agree (both are written by the same moves:
    :mod:`store.rollups`), but where they would not (a history from before the log dated
    moves as it does now), a figure gives at most what it has: none goes negative, and
    the five still add up to the bucket's length."""
    for status in _MOVED:
        name = f"{status}_seconds"
        taken = min(getattr(result, name), overlap[status])
        if taken > 0:
            setattr(result, name, getattr(result, name) - taken)
            result.maintenance_seconds += taken


def _add_seconds(result: Availability, status: str, seconds: int) -> None:
    if status == "up":
        result.up_seconds += seconds
    elif status == "down":
        result.down_seconds += seconds
    else:
        result.paused_seconds += seconds


def _total(parts: Sequence[Availability], start: int, end: int) -> Availability:
    """The figures of ``[start, end)`` from its contiguous ``parts``: sums and merged
    histograms (the longest down period is the caller's: one may span parts)."""
    whole = Availability(start=start, end=end)
    for part in parts:
        whole.up_seconds += part.up_seconds
        whole.down_seconds += part.down_seconds
        whole.paused_seconds += part.paused_seconds
        whole.unknown_seconds += part.unknown_seconds
        whole.maintenance_seconds += part.maintenance_seconds
        whole.checks += part.checks
        whole.failed_checks += part.failed_checks
        whole.incidents += part.incidents
        whole.response_time_sum_ms += part.response_time_sum_ms
        for bucket, count in part.histogram.items():
            whole.histogram[bucket] = whole.histogram.get(bucket, 0) + count
    return whole
