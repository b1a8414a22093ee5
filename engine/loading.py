"""Reading what a supervisor runs from the database, across an outage."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog
import trio

from store import DatabaseUnavailable

__all__ = ["load_when_available"]

log = structlog.get_logger("uptrio.engine")

T = TypeVar("T")


async def load_when_available(load: Callable[[], Awaitable[list[T]]], name: str) -> list[T]:
    """``await load()`` (supervisor ``name``'s read of what it runs: monitors,
    heartbeats), waiting out a database outage (retried every 0.5 s doubling to 5 s),
    so a supervisor (re)loading during an outage waits for the database instead of
    crashing into its parent's restart intensity.

    Raises whatever ``load`` raises but ``store.DatabaseUnavailable``.
    """
    delay_seconds = 0.5
    while True:
        try:
            return await load()
        except DatabaseUnavailable as exc:
            log.warning(
                "cannot load from the database; retrying",
                supervisor=name,
                error=str(exc),
                retry_in_seconds=delay_seconds,
            )
            await trio.sleep(delay_seconds)
            delay_seconds = min(5.0, delay_seconds * 2)
