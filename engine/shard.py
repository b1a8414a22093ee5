"""A shard: one supervisor over the monitor actors of the monitors whose bucket maps to it
(:func:`shard_of`), as the engine (:mod:`engine.engine`) runs them, of the buckets this
node holds (``buckets``: extensions part 6). A shard loads its monitors of those buckets
from the database when it starts (and again after a restart), starts one actor
per monitor, and gives each a graceful stop (:class:`~engine.monitor.Drain`) when it is
closed politely. Its heartbeats run under the same supervisor, as one more child: the
shard's :class:`~engine.heartbeat_group.HeartbeatGroup` (child id ``heartbeats``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import structlog
import trio

from store import (
    Database,
    DatabaseUnavailable,
    HeartbeatRecord,
    MonitorRecord,
    leases,
    monitors,
)

from .actor import ActorRef, ActorUnavailable, open_inbox
from .heartbeat_group import HeartbeatGroup
from .loading import load_when_available
from .monitor import Drain, MonitorDeps, MonitorMessage, run_monitor
from .settings import EngineSettings
from .supervisor import ChildSpec, RestartType, Supervisor, run_supervisor

__all__ = ["DRAIN_SECONDS", "HEARTBEATS_CHILD", "Shard", "shard_of"]

log = structlog.get_logger("uptrio.engine")

DRAIN_SECONDS = 65.0
"""Grace of a graceful stop for each shard and monitor actor, seconds: the longest probe
timeout (60 s) plus a margin; the caller's grace (``--shutdown-seconds``) is the tighter
bound in practice."""

HAND_OVER_DRAIN_SECONDS = 2.0
"""Grace of the monitor actors of buckets this node gives back, seconds: a probe already
sent that takes longer is cancelled (not a result; the node taking the bucket probes that
grid point again)."""


HEARTBEATS_CHILD = "heartbeats"
"""The child id of a shard's heartbeat group."""


@dataclass(slots=True)
class _Entry:
    """A running monitor's handle: its inbox (stable across restarts of its actor), the
    latest record known, and whether the next incarnation checks at once."""

    record: MonitorRecord
    ref: ActorRef[MonitorMessage]
    inbox: trio.MemoryReceiveChannel[MonitorMessage]
    check_now: bool
    bucket: int
    """Its bucket (``store.leases.bucket_of``), kept so reconciliation need not hash."""
    fresh: bool = True
    catch_up: bool = False
    """Taken over from another node: the first incarnation probes a grid point missed in
    the hand-over at once (``engine.monitor.run_monitor``)."""


