"""Heartbeats as a kind (``engine.kind``; ``docs/architecture.md``, "Kinds"; docs
heartbeats page): each shard runs its heartbeats in one supervised child, its
:class:`~engine.heartbeat_group.HeartbeatGroup` (one trio task per heartbeat that is not
paused), and the kind keeps every ping key of the node's heartbeats in memory (paused
ones included), so a ping finds its actor without a query (:meth:`HeartbeatKind.find`).

The desired state of a heartbeat is its record: None (deleted, or another node's) stops
its actor and forgets its key; a paused one keeps only its key; any other runs it with
that record (retuned in place when its run is the same). Reconciliation reads the
heartbeats of the held buckets whole and compares them by run epoch, period and grace;
a stored success newer than the actor knows (a ping stored by another node whose
notification was lost) is handed to it. Pings stored by another node and notified
(``store.notify``) reach the actor through :meth:`HeartbeatKind.heard`.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from store import Database, HeartbeatRecord, heartbeats, leases

from ..heartbeat import HeartbeatConfig
from ..heartbeat_group import HeartbeatGroup, HeartbeatHandle
from ..kind import Apply, EngineContext, Runner, ShardContext
from ..supervisor import ChildSpec, RestartType, Supervisor
from .monitors import DRAIN_SECONDS

__all__ = ["HEARTBEATS_CHILD", "HeartbeatKind"]

log = structlog.get_logger("uptrio.engine")

HEARTBEATS_CHILD = "heartbeats"
"""The child id of a shard's heartbeat group."""


class HeartbeatKind:
    """The heartbeats kind of one engine incarnation (module docstring)."""

    prefix = "hbt"

    def __init__(self, context: EngineContext) -> None:
        self.context = context
        self.keys: dict[str, HeartbeatHandle] = {}
        """Ping key to handle, every heartbeat this node holds (shared by the groups)."""

    def runner(self, shard: ShardContext) -> HeartbeatRunner:
        """The heartbeat group of ``shard``."""
        context = self.context
        holding = context.holding
        group = HeartbeatGroup(
            name=f"{shard.name}/heartbeats",
            buckets=shard.buckets,
            db=context.db,
            writer=context.writer,
            keys=self.keys,
            inbox_size=context.settings.heartbeat_inbox_size,
            ping_timeout_seconds=context.settings.ping_timeout_seconds,
            ping_ack_committed=context.settings.ping_ack_committed,
            lease_epoch=holding.epoch_of if holding.fenced else None,
        )
        return HeartbeatRunner(group)

    def find(self, ping_key: str) -> HeartbeatHandle | None:
        """The heartbeat of ``ping_key`` (paused ones included), or None: a dictionary
        lookup, no query."""
        return self.keys.get(ping_key)

    async def load(
        self,
        buckets: Sequence[int] | None,
        ids: Sequence[str] | None = None,
        *,
        db: Database | None = None,
    ) -> list[HeartbeatRecord]:
        """Every heartbeat of ``buckets`` or ``ids``, paused ones included
        (``store.heartbeats.load_heartbeats``).

        Raises:
            store.DatabaseUnavailable: the database did not answer.
        """
        return await (db or self.context.db).run(heartbeats.load_heartbeats, buckets, ids=ids)

    async def reconcile(self, runners: Sequence[Runner], held: Sequence[int], apply: Apply) -> None:
        """The whole comparison of the module docstring.

        Raises:
            store.DatabaseUnavailable: the database did not answer.
        """
        groups = [r.group for r in runners if isinstance(r, HeartbeatRunner)]
        found = {h.id: h for h in await self.load(held)}
        for group in groups:
            for heartbeat_id, handle in list(group.handles.items()):
                beat = found.get(heartbeat_id)
                if (
                    beat is None
                    or HeartbeatConfig.of(beat, handle.config.lease_epoch) != handle.config
                ):
                    await _reconciled(apply, heartbeat_id, beat)
                elif (
                    success := beat.last_success_at
                ) is not None and success > handle.seen_success:
                    # a success stored by another node whose notification was lost (or
                    # one of this node's own, which its actor knows already and ignores)
                    group.stored_elsewhere(heartbeat_id, "success", success)
        for beat in found.values():
            if all(beat.id not in g.handles for g in groups):
                await _reconciled(apply, beat.id, beat)

    def heard(self, runners: Sequence[Runner], resource_id: str, detail: str, wall: float) -> None:
        """A ping of kind ``detail`` stored by another node at ``wall``: its actor moves
        its deadline and decides the status move (not waited for)."""
        for runner in runners:
            if isinstance(runner, HeartbeatRunner) and resource_id in runner.group.handles:
                runner.group.stored_elsewhere(resource_id, detail, wall)


async def _reconciled(apply: Apply, resource_id: str, record: HeartbeatRecord | None) -> None:
    log.info("reconciled", resource=resource_id, removed=record is None)
    await apply(resource_id, record)


class HeartbeatRunner:
    """The heartbeat group of one shard, as a :class:`~engine.kind.Runner`."""

    def __init__(self, group: HeartbeatGroup) -> None:
        self.group = group

    async def populate(self, supervisor: Supervisor) -> None:
        """Start the group as one more child of the shard's supervisor (it loads its
        heartbeats itself)."""
        await supervisor.start_child(
            ChildSpec(
                child_id=HEARTBEATS_CHILD,
                start=self.group.run,
                restart=RestartType.TRANSIENT,
                shutdown=HeartbeatGroup.request_close,
                shutdown_seconds=DRAIN_SECONDS,
            )
        )

    async def apply(self, resource_id: str, record: HeartbeatRecord | None) -> None:
        """Run the heartbeat with ``record`` (paused: keep only its key), or forget it."""
        if record is None:
            self.group.remove(resource_id)
        else:
            self.group.save(record)

    async def lose(self, buckets: set[int], *, drain: bool) -> None:
        """Stop the actors of ``buckets`` and forget their keys (a heartbeat does no I/O:
        nothing to drain)."""
        for heartbeat_id in list(self.group.handles):
            if leases.bucket_of(heartbeat_id) in buckets:
                self.group.remove(heartbeat_id)

    async def gain(self, records: Sequence[HeartbeatRecord]) -> None:
        """Run each of ``records`` not already known."""
        for record in records:
            if record.id not in self.group.handles:
                self.group.save(record)
