"""A monitor's ``regions`` and ``region_quorum`` on create and PATCH (docs/regions.md).

``regions`` unique (a name listed twice is a 422 naming that
item); ``region_quorum`` at most the number of regions (422 naming ``region_quorum``),
null without regions (a quorum sent without regions is a 422), a majority when not sent.
A PATCH that changes ``regions`` without sending ``region_quorum`` gives it the new
list's majority; one that sends ``regions: null`` clears both.
"""

from __future__ import annotations

from typing import Any

from store import MonitorRecord

from ..api.monitors import MonitorUpdate
from ..http.errors import ApiError

__all__ = ["REGION_FIELDS", "region_changes", "region_settings"]

REGION_FIELDS = frozenset({"regions", "region_quorum"})
"""Fields a PATCH changes together (:func:`region_changes`), left out of the generic
PATCH handling."""


def region_settings(regions: list[str] | None, quorum: int | None) -> tuple[Any, Any]:
    """The ``(regions, region_quorum)`` a monitor stores for the values sent (module
    docstring): a quorum left out (None) is a majority, ``len // 2 + 1``.

    Raises:
        ApiError: 422 ``invalid_value`` for a region listed twice (``param``
            ``regions[i]``), a quorum above the number of regions or without regions
            (``param`` ``region_quorum``).
    """
    if regions is None:
        if quorum is not None:
            raise ApiError(
                "invalid_value",
                "region_quorum applies to monitors with regions only",
                param="region_quorum",
            )
        return None, None
    for index, name in enumerate(regions):
        if name in regions[:index]:
            raise ApiError(
                "invalid_value",
                f"regions[{index}] ({name}) is listed twice",
                param=f"regions[{index}]",
            )
    if quorum is None:
        return regions, len(regions) // 2 + 1
    if quorum > len(regions):
        raise ApiError(
            "invalid_value",
            f"region_quorum ({quorum}) may not exceed the number of regions ({len(regions)})",
            param="region_quorum",
        )
    return regions, quorum


def region_changes(body: MonitorUpdate, current: MonitorRecord, changes: dict[str, Any]) -> None:
    """Add to ``changes`` what a PATCH's ``regions`` and ``region_quorum`` change
    (module docstring)."""
    sent = body.model_fields_set
    if "regions" not in sent and "region_quorum" not in sent:
        return
    regions = body.regions if "regions" in sent else current.regions
    if "region_quorum" in sent:
        quorum = body.region_quorum
    else:
        quorum = current.region_quorum if regions == current.regions else None
    regions, quorum = region_settings(regions, quorum)
    for name, value in (("regions", regions), ("region_quorum", quorum)):
        if value != getattr(current, name):
            changes[name] = value
