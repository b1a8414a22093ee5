"""The listener actor: changes and pings made through other nodes reach this node's
actors within a second (extensions part 6; issue 14, item 3).

A child of the root supervisor (``web.service``, ``listener``) on every node with
leases. It holds one dedicated connection that ``LISTEN``\\s on ``store.notify``'s
channel and, for each batch of notifications:

* drops those of buckets this node does not hold (the owner is told too);
* reads the named monitors and heartbeats (one query each, ``WHERE id = ANY``) and hands
  each to the engine's one apply path, the one the web layer uses
  (:class:`~engine.slot.EngineSlot`: ``monitor_saved`` / ``monitor_deleted`` /
  ``heartbeat_saved`` / ``heartbeat_deleted``, then ``engine.engine.apply_change``): a
  monitor not found active was paused or deleted and its actor stops; a change made
  through this node was applied already, and is applied again harmlessly (the same
  record: a reconfiguration with the same settings);
* hands each ping stored by another node to the heartbeat's actor
  (``EngineSlot.pinged_elsewhere``), which moves its deadline and decides the status
  move (the ping itself is stored already);
* nudges the lease actor (:meth:`~engine.leases.Holding.nudge`) when another node
  registered or gave buckets back, so this one renews at once (a joining node gets its
  share, and a bucket given back is claimed, without waiting for the next renewal).

Losing notifications (a disconnection, a full queue) delays a change, never loses it:
after every (re)connection (when it also nudges the lease actor) and every overflow the
listener asks the engine for one reconciliation (``engine.reconcile``, which also runs
every 5 s and catches a heartbeat up with its stored ``last_success_at``). Every wait
outside the process has a deadline:
the connection and ``LISTEN`` (``deadline_seconds``), the reads, and a ``SELECT 1``
after ``keepalive_seconds`` without a notification (a connection that died silently is
found then). On a lost connection it reconnects by itself with back-off (0.5 s to
10 s), so a database outage does not exhaust the root supervisor's restart intensity.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog
import trio

from store import (
    Database,
    DatabaseUnavailable,
    has_prefix,
    heartbeats,
    leases,
    monitors,
    notify,
)

from .actor import ActorUnavailable
from .leases import Holding
from .slot import EngineSlot

__all__ = ["ListenerSettings", "run_listener"]

log = structlog.get_logger("uptrio.engine")


@dataclass(frozen=True, slots=True, kw_only=True)
class ListenerSettings:
    """Timings of the listener actor, seconds.

    Attributes:
        deadline_seconds: bound of connecting, of one read, and of a liveness check.
        keepalive_seconds: a ``SELECT 1`` after this long without a notification.
        max_backoff_seconds: the longest wait before reconnecting.
    """

    deadline_seconds: float = 5.0
    keepalive_seconds: float = 5.0
    max_backoff_seconds: float = 10.0


async def run_listener(
    db: Database,
    slot: EngineSlot,
    holding: Holding,
    node_name: str,
    settings: ListenerSettings = ListenerSettings(),
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Listen and apply (module docstring) until cancelled (``node_name``: this node's,
    whose own lease notifications are ignored); reports started at once
    (what it misses before its first connection, the reconciliation that follows it
    catches)."""
    task_status.started()
    backoff = 0.5
    while True:
        try:
            async with notify.open_listener(
                db.url, deadline_seconds=settings.deadline_seconds
            ) as listener:
                log.info("listening for changes", channel=notify.CHANNEL)
                backoff = 0.5
                slot.reconcile_now()  # what was missed while not listening
                holding.nudge()
                await _follow(listener, db, slot, holding, node_name, settings)
        except DatabaseUnavailable as exc:
            log.warning("listener disconnected", error=str(exc), retry_seconds=backoff)
        await trio.sleep(backoff)
        backoff = min(backoff * 2, settings.max_backoff_seconds)


async def _follow(
    listener: notify.Listener,
    db: Database,
    slot: EngineSlot,
    holding: Holding,
    node_name: str,
    settings: ListenerSettings,
) -> None:
    """Apply batches of notifications until the connection is lost.

    Raises:
        store.DatabaseUnavailable: the connection ended or did not answer.
    """
    reads = db.with_deadline(settings.deadline_seconds)
    while True:
        payloads: list[str] | None = None
        with trio.move_on_after(settings.keepalive_seconds):
            payloads = await listener.receive()
        if payloads is None:
            await listener.check(settings.deadline_seconds)
            continue
        if listener.overflowed:
            listener.overflowed = False
            slot.reconcile_now()
        try:
            await _apply(payloads, reads, slot, holding, node_name)
        except (DatabaseUnavailable, ActorUnavailable) as exc:
            # the reconciliation (every 5 s) brings these changes
            log.warning("notified changes not applied", error=str(exc))


async def _apply(
    payloads: list[str], db: Database, slot: EngineSlot, holding: Holding, node_name: str
) -> None:
    """Apply one batch (module docstring)."""
    held = holding.held
    changed: set[str] = set()
    for payload in payloads:
        found = notify.parse_notification(payload)
        if found is not None and found.leases_of is not None:
            if found.leases_of != node_name:
                holding.nudge()
            continue
        if found is None or leases.bucket_of(found.resource_id) not in held:
            continue
        if found.kind is None:
            changed.add(found.resource_id)
        elif has_prefix(found.resource_id, "hbt"):
            slot.pinged_elsewhere(found.resource_id, found.kind, found.wall)
    monitor_ids = sorted(i for i in changed if has_prefix(i, "mon"))
    heartbeat_ids = sorted(i for i in changed if has_prefix(i, "hbt"))
    if monitor_ids:
        active = {r.id: r for r in await db.run(monitors.load_active_monitors, None, monitor_ids)}
        for monitor_id in monitor_ids:
            if (record := active.get(monitor_id)) is not None:
                await slot.monitor_saved(record)
            else:
                await slot.monitor_deleted(monitor_id)  # paused or deleted: it stops
    if heartbeat_ids:
        beats = await db.run(heartbeats.load_heartbeats, None, ids=heartbeat_ids)
        found_beats = {h.id: h for h in beats}
        for heartbeat_id in heartbeat_ids:
            if (beat := found_beats.get(heartbeat_id)) is not None:
                await slot.heartbeat_saved(beat)
            else:
                await slot.heartbeat_deleted(heartbeat_id)
