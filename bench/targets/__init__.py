"""Local targets for the benchmark: servers in child processes that answer probes and
log when each monitor's probe arrived (`servers`), and their parent-side control
(`control`); nginx as the http target when it is installed (`nginx`).

Each target is ``python -m bench.targets KIND``, which runs this package first: the
parent side (`control`, which reads the plan's types from the service's engine) is
imported only when one of its names is asked for (PEP 562 ``__getattr__``), so that a
target starts in a tenth of the time, on the standard library and `servers` alone.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .servers import ArrivalLog, read_log, write_log

if TYPE_CHECKING:
    from .control import TargetProcess, TargetSet, open_targets, stop_process

__all__ = [
    "ArrivalLog",
    "TargetProcess",
    "TargetSet",
    "open_targets",
    "read_log",
    "stop_process",
    "write_log",
]

_CONTROL = frozenset({"TargetProcess", "TargetSet", "open_targets", "stop_process"})


def __getattr__(name: str) -> object:
    """`control`'s names, imported on first use.

    Raises:
        AttributeError: a name neither here nor in `control`.
    """
    if name in _CONTROL:
        return getattr(importlib.import_module(".control", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
