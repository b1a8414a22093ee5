"""The time maintenance takes out of a monitor's availability (docs/history.md,
"Maintenance"): the occurrences of the maintenance windows with
``exclude_from_availability`` that cover the monitor, as disjoint spans.

A span is ``(from, to)``, epoch seconds, ``[from, to)``. Occurrences are the rows of
``maintenance_occurrences`` (:mod:`store.windows`) as ``end`` and ``cancel`` left them: an
ended occurrence counts until its end, a canceled one that had started counts whole, and a
deleted window's occurrences are gone with it (its past time goes back to the statuses).
Overlapping occurrences, of one window or of several, are merged, so no second counts
twice. A window without ``exclude_from_availability`` counts nothing.

The read is one indexed query: the monitor's windows by
``maintenance_window_resources_by_resource``, then each window's occurrences that end
after the range's start by ``maintenance_occurrences_by_end``.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field

from .database import Connection

__all__ = ["Excluded", "Span", "excluded_spans", "merge"]

Span = tuple[int, int]
"""``(from, to)``: ``[from, to)``, epoch seconds."""


@dataclass(slots=True)
class Excluded:
    """Disjoint spans of excluded time, ascending (:func:`excluded_spans`), found by
    bisection (a series asks once per bucket)."""

    spans: list[Span]
    ends: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.ends = [end for _, end in self.spans]

    def clip(self, lo: int, hi: int) -> list[Span]:
        """The parts of the spans inside ``[lo, hi)``."""
        found = []
        k = bisect.bisect_right(self.ends, lo)
        while k < len(self.spans) and self.spans[k][0] < hi:
            start, end = max(lo, self.spans[k][0]), min(hi, self.spans[k][1])
            if start < end:
                found.append((start, end))
            k += 1
        return found

    def longest_uncovered(self, lo: int, hi: int) -> int:
        """The longest run of seconds in ``[lo, hi)`` that the spans leave uncovered (0
        when ``lo >= hi``)."""
        best, at = 0, lo
        for start, end in self.clip(lo, hi):
            best = max(best, start - at)
            at = end
        return max(best, hi - at)


async def excluded_spans(connection: Connection, monitor_id: str, lo: int, hi: int) -> Excluded:
    """The time in ``[lo, hi)`` (epoch seconds) that windows with
    ``exclude_from_availability`` covering ``monitor_id`` take out of its availability:
    disjoint spans, ascending, each clipped to ``[lo, hi)`` (none when ``lo >= hi``)."""
    if lo >= hi:
        return Excluded([])
    rows = await connection.fetch(
        "SELECT o.starts_at, o.ends_at FROM maintenance_window_resources r "
        "JOIN maintenance_windows w ON w.id = r.window_id AND w.exclude_from_availability "
        "JOIN maintenance_occurrences o ON o.window_id = r.window_id "
        "AND o.ends_at > $2 AND o.starts_at < $3 "
        "WHERE r.resource_id = $1",
        monitor_id,
        lo,
        hi,
    )
    return Excluded(merge((max(lo, int(r["starts_at"])), min(hi, int(r["ends_at"]))) for r in rows))


def merge(spans: Iterable[Span]) -> list[Span]:
    """``spans`` (in any order; empty ones dropped) as disjoint spans, ascending: spans that
    overlap or touch become one."""
    merged: list[Span] = []
    for start, end in sorted(s for s in spans if s[0] < s[1]):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged
