"""Walkers: actors under the root supervisor that act on rows of the database when they
come due (docs/architecture.md, "Actors"). Three run on every node:

* the **escalation walker** (:func:`run_escalations`; docs/alerts.md) walks alerts up
  their escalation policies: ``store.alerts.walk_due`` claims the due alerts, writes
  their steps' notifications (the notifier sends them) and moves their walks on;
* the **window walker** (:func:`run_window_walk`; docs/maintenance.md, "When a window
  starts and ends") acts on maintenance occurrences that start or end:
  ``store.window_walk.walk_due`` writes ``maintenance.started`` and ``.ended``, opens
  what a window held back once it ends, and tells the engines of a pause;
* the **reminder walker** (:func:`run_shift_reminders`; docs/on-call.md, "Shift
  reminders") plans each schedule's coming shift starts as rows and, 10 minutes before
  each, writes its member's ``shift_starting`` notifications:
  ``store.shift_reminders.walk_due``.

Every ``poll_seconds`` (0.5 s), and at once again when a walk came back full, a walker
runs its walk in a transaction of its own: the due rows are claimed ``FOR UPDATE SKIP
LOCKED``, so every node runs one and none acts on a row twice.

Due times are data, not sleep (``alerts.next_step_at``, an occurrence's ``starts_at``
and ``ends_at``): a walker that dies or a node that fails over loses nothing; the next
claim finds it.

Error handling: a database error (``DatabaseUnavailable``, a deadline passed, any
``StoreError``) is logged and waited out until the next poll; the actor never crashes on
it. ``trio.Cancelled`` is never caught: a walk cut short rolls back and is claimed again.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import structlog
import trio

from store import Connection, Database, StoreError, alerts, shift_reminders, window_walk

__all__ = [
    "WalkerSettings",
    "run_escalations",
    "run_shift_reminders",
    "run_walker",
    "run_window_walk",
]

log = structlog.get_logger("uptrio.walker")

Walk = Callable[[Connection, Any, int], Awaitable[int]]
"""A walk: ``walk(connection, now, limit)`` acts on at most ``limit`` rows due at
``now`` (epoch seconds) inside the caller's transaction and returns how many."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WalkerSettings:
    """Settings of a walker.

    Attributes:
        poll_seconds: seconds between two looks for due rows (default 0.5): a row is
            acted on at most this late (an escalation step, plus the notifier's poll).
        batch: rows walked per transaction at most (default 100).
    """

    poll_seconds: float = 0.5
    batch: int = 100


async def walk_once(
    db: Database,
    walk: Walk,
    settings: WalkerSettings,
    clock: Callable[[], float] = time.time,
    *,
    whole_seconds: bool = False,
) -> int:
    """Run ``walk`` at ``clock()`` (epoch seconds; truncated with ``whole_seconds``) in one
    transaction. Returns how many rows it walked; 0 on a database error (logged: the rows
    stay due and the next poll takes them)."""
    now = clock()
    try:
        return await db.transaction(walk, int(now) if whole_seconds else now, settings.batch)
    except StoreError as exc:
        log.warning("walk failed", walk=getattr(walk, "__module__", "?"), error=str(exc))
        return 0


async def run_walker(
    db: Database,
    settings: WalkerSettings,
    *,
    walk: Walk,
    whole_seconds: bool = False,
    clock: Callable[[], float] = time.time,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run ``walk`` until cancelled (module docstring); ``task_status.started()`` at once.

    Args:
        db: the database, with a deadline on every call (``Database.with_deadline``): a
            hung database costs a poll, not the actor.
        walk: what to run in each transaction (:data:`Walk`).
        settings: the walker's settings.
        whole_seconds: give ``walk`` integer epoch seconds.
        clock: wall-clock time, epoch seconds: what is due.
    """
    task_status.started()
    while True:
        walked = await walk_once(db, walk, settings, clock, whole_seconds=whole_seconds)
        if walked < settings.batch:  # not a full batch: nothing more is due now
            await trio.sleep(settings.poll_seconds)


run_escalations = partial(run_walker, walk=alerts.walk_due)
"""The escalation walker: :func:`run_walker` of ``store.alerts.walk_due``; call it as
``run_escalations(db, settings)``."""

run_window_walk = partial(run_walker, walk=window_walk.walk_due, whole_seconds=True)
"""The window walker: :func:`run_walker` of ``store.window_walk.walk_due`` (whole epoch
seconds); call it as ``run_window_walk(db, settings)``."""

run_shift_reminders = partial(run_walker, walk=shift_reminders.walk_due, whole_seconds=True)
"""The reminder walker: :func:`run_walker` of ``store.shift_reminders.walk_due`` (whole
epoch seconds); call it as ``run_shift_reminders(db, settings)``."""
