"""Uptrio's engine: monitor actors under supervisors, probing real targets.

Imports ``store`` (records, the store actor) and nothing of ``web``.
"""

from .actor import ActorRef, ActorUnavailable, AskTimeout, ask
from .engine import Engine, EngineSettings, run_engine, shard_of
from .health import Health, after_check
from .monitor import EngineStatistics, probe_spec
from .observer import CheckObserver
from .policy import TargetPolicy
from .probes import Prober, ProbeResult, ProbeSpec
from .supervisor import Backoff, Intensity, SupervisorEscalation, SupervisorStatistics
from .targets import InvalidTarget, parse_target

__all__ = [
    "ActorRef",
    "ActorUnavailable",
    "AskTimeout",
    "Backoff",
    "CheckObserver",
    "Engine",
    "EngineSettings",
    "EngineStatistics",
    "Health",
    "Intensity",
    "InvalidTarget",
    "ProbeResult",
    "ProbeSpec",
    "Prober",
    "SupervisorEscalation",
    "SupervisorStatistics",
    "TargetPolicy",
    "after_check",
    "ask",
    "parse_target",
    "probe_spec",
    "run_engine",
    "shard_of",
]
