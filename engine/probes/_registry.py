"""The probe types: `PROBE_TYPES`, the one list of the monitor types Uptrio checks.

Each type is defined in its own module (`ProbeType`: its ``url`` parser, its check, what
applies to it) and registered here by name, in the order the API lists them (its enums,
its messages). Adding a type is a module and its line in `_TYPES`, then a migration that
widens the CHECK on ``monitors.type`` (tests/engine/test_probe_types.py holds the CHECK
to this list) and the benchmark harness's target for it (docs/development.md, "Adding a
probe type").
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from engine.targets import InvalidTarget, Target, check_url_text

from ._dns import DNS
from ._http import HTTP
from ._ping import PING
from ._probe_type import ProbeType
from ._tcp import TCP

__all__ = ["PROBE_TYPES", "http_fields_apply", "parse_target"]

_TYPES: Final = (HTTP, TCP, DNS, PING)

PROBE_TYPES: Final[Mapping[str, ProbeType]] = MappingProxyType({t.name: t for t in _TYPES})
"""Every probe type by its name (the monitor ``type``), in the API's order: ``http``,
``tcp``, ``dns``, ``ping``. Read-only."""

_UNKNOWN = f"type must be one of {', '.join(PROBE_TYPES)}"


def parse_target(type: str, url: str) -> Target:
    """Validate ``url`` for a monitor of ``type`` and split it into a `Target`.

    Args:
        type: a name in `PROBE_TYPES`.
        url: the monitor's ``url``, in a form the type's parser accepts (each type's
            module says which; docs/checks.md, "Monitor types").

    Returns:
        The parsed `Target`; ``Target.url`` is ``url`` unchanged.

    Raises:
        InvalidTarget: ``url`` is not valid for ``type``, or ``type`` is unknown (after
            the checks every url gets, so an empty url is reported first). No other
            exception escapes, whatever the input.

    Results are cached per type, so the probes can call it on every check for the price
    of a dictionary look-up.
    """
    probe_type = PROBE_TYPES.get(type)
    if probe_type is None:
        check_url_text(url)
        raise InvalidTarget(_UNKNOWN)
    return probe_type.parse(url)


def http_fields_apply(type: str) -> bool:
    """Whether the http monitor fields apply to monitors of ``type`` (`ProbeType`); False
    for a name that is no probe type."""
    probe_type = PROBE_TYPES.get(type)
    return probe_type is not None and probe_type.http_fields
