"""The escalation walker: an actor under the root supervisor that walks alerts up their
escalation policies (docs/alerts.md; docs/architecture.md, "Actors").

Every ``poll_seconds`` (0.5 s), and at once again when a walk came back full, it runs
``store.alerts.walk_due`` in a transaction of its own: the due alerts are claimed ``FOR
UPDATE SKIP LOCKED`` (every node runs one walker and none notifies a step twice), their
steps' notifications written and their walks moved on. The notifier sends what it wrote.

Escalation is data, not sleep: a step's due time is a row (``alerts.next_step_at``), so
a walker that dies or a node that fails over loses nothing; the next claim finds it.

Error handling: a database error (``DatabaseUnavailable``, a deadline passed, any
``StoreError``) is logged and waited out until the next poll; the actor never crashes on
it. ``trio.Cancelled`` is never caught: a walk cut short rolls back and is claimed again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog
import trio

from store import Database, StoreError, alerts

__all__ = ["EscalationSettings", "run_escalations"]

log = structlog.get_logger("uptrio.escalation")


@dataclass(frozen=True, slots=True, kw_only=True)
class EscalationSettings:
    """Settings of the escalation walker (docs/alerts.md).

    Attributes:
        poll_seconds: seconds between two looks for due steps (default 0.5): a step is
            notified at most this late, plus the notifier's own poll.
        batch: alerts walked per transaction at most (default 100).
    """

    poll_seconds: float = 0.5
    batch: int = 100


async def walk_once(
    db: Database, settings: EscalationSettings, clock: Callable[[], float] = time.time
) -> int:
    """Walk the steps due now (``store.alerts.walk_due`` at ``clock()``, epoch seconds)
    in one transaction. Returns how many alerts were walked; 0 on a database error
    (logged: the steps stay due and the next poll takes them)."""
    try:
        return await db.transaction(alerts.walk_due, clock(), settings.batch)
    except StoreError as exc:
        log.warning("escalation walk failed", error=str(exc))
        return 0


async def run_escalations(
    db: Database,
    settings: EscalationSettings,
    *,
    clock: Callable[[], float] = time.time,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the walker until cancelled (module docstring); ``task_status.started()`` at
    once.

    Args:
        db: the database, with a deadline on every call (``Database.with_deadline``): a
            hung database costs a poll, not the actor.
        settings: the walker's settings.
        clock: wall-clock time, epoch seconds: what is due.
    """
    task_status.started()
    while True:
        walked = await walk_once(db, settings, clock)
        if walked < settings.batch:  # not a full batch: nothing more is due now
            await trio.sleep(settings.poll_seconds)
