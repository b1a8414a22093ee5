"""The monitor state machine: how check results move a monitor among pending, up, down.

Pure (no I/O, no clock), so it is tested exhaustively without a clock. Rules (docs/checks.md,
"Up and down"):

* ``failure_threshold`` consecutive failed checks (1-10, default 2) make a monitor
  ``down``; ``success_threshold`` consecutive good checks (1-10, default 1) make it ``up``.
* Below a threshold the status stays where it is: a ``pending`` monitor stays pending, an
  ``up`` monitor with one failure (threshold 2) stays up.
* A result of the other kind resets the opposite streak.
* ``paused`` is not this machine's: a paused monitor has no actor and runs no check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from store import MonitorRecord


@dataclass(frozen=True, slots=True)
class Health:
    """A monitor's status and its current streaks of good and failed checks."""

    status: str = "pending"
    good_streak: int = 0
    failed_streak: int = 0


def after_check(
    health: Health, ok: bool, *, failure_threshold: int, success_threshold: int
) -> Health:
    """The health after one check result ``ok``.

    Raises:
        ValueError: a threshold below 1.
    """
    if failure_threshold < 1 or success_threshold < 1:
        raise ValueError("thresholds must be at least 1")
    if ok:
        good = health.good_streak + 1
        status = "up" if good >= success_threshold else health.status
        return Health(status, good, 0)
    failed = health.failed_streak + 1
    status = "down" if failed >= failure_threshold else health.status
    return Health(status, 0, failed)


def starting_status(monitor: MonitorRecord, region: str) -> str:
    """The status an actor of ``monitor`` starts from on a node of ``region``: the
    monitor's (its region's view on a monitor with ``regions``: docs/regions.md) when up
    or down, else ``pending``."""
    status = monitor.status
    if monitor.regions is not None:
        status = (monitor.region_status or {}).get(region, "pending")
    return status if status in ("up", "down") else "pending"
