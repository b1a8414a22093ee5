"""Figures from the targets' arrival logs: pure functions, no I/O, no clock.

White-box (allowed by the import contracts in ``pyproject.toml``): it imports
``engine.schedule``'s pure phase arithmetic to know each monitor's grid.

Every monitor's checks fall on a grid anchored to wall time (`engine.schedule`):
``phase_offset(id, interval) + k * interval`` epoch seconds. An arrival at ``t`` serves
the latest grid point at or before ``t`` (its *slot*), and its **lateness** is ``t``
minus that grid point: how late the probe reached the target, connection set-up
included. That assumes lateness stays under one interval, which is what "no missed
check" means anyway; a probe later than that lands in the next slot and its own slot
counts as missed. An arrival up to `SLOT_TOLERANCE_SECONDS` early serves the grid point
after it (timestamps from nginx have a 1 ms resolution).

For the measured window ``[start, end)`` (whole intervals, so every monitor has the same
number of grid points in it):

- *scheduled*: grid points in the window of observable monitors;
- *achieved*: those with at least one arrival; *missed* = scheduled - achieved;
- *duplicates*: arrivals beyond the first in a slot (retries: dns servers that answer
  slowly are asked again);
- *lateness*: of each slot's first arrival, in milliseconds;
- *gap jitter*: ``|gap - interval|`` between a monitor's consecutive slots that are both in
  the window, in milliseconds (bench/RESULTS.md's "gap minus interval"; unlike lateness it
  does not see a constant delay).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from engine.schedule import phase_offset

__all__ = [
    "SLOT_TOLERANCE_SECONDS",
    "Distribution",
    "SeriesPoint",
    "WindowFigures",
    "arrival_series",
    "distribution",
    "longest_gaps",
    "per_monitor_counts",
    "phases_by_index",
    "quiet_offset",
    "slot_arrivals",
    "window_figures",
]

SLOT_TOLERANCE_SECONDS = 0.002
"""An arrival up to this long before a grid point still serves that grid point (its
lateness is then slightly negative): nginx logs times to the millisecond (truncated),
and each monitor actor reads the offset between the trio clock and wall time once."""

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Distribution:
    """Percentiles of a sample, in its unit (ms here); all None for an empty sample."""

    count: int
    p50: float | None
    p99: float | None
    max: float | None
    mean: float | None

    def as_dict(self) -> dict[str, float | int | None]:
        """JSON-ready."""
        return {
            "count": self.count,
            "p50": self.p50,
            "p99": self.p99,
            "max": self.max,
            "mean": self.mean,
        }


def distribution(values: Sequence[float] | FloatArray) -> Distribution:
    """p50, p99 (linear interpolation between ranks), max and mean of ``values``."""
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        return Distribution(count=0, p50=None, p99=None, max=None, mean=None)
    p50, p99 = np.percentile(array, [50, 99])
    return Distribution(
        count=int(array.size),
        p50=float(p50),
        p99=float(p99),
        max=float(array.max()),
        mean=float(array.mean()),
    )


def phases_by_index(ids: Mapping[int, str], interval_seconds: float, size: int) -> FloatArray:
    """Array of each monitor index's grid phase (seconds into the interval, wall time);
    NaN for an index without a monitor id. ``size``: indices 0 to size - 1."""
    phases = np.full(size, np.nan)
    for index, monitor_id in ids.items():
        phases[index] = phase_offset(monitor_id, interval_seconds)
    return phases


def quiet_offset(phases: FloatArray, interval_seconds: float) -> tuple[float, float]:
    """The middle of the widest gap between grid points, as an offset into the interval
    (seconds, wall time), and the gap's width (seconds): the moment of each interval
    when the fewest probes are in flight, where the window starts and ends."""
    known = np.sort(phases[~np.isnan(phases)])
    if known.size == 0:
        return 0.0, interval_seconds
    wrapped = np.append(known, known[0] + interval_seconds)
    gaps = np.diff(wrapped)
    widest = int(np.argmax(gaps))
    return float((known[widest] + gaps[widest] / 2) % interval_seconds), float(gaps[widest])


@dataclass(frozen=True, slots=True)
class _Slots:
    """First arrival per (monitor, slot): index, slot number, grid time (epoch s),
    arrival time (epoch s), and how many arrivals the slot got in all."""

    index: IntArray
    slot: IntArray
    grid: FloatArray
    at: FloatArray
    arrivals: IntArray


def _slots(indices: IntArray, times: FloatArray, phases: FloatArray, interval: float) -> _Slots:
    known = (indices >= 0) & (indices < phases.size)
    indices, times = indices[known], times[known]
    phase = phases[indices]
    keep = ~np.isnan(phase)
    indices, times, phase = indices[keep], times[keep], phase[keep]
    slot = np.floor((times - phase + SLOT_TOLERANCE_SECONDS) / interval).astype(np.int64)
    order = np.lexsort((times, slot, indices))
    indices, times, slot, phase = indices[order], times[order], slot[order], phase[order]
    first = np.ones(indices.size, dtype=bool)
    if indices.size > 1:
        first[1:] = (indices[1:] != indices[:-1]) | (slot[1:] != slot[:-1])
    grid = phase + slot * interval
    starts = np.flatnonzero(first)
    arrivals = np.diff(np.append(starts, indices.size)).astype(np.int64)
    return _Slots(
        index=indices[first],
        slot=slot[first],
        grid=grid[first],
        at=times[first],
        arrivals=arrivals,
    )


@dataclass(frozen=True, slots=True)
class WindowFigures:
    """The target-side figures of one window (module docstring)."""

    scheduled: int
    achieved: int
    missed: int
    duplicates: int
    lateness_ms: Distribution
    gap_jitter_ms: Distribution
    observable_monitors: int


def window_figures(
    indices: IntArray,
    times: FloatArray,
    phases: FloatArray,
    observable: npt.NDArray[np.bool_],
    interval_seconds: float,
    start: float,
    end: float,
) -> WindowFigures:
    """Figures of the window ``[start, end)`` (epoch seconds) for the monitors whose
    ``observable[index]`` is true. ``indices`` / ``times``: the arrival log."""
    interval = float(interval_seconds)
    watched = observable & ~np.isnan(phases)
    p = phases[watched]
    scheduled = int((np.ceil((end - p) / interval) - np.ceil((start - p) / interval)).sum())
    slots = _slots(indices, times, np.where(watched, phases, np.nan), interval)
    inside = (slots.grid >= start) & (slots.grid < end)
    lateness = (slots.at[inside] - slots.grid[inside]) * 1000.0
    index_in, at_in = slots.index[inside], slots.at[inside]
    same = index_in[1:] == index_in[:-1]
    gaps = np.abs(np.diff(at_in)[same] - interval) * 1000.0
    achieved = int(np.count_nonzero(inside))
    return WindowFigures(
        scheduled=scheduled,
        achieved=achieved,
        missed=max(0, scheduled - achieved),
        duplicates=int((slots.arrivals[inside] - 1).sum()),
        lateness_ms=distribution(lateness),
        gap_jitter_ms=distribution(gaps),
        observable_monitors=int(watched.sum()),
    )


def per_monitor_counts(
    indices: IntArray,
    times: FloatArray,
    phases: FloatArray,
    interval_seconds: float,
    start: float,
    end: float,
) -> dict[int, int]:
    """Slots with an arrival per monitor index, for arrivals in ``[start, end)``."""
    slots = _slots(indices, times, phases, float(interval_seconds))
    inside = (slots.at >= start) & (slots.at < end)
    found, counts = np.unique(slots.index[inside], return_counts=True)
    return {int(i): int(c) for i, c in zip(found, counts, strict=True)}


def slot_arrivals(
    indices: IntArray,
    times: FloatArray,
    phases: FloatArray,
    interval_seconds: float,
    start: float,
    end: float,
) -> tuple[IntArray, IntArray, IntArray]:
    """Per monitor index with a grid point in ``[start, end)`` that got an arrival:
    ``(index, slots with an arrival, arrivals in those slots)``, three arrays of one
    length. Two nodes probing one monitor give it twice as many arrivals as slots."""
    slots = _slots(indices, times, phases, float(interval_seconds))
    inside = (slots.grid >= start) & (slots.grid < end)
    found, first, served = np.unique(slots.index[inside], return_index=True, return_counts=True)
    arrivals = np.add.reduceat(slots.arrivals[inside], first) if found.size else found
    return found.astype(np.int64), served.astype(np.int64), arrivals.astype(np.int64)


def longest_gaps(
    indices: IntArray,
    times: FloatArray,
    size: int,
    start: float,
    end: float,
    interval_seconds: float,
) -> FloatArray:
    """Per monitor index (0 to ``size`` - 1), the longest time (seconds) between two
    consecutive arrivals, the later one in ``[start, end)`` (the earlier may be up to
    one interval before ``start``), or from the last arrival to ``end`` when that is
    longer (a monitor no longer probed); NaN for a monitor with no arrival."""
    keep = (times >= start - interval_seconds) & (times < end)
    index, at = indices[keep], times[keep]
    order = np.lexsort((at, index))
    index, at = index[order], at[order]
    longest = np.full(size, np.nan)
    if index.size == 0:
        return longest
    chosen = (index[1:] == index[:-1]) & (at[1:] >= start)
    np.fmax.at(longest, index[1:][chosen], np.diff(at)[chosen])
    last = np.append(index[1:] != index[:-1], True)
    np.fmax.at(longest, index[last], end - at[last])
    return longest


@dataclass(frozen=True, slots=True)
class SeriesPoint:
    """One second of a run (``t``: seconds from the window's start): arrivals (slots
    served) and the lateness p50 / p99 of those arrivals, ms (None when none)."""

    t: float
    arrivals: int
    lateness_p50_ms: float | None
    lateness_p99_ms: float | None


def arrival_series(
    indices: IntArray,
    times: FloatArray,
    phases: FloatArray,
    interval_seconds: float,
    origin: float,
    start: float,
    end: float,
) -> list[SeriesPoint]:
    """Per-second arrivals and lateness from ``start`` to ``end`` (epoch seconds), in
    whole seconds aligned on ``origin`` (partial seconds at either end left out), with
    ``t`` (a second's start) measured from ``origin``."""
    slots = _slots(indices, times, phases, float(interval_seconds))
    keep = (slots.at >= start) & (slots.at < end)
    at, lateness = slots.at[keep], (slots.at[keep] - slots.grid[keep]) * 1000.0
    first = origin + np.floor(start - origin)
    edges = np.arange(first + (first < start), origin + np.floor(end - origin) + 0.5, 1.0)
    bins = np.digitize(at, edges) - 1
    points = []
    for b in range(len(edges) - 1):
        chosen = lateness[bins == b]
        p50 = p99 = None
        if chosen.size:
            p50, p99 = (float(x) for x in np.percentile(chosen, [50, 99]))
        points.append(
            SeriesPoint(
                t=float(edges[b] - origin),
                arrivals=int(chosen.size),
                lateness_p50_ms=p50,
                lateness_p99_ms=p99,
            )
        )
    return points
