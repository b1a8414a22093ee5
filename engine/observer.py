"""What the engine tells an observer of its hot path (the service's metrics).

The engine imports nothing of ``web``: the metrics live there (``web.metrics``) and reach
the monitor actors as a :class:`CheckObserver`, passed to :func:`engine.run_engine`.
Counters that can be read when scraped (missed checks, statuses, restarts) are not
observed here but kept in :class:`engine.monitor.EngineStatistics`.
"""

from __future__ import annotations

from typing import Protocol


class CheckObserver(Protocol):
    """Told of every probe and check. Called from monitor actors, once or twice per
    check: each call must take microseconds and must not raise."""

    def probe_started(self, lateness_seconds: float) -> None:
        """A probe started ``lateness_seconds`` seconds after its deadline (after it got
        a slot of the global probe limiter)."""

    def check_finished(self, probe_type: str, ok: bool, duration_seconds: float) -> None:
        """A probe of ``probe_type`` (http, tcp, dns, ping) ended as a check, good or
        failed, after ``duration_seconds`` seconds (its response time)."""