@dataclass(slots=True)
class Shard:
    """One monitor supervisor and the monitors it runs."""

    index: int
    name: str
    db: Database
    deps: MonitorDeps
    settings: EngineSettings
    supervisor: Supervisor | None = None
    entries: dict[str, _Entry] = field(default_factory=dict)
    touched: set[str] | None = None
    """While the shard loads from the database: the monitors a command changed meanwhile
    (the command is newer than the load's read, so the load leaves them alone)."""
    heartbeats: HeartbeatGroup | None = None
    """The shard's heartbeat actors (a child of its supervisor), or None: none."""
    buckets: set[int] = field(default_factory=set)
    """The buckets of this shard that this node holds (``shard_of`` maps them here)."""

    async def run(self, *, task_status: trio.TaskStatus[Supervisor]) -> None:
        """One incarnation of the shard: a supervisor populated from the database."""
        await run_supervisor(
            self.name,
            populate=self._populate,
            intensity=self.settings.monitor_intensity,
            backoff=self.settings.monitor_backoff,
            on_restart=self._on_restart,
            task_status=task_status,
        )

    def _on_restart(self, child_id: str, exc: Exception | None) -> None:
        restarts = self.deps.stats.supervisor_restarts
        restarts[self.name] = restarts.get(self.name, 0) + 1
        log.warning("actor restarting", supervisor=self.name, child=child_id, error=repr(exc))

    async def _populate(self, supervisor: Supervisor) -> None:
        for entry in self.entries.values():
            entry.ref.inbox.close()
        self.entries.clear()
        self.supervisor = supervisor
        self.touched = set()
        try:
            loaded = await load_when_available(self._load, self.name)
            for record in loaded:
                if record.id not in self.touched and record.id not in self.entries:
                    await self.start(record, check_now=False)
        finally:
            self.touched = None
        if self.heartbeats is not None:
            await supervisor.start_child(
                ChildSpec(
                    child_id=HEARTBEATS_CHILD,
                    start=self.heartbeats.run,
                    restart=RestartType.TRANSIENT,
                    shutdown=HeartbeatGroup.request_close,
                    shutdown_seconds=DRAIN_SECONDS,
                )
            )

    async def _load(self) -> list[MonitorRecord]:
        return await self.db.run(monitors.load_active_monitors, sorted(self.buckets))

    async def lose(self, lost: set[int], *, drain: bool = False) -> None:
        """Buckets this node no longer holds: stop their monitor and heartbeat actors at
        once (another node runs them now; a result still in flight would be refused), or,
        with ``drain`` (buckets this node gives back, still leased to it), let each
        monitor actor finish the probe it sent and hand its check to the store first, all
        at once, within :data:`HAND_OVER_DRAIN_SECONDS`."""
        self.buckets -= lost
        going = [m for m, e in self.entries.items() if e.bucket in lost]
        if drain and self.supervisor is not None:
            supervisor = self.supervisor
            with trio.move_on_after(HAND_OVER_DRAIN_SECONDS):
                async with trio.open_nursery() as nursery:
                    for monitor_id in going:
                        nursery.start_soon(supervisor.stop_child, monitor_id)
        for monitor_id in going:
            await self.stop(monitor_id)
        if self.heartbeats is not None:
            for heartbeat_id in list(self.heartbeats.handles):
                if leases.bucket_of(heartbeat_id) in lost:
                    self.heartbeats.remove(heartbeat_id)

    async def gain(
        self, gained: set[int], records: list[MonitorRecord], beats: list[HeartbeatRecord]
    ) -> None:
        """Buckets this node now holds, with their active monitors and their heartbeats
        (read once for every shard): start an actor for each not already running, on its
        grid point, catching up a grid point the hand-over missed (so a bucket that moves
        leaves no grid point unprobed). Between incarnations the next load reads them
        (``buckets`` already has them)."""
        self.buckets |= gained
        if self.heartbeats is not None:
            for beat in beats:
                if beat.id not in self.heartbeats.handles:
                    self.heartbeats.save(beat)
        if self.supervisor is None:
            return
        for record in records:
            if self.touched is not None:
                self.touched.add(record.id)
            if record.id not in self.entries:
                await self.start(record, check_now=False, catch_up=True)

    async def start(
        self, record: MonitorRecord, *, check_now: bool, catch_up: bool = False
    ) -> None:
        """Start an actor for ``record`` (not paused) under this shard's supervisor;
        ``catch_up``: taken over from another node (:meth:`gain`)."""
        assert self.supervisor is not None
        ref, inbox = open_inbox(self.settings.monitor_inbox_size)
        bucket = leases.bucket_of(record.id)
        entry = _Entry(
            record=record,
            ref=ref,
            inbox=inbox,
            check_now=check_now,
            bucket=bucket,
            catch_up=catch_up,
        )
        self.entries[record.id] = entry
        await self.supervisor.start_child(
            ChildSpec(
                child_id=record.id,
                start=partial(self._incarnation, entry),
                restart=RestartType.TRANSIENT,
                shutdown=partial(_tell_drain, entry.ref),
                shutdown_seconds=DRAIN_SECONDS,
            )
        )

    async def stop(self, monitor_id: str) -> None:
        """Stop a monitor's actor at once (cancelled, in-flight probe included: a pause
        or a delete) and forget it."""
        entry = self.entries.pop(monitor_id, None)
        if self.supervisor is not None:
            await self.supervisor.stop_child(monitor_id, at_once=True)
        if entry is not None:
            entry.ref.inbox.close()

    async def _incarnation(self, entry: _Entry, *, task_status: trio.TaskStatus[None]) -> None:
        check_now, catch_up = entry.check_now and entry.fresh, entry.catch_up and entry.fresh
        if not entry.fresh:  # a restart: the database has the latest config and status
            try:
                stored = await self.db.run(monitors.get_monitor, None, entry.record.id)
            except DatabaseUnavailable:  # an outage: the last config and status known
                stored = entry.record
            if stored is None or stored.status == "paused":
                task_status.started()
                return
            entry.record = stored
        record = entry.record
        entry.fresh = False
        await run_monitor(
            record,
            entry.ref,
            entry.inbox,
            self.deps,
            check_now=check_now,
            catch_up=catch_up,
            task_status=task_status,
        )


def _tell_drain(ref: ActorRef[MonitorMessage], _started: object) -> bool:
    """A monitor actor's ``shutdown`` hook: tell it to drain; False (then it is cancelled
    at once) when its inbox is full or closed."""
    try:
        ref.tell_nowait(Drain())
    except (trio.WouldBlock, ActorUnavailable):
        return False
    return True


def shard_of(monitor_id: str, shard_count: int) -> int:
    """The shard of a monitor or heartbeat: its bucket (``store.leases.bucket_of``, a
    stable hash of its id) modulo ``shard_count``."""
    return leases.bucket_of(monitor_id) % shard_count
