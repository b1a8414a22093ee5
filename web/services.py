"""What the web layer is given at start-up: the store, the engine, the settings.

Passed explicitly to the app factory (no globals). :class:`MonitorEngine` is the seam to
the engine: after a mutation commits, the handler tells the engine and waits for its
acknowledgement before it responds (engine issue, item 6).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from store import Database, MonitorRecord


class MonitorEngine(Protocol):
    """The engine as the web layer sees it."""

    async def monitor_saved(self, monitor: MonitorRecord) -> None:
        """A monitor was created, updated, paused or resumed (already committed): run it
        with this configuration, or stop it when paused. Returns once applied."""

    async def monitor_deleted(self, monitor_id: str) -> None:
        """A monitor was deleted (committed): stop its actor. Returns once stopped."""


class NoEngine:
    """A :class:`MonitorEngine` that runs nothing (``uptrio serve --no-engine``; web
    tests that only exercise the API)."""

    async def monitor_saved(self, monitor: MonitorRecord) -> None:
        """Do nothing."""

    async def monitor_deleted(self, monitor_id: str) -> None:
        """Do nothing."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WebSettings:
    """Settings of the web layer.

    Attributes:
        max_body_bytes: largest request body read, in bytes (default 1 MiB).
    """

    max_body_bytes: int = 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class Services:
    """Everything a handler may use."""

    db: Database
    engine: MonitorEngine
    jwt_secret: bytes
    settings: WebSettings
    data_dir: Path | None = None
