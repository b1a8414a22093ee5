"""Local targets for the benchmark: servers in child processes that answer probes and
log when each monitor's probe arrived (`servers`), and their parent-side control
(`control`); nginx as the http target when it is installed (`nginx`)."""

from .control import TargetProcess, TargetSet, open_targets, stop_process
from .servers import ArrivalLog, read_log, write_log

__all__ = [
    "ArrivalLog",
    "TargetProcess",
    "TargetSet",
    "open_targets",
    "read_log",
    "stop_process",
    "write_log",
]
