"""The listener actor: changes and pings made through other nodes reach this node's
actors within a second (docs/several-nodes.md, "Changes made through
another node").

A child of the root supervisor (``listener``) on every node with leases. It holds one
dedicated connection that ``LISTEN``\\s on ``store.notify``'s channel and, for each batch
of notifications:

* drops those of buckets this node does not hold (the owner is told too);
* reads the named resources, one query a kind (``Kind.load`` with ``ids``), and hands
  each to the engine's one verb, the one the API's handlers use
  (:meth:`~engine.handle.EngineHandle.apply`): a resource not found (a monitor paused or
  deleted, a heartbeat deleted) gets None and its actor stops; a change made through
  this node was applied already, and is applied again harmlessly (the same record asks
  nothing new);
* hands each event another node stored (a heartbeat's ping) to its kind
  (:meth:`~engine.handle.EngineHandle.heard`), whose actor moves its deadline and decides
  the status move (the ping itself is stored already);
* nudges the lease actor (:meth:`~engine.leases.Holding.nudge`) when another node
  registered or gave buckets back, so this one renews at once (a joining node gets its
  share, and a bucket given back is claimed, without waiting for the next renewal).

Losing notifications (a disconnection, a full queue) delays a change, never loses it:
after every (re)connection (when it also nudges the lease actor) and every overflow the
listener asks the engine for one reconciliation (``engine.reconcile``, which also runs
every 5 s). Every wait outside the process has a deadline: the connection and ``LISTEN``
(``deadline_seconds``), the reads, and a ``SELECT 1`` after ``keepalive_seconds``
without a notification (a connection that died silently is found then). On a lost
connection it reconnects by itself with back-off (0.5 s to 10 s), so a database outage
does not exhaust the root supervisor's restart intensity.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog
import trio

from store import Database, DatabaseUnavailable, leases, notify

from .actor import ActorUnavailable
from .handle import EngineHandle
from .leases import Holding

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
    engine: EngineHandle,
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
                engine.reconcile_now()  # what was missed while not listening
                holding.nudge()
                await _follow(listener, db, engine, holding, node_name, settings)
        except DatabaseUnavailable as exc:
            log.warning("listener disconnected", error=str(exc), retry_seconds=backoff)
        await trio.sleep(backoff)
        backoff = min(backoff * 2, settings.max_backoff_seconds)


async def _follow(
    listener: notify.Listener,
    db: Database,
    engine: EngineHandle,
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
            engine.reconcile_now()
        try:
            await _apply(payloads, reads, engine, holding, node_name)
        except (DatabaseUnavailable, ActorUnavailable) as exc:
            # the reconciliation (every 5 s) brings these changes
            log.warning("notified changes not applied", error=str(exc))


async def _apply(
    payloads: list[str], db: Database, engine: EngineHandle, holding: Holding, node_name: str
) -> None:
    """Apply one batch (module docstring)."""
    held = holding.held
    changed: dict[str, list[str]] = {}
    for payload in payloads:
        found = notify.parse_notification(payload)
        if found is not None and found.leases_of is not None:
            if found.leases_of != node_name:
                holding.nudge()
            continue
        if found is None or not leases.held_in_either(leases.bucket_of(found.resource_id), held):
            continue
        if found.kind is None:
            prefix = found.resource_id.partition("_")[0]
            changed.setdefault(prefix, []).append(found.resource_id)
        else:
            engine.heard(found.resource_id, found.kind, found.wall)
    running = engine.current
    if running is None:
        return  # between incarnations: the next one loads the committed changes
    for prefix, ids in sorted(changed.items()):
        kind = running.kind(prefix)
        if kind is None:
            continue
        unique = sorted(set(ids))
        stored = {r.id: r for r in await kind.load(None, unique, db=db)}
        for resource_id in unique:
            await engine.apply(resource_id, stored.get(resource_id))
