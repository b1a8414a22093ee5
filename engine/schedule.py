"""Deadline arithmetic of a monitor's schedule (docs/checks.md, "When checks
run").

Checks fall on a grid ``phase + k * interval`` (seconds, trio clock), never drifting:
the next deadline is computed from the grid, not from when the last check ended. A
check that overruns skips the grid points it missed instead of piling them up.

The phase is a stable function of the monitor id and its interval, anchored to wall
time, so the checks of 10,000 monitors spread evenly across the interval (no thundering
herd at start-up) and a monitor keeps its phase across restarts of its actor, of its
supervisor and of the whole process. Pure functions; the actor supplies the clocks.
"""

from __future__ import annotations

import hashlib
import math


def phase_offset(monitor_id: str, interval_seconds: float) -> float:
    """Where in each interval a monitor's checks fall: a number in
    ``[0, interval_seconds)`` seconds past each multiple of the interval in wall time,
    spread uniformly over monitor ids."""
    digest = hashlib.blake2b(monitor_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 * interval_seconds


def grid_phase(monitor_id: str, interval_seconds: float, clock_offset: float) -> float:
    """The grid's phase on the trio clock: ``trio time = wall time + clock_offset``."""
    return (phase_offset(monitor_id, interval_seconds) + clock_offset) % interval_seconds


def next_deadline(now: float, phase: float, interval_seconds: float) -> float:
    """The first grid point strictly after ``now`` (seconds)."""
    k = math.floor((now - phase) / interval_seconds) + 1
    deadline = phase + k * interval_seconds
    if deadline <= now:  # rounding at a grid point
        deadline += interval_seconds
    return deadline


def missed_between(previous: float, following: float, interval_seconds: float) -> int:
    """Grid points skipped between two consecutive deadlines (0 when on time)."""
    return max(0, round((following - previous) / interval_seconds) - 1)
