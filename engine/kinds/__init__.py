"""The kinds the engine runs, registered here: one line each (``engine.kind``;
``docs/architecture.md``, "Kinds"). A new kind is one module in this folder, a class
with the :class:`~engine.kind.Kind` protocol built from an
:class:`~engine.kind.EngineContext`, and its line in :data:`KINDS`."""

from __future__ import annotations

from collections.abc import Callable

from ..kind import EngineContext, Kind
from .heartbeats import HeartbeatKind
from .monitors import MonitorKind

__all__ = ["KINDS", "HeartbeatKind", "MonitorKind"]

KINDS: tuple[Callable[[EngineContext], Kind], ...] = (
    MonitorKind,
    HeartbeatKind,
)
"""Every kind, in the order a shard starts their actors."""
