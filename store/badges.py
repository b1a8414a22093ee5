"""A monitor's badge key and what its public badges show (docs/badges.md; the
extensions' part 12, "Badges").

The key is a secret like a schedule's calendar key (:func:`store.schedules.new_calendar_key`):
128 random bits from :mod:`secrets` as 32 hex digits, stored in ``monitors.badge_key``
(migration 0027; NULL while badges are off). Setting or clearing it moves the monitor's
``updated`` but writes no event: events never carry the key (the monitor's snapshot leaves
it out, so an event shows ``badge_key`` null), and nothing a probe runs by changes (it is
not part of the settings digest).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .database import Connection
from .history import Availability, Window, availability
from .monitors import get_monitor
from .records import MonitorRecord
from .schedules import new_calendar_key

__all__ = [
    "BadgeAvailability",
    "BadgeMonitor",
    "badge_availability",
    "badge_monitor",
    "new_badge_key",
    "set_badge_key",
    "valid_badge_key",
]

_KEY = re.compile(r"[0-9a-f]{32}")


def new_badge_key() -> str:
    """A fresh badge key: 128 random bits (:mod:`secrets`) as 32 hex digits, the calendar
    key's recipe."""
    return new_calendar_key()


def valid_badge_key(key: str) -> bool:
    """Whether ``key`` has the shape of a badge key (32 lowercase hex digits): anything
    else names no monitor and costs no query."""
    return _KEY.fullmatch(key) is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class BadgeMonitor:
    """What a badge may show of its monitor: ``id`` (to read its history; never shown),
    ``name`` and ``status`` (``up``, ``down``, ``pending`` or ``paused``)."""

    id: str
    name: str
    status: str


BadgeAvailability = tuple[BadgeMonitor, Availability]
"""A badge's monitor and its availability over the badge's range."""


async def set_badge_key(
    connection: Connection, account_id: str, monitor_id: str, key: str | None, now: int
) -> tuple[MonitorRecord, str | None] | None:
    """Store ``key`` (a new key from :func:`new_badge_key`, or None: badges off) as the
    monitor's badge key, ``updated`` = ``now`` (epoch seconds); the previous key stops
    working when this commits. No event (module docstring). Returns the monitor and its
    previous key (None: it had none), or None when the account has no such monitor. Run
    it in a transaction (the row is locked between the two statements)."""
    previous = await connection.fetchrow(
        "SELECT badge_key FROM monitors WHERE id = $1 AND account_id = $2 FOR UPDATE",
        monitor_id,
        account_id,
    )
    if previous is None:
        return None
    await connection.execute(
        "UPDATE monitors SET badge_key = $2, updated = $3 WHERE id = $1", monitor_id, key, now
    )
    record = await get_monitor(connection, account_id, monitor_id)
    return None if record is None else (record, previous["badge_key"])


async def badge_monitor(connection: Connection, key: str) -> BadgeMonitor | None:
    """The monitor whose badge key is ``key``, or None (an unknown, rotated or cleared
    key all look the same)."""
    row = await connection.fetchrow(
        "SELECT id, name, status FROM monitors WHERE badge_key = $1", key
    )
    return (
        None if row is None else BadgeMonitor(id=row["id"], name=row["name"], status=row["status"])
    )


async def badge_availability(
    connection: Connection,
    key: str,
    seconds: int,
    *,
    now: int,
    rollup_cutoff: int,
    check_cutoff: int,
) -> BadgeAvailability | None:
    """The monitor of ``key`` and its :class:`~store.history.Availability` over the last
    ``seconds`` before ``now`` (epoch seconds; read from rollups by
    :func:`store.history.availability`, never a rescan of raw checks), or None for an
    unknown key. ``rollup_cutoff`` and ``check_cutoff`` as there."""
    monitor = await badge_monitor(connection, key)
    if monitor is None:
        return None
    found = await availability(
        connection,
        monitor.id,
        [Window(now - seconds, now)],
        now=now,
        rollup_cutoff=rollup_cutoff,
        check_cutoff=check_cutoff,
    )
    return None if found is None else (monitor, found[0])
