"""The engine: the supervision tree of monitor and heartbeat actors, and its command
inbox.

::

    engine (supervisor: shards as children, restart intensity `shard_intensity`)
    ├── shard-0 (supervisor: monitor actors, one_for_one, `monitor_intensity`, back-off)
    │   ├── mon_...  (engine.monitor.run_monitor)
    │   ├── ...
    │   └── heartbeats (engine.heartbeat_group: a task per heartbeat, run_heartbeat)
    └── shard-N-1

Heartbeats are spread over the shards by the same hash as monitors. The engine keeps
every heartbeat's ping key in memory (:meth:`Engine.find_heartbeat`): the web layer's
ping endpoints find a heartbeat's actor there, without a query.

Monitors are spread over ``shard_count`` shards by a hash of their id, so one flapping
monitor can exhaust at most its own shard's restart intensity; a shard that escalates is
restarted by the engine supervisor and reloads its monitors from the database (the
source of truth: the web layer commits before it tells the engine). Past the engine's own
intensity the failure escalates to the caller of :func:`run_engine`.

The web layer reaches the engine through :class:`Engine` (the ``MonitorEngine`` of
``web.deps``): ``monitor_saved`` and ``monitor_deleted`` ask the engine's command
actor and return once the change is in effect (the actor started, reconfigured or
stopped), so no check starts after a pause response is sent.

Graceful stop (issue 15, item 4): the engine's ``shutdown`` hook is :meth:`Engine.stop`.
The tree is then stopped with OTP's shutdown ladder, level by level, while commands are
still answered: each shard is asked to close (``Supervisor.request_close``), and each of its
monitor actors is told :class:`~engine.monitor.Drain`: it starts no new probe, lets the
one already sent finish (bounded by the probe's own timeout), hands its check to the
store, and returns. Each level is cancelled past its grace (65 s: the longest probe
timeout plus a margin; the caller's own grace, ``--shutdown-seconds``, bounds it all). A
pause or a delete stops its actor at once instead (``stop_child(..., at_once=True)``):
the response does not wait for a probe.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from functools import partial

import structlog
import trio

from store import (
    Database,
    HeartbeatRecord,
    MonitorRecord,
    StoreWriter,
    has_prefix,
    leases,
)

from .actor import ActorRef, ActorUnavailable, Reply, answer, ask, open_inbox
from .heap import freeze_heap, keep_heap_frozen, unfrozen_on_exit, young_gc_threshold
from .heartbeat_group import HeartbeatGroup, HeartbeatHandle
from .leases import Holding
from .monitor import (
    EngineStatistics,
    MonitorDeps,
    Reconfigure,
)
from .observer import CheckObserver
from .probes import Prober
from .rebalance import Rebalance, follow, rebalance
from .reconcile import reconcile, same_settings, tick
from .settings import EngineSettings
from .shard import DRAIN_SECONDS, Shard, shard_of
from .supervisor import (
    ChildSpec,
    Supervisor,
    SupervisorError,
    SupervisorStatistics,
    open_supervisor,
)

log = structlog.get_logger("uptrio.engine")


@dataclass(frozen=True, slots=True, kw_only=True)
class Save:
    """A monitor or a heartbeat was created, updated, paused or resumed (committed)."""

    record: MonitorRecord | HeartbeatRecord
    reply: Reply[None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Remove:
    """A monitor or a heartbeat (by its ``mon_`` or ``hbt_`` id) was deleted (committed)."""

    resource_id: str
    reply: Reply[None]


@dataclass(frozen=True, slots=True)
class Reconcile:
    """Time to compare the held buckets' monitors and heartbeats in the database with
    the actors running (``engine.reconcile``)."""


EngineMessage = Save | Remove | Rebalance | Reconcile


class Engine:
    """The engine's handle for the web layer and operators (implements
    ``web.deps.MonitorEngine``)."""

    def __init__(
        self,
        ref: ActorRef[EngineMessage],
        root: Supervisor,
        shards: list[Shard],
        stats: EngineStatistics,
        settings: EngineSettings,
        keys: dict[str, HeartbeatHandle],
    ) -> None:
        self._ref = ref
        self._keys = keys
        self.root = root
        self.shards = shards
        self.statistics = stats
        self.settings = settings
        self._stop_requested = trio.Event()

    async def monitor_saved(self, monitor: MonitorRecord) -> None:
        """Run ``monitor`` with this configuration (or stop it when paused); returns once
        in effect.

        Raises:
            engine.actor.ActorUnavailable: the engine is not running or did not answer
                within ``ask_timeout_seconds``.
        """

        await self._save(monitor)

    async def monitor_deleted(self, monitor_id: str) -> None:
        """Stop the monitor's actor; returns once stopped.

        Raises:
            engine.actor.ActorUnavailable: as :meth:`monitor_saved`.
        """
        await self._remove(monitor_id)

    async def heartbeat_saved(self, heartbeat: HeartbeatRecord) -> None:
        """Run ``heartbeat`` with this record (or keep only its key when paused);
        returns once in effect.

        Raises:
            engine.actor.ActorUnavailable: as :meth:`monitor_saved`.
        """
        await self._save(heartbeat)

    async def heartbeat_deleted(self, heartbeat_id: str) -> None:
        """Stop the heartbeat's actor and forget its ping key; returns once done.

        Raises:
            engine.actor.ActorUnavailable: as :meth:`monitor_saved`.
        """
        await self._remove(heartbeat_id)

    async def find_heartbeat(self, ping_key: str) -> HeartbeatHandle | None:
        """The heartbeat whose ping key is ``ping_key`` (paused ones included), or None:
        a dictionary lookup, no query (and no checkpoint)."""
        return self._keys.get(ping_key)

    def pinged_elsewhere(self, heartbeat_id: str, kind: str, wall: float) -> None:
        """Another node stored a ping of ``kind`` of heartbeat ``heartbeat_id`` at
        ``wall`` (epoch seconds; ``engine.listener``): its actor, if it runs here, moves
        its deadline and decides the status move. Not waited for: a ping its actor
        cannot take now is caught up by the next reconciliation."""
        shard = self.shards[shard_of(heartbeat_id, len(self.shards))]
        if shard.heartbeats is not None:
            shard.heartbeats.stored_elsewhere(heartbeat_id, kind, wall)

    def reconcile_now(self) -> None:
        """Ask for one reconciliation (``engine.reconcile``) now, without waiting: after
        the listener (re)connected or dropped notifications."""
        with contextlib.suppress(trio.WouldBlock, ActorUnavailable):
            self._ref.tell_nowait(Reconcile())

    async def _save(self, record: MonitorRecord | HeartbeatRecord) -> None:
        def make(reply: Reply[None]) -> Save:
            return Save(record=record, reply=reply)

        await ask(self._ref, make, timeout_seconds=self.settings.ask_timeout_seconds)

    async def _remove(self, resource_id: str) -> None:
        def make(reply: Reply[None]) -> Remove:
            return Remove(resource_id=resource_id, reply=reply)

        await ask(self._ref, make, timeout_seconds=self.settings.ask_timeout_seconds)

    def stop(self) -> None:
        """Stop gracefully (the engine child's ``shutdown`` hook): every monitor actor
        drains (see the module docstring), then :func:`run_engine` returns. Commands are
        still answered meanwhile; a start or a restart of a monitor is left to the next
        load from the database (the web layer committed it first)."""
        self._stop_requested.set()

    def running(self) -> int:
        """Monitor actors currently registered."""
        return sum(len(s.entries) for s in self.shards)

    def supervisors(self) -> list[SupervisorStatistics]:
        """Statistics of the engine supervisor and of every live shard."""
        found = [self.root.statistics()]
        found += [s.supervisor.statistics() for s in self.shards if s.supervisor is not None]
        return found


async def _handle(
    shards: list[Shard], message: EngineMessage, ask_seconds: float, *, stopping: bool
) -> None:
    if isinstance(message, Rebalance | Reconcile):
        return  # handled by _rebalance and reconcile
    if isinstance(message, Save):
        await apply_change(shards, message.record.id, message.record, ask_seconds, stopping)
    else:
        await apply_change(shards, message.resource_id, None, ask_seconds, stopping)


async def apply_change(
    shards: list[Shard],
    resource_id: str,
    record: MonitorRecord | HeartbeatRecord | None,
    ask_seconds: float,
    stopping: bool,
) -> None:
    """Apply a committed change of monitor or heartbeat ``resource_id`` to its actor
    (``record`` None: deleted): start, reconfigure or stop it; nothing when this node does
    not hold its bucket (extensions part 6: the owner applies it)."""
    shard = shards[shard_of(resource_id, len(shards))]
    if leases.bucket_of(resource_id) not in shard.buckets:
        return  # another node holds its bucket: the change reaches it there
    if shard.heartbeats is not None and has_prefix(resource_id, "hbt"):
        if isinstance(record, HeartbeatRecord):
            shard.heartbeats.save(record)
        else:
            shard.heartbeats.remove(resource_id)
        return
    if shard.touched is not None:
        shard.touched.add(resource_id)
    match record:
        case MonitorRecord():
            if shard.supervisor is None:
                return  # the shard is (re)loading from the database, which has the change
            entry = shard.entries.get(record.id)
            running = entry is not None and shard.supervisor.has_child(record.id)
            if record.status == "paused":
                if entry is not None or running:
                    await shard.stop(record.id)
            elif entry is None or not running or entry.record.run_epoch != record.run_epoch:
                await shard.stop(record.id)
                if not stopping:  # else the next load from the database starts it
                    await shard.start(record, check_now=True)
            elif same_settings(entry.record, record):
                entry.record = record  # nothing new (this node's own change, notified)
            else:
                entry.record = record

                def make(reply: Reply[None]) -> Reconfigure:
                    return Reconfigure(monitor=record, reply=reply)

                # When it is restarting, its next incarnation reads the stored config.
                with contextlib.suppress(ActorUnavailable):
                    await ask(entry.ref, make, timeout_seconds=ask_seconds)
        case None:
            await shard.stop(resource_id)


async def run_engine(
    db: Database,
    writer: StoreWriter,
    prober: Prober,
    settings: EngineSettings = EngineSettings(),
    *,
    stats: EngineStatistics | None = None,
    observer: CheckObserver | None = None,
    holding: Holding | None = None,
    task_status: trio.TaskStatus[Engine] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Load every active monitor of the buckets ``holding`` holds (every bucket when
    None: a lone engine), run it, follow ``holding`` as buckets come and go, and serve
    commands until cancelled.

    Reports an :class:`Engine` through ``task_status.started`` once every monitor's actor
    runs. ``stats`` (new when None) is where the actors count; pass the same one to every
    incarnation of a restarted engine so counters keep going. ``observer`` (the service's
    metrics) is told of every probe and check.

    Raises:
        engine.supervisor.SupervisorEscalation: shards kept failing past
            ``shard_intensity``.
    """
    stats = EngineStatistics() if stats is None else stats
    deps = MonitorDeps(
        prober=prober,
        writer=writer,
        limiter=trio.CapacityLimiter(settings.max_probes_in_flight),
        stats=stats,
        observer=observer,
        lease_epoch=holding.epoch_of if holding is not None and holding.fenced else None,
        may_probe=holding.may_probe if holding is not None and holding.fenced else None,
    )
    shards = [
        Shard(index=i, name=f"shard-{i}", db=db, deps=deps, settings=settings)
        for i in range(settings.shard_count)
    ]
    holding = Holding.everything() if holding is None else holding
    started_with = dict(holding.held)
    for bucket in started_with:
        shards[bucket % len(shards)].buckets.add(bucket)
    keys: dict[str, HeartbeatHandle] = {}
    for shard in shards:
        shard.heartbeats = HeartbeatGroup(
            name=f"{shard.name}/heartbeats",
            buckets=partial(sorted, shard.buckets),
            db=db,
            writer=writer,
            keys=keys,
            inbox_size=settings.heartbeat_inbox_size,
            ping_timeout_seconds=settings.ping_timeout_seconds,
            ping_ack_committed=settings.ping_ack_committed,
            lease_epoch=deps.lease_epoch,
        )

    def on_restart(child_id: str, exc: Exception | None) -> None:
        stats.supervisor_restarts["engine"] = stats.supervisor_restarts.get("engine", 0) + 1
        log.warning("shard restarting", supervisor="engine", shard=child_id, error=repr(exc))

    async with (
        young_gc_threshold(settings.gc_young_threshold),
        open_supervisor(
            "engine", intensity=settings.shard_intensity, on_restart=on_restart
        ) as root,
    ):
        for shard in shards:
            await root.start_child(
                ChildSpec(
                    child_id=shard.name,
                    start=shard.run,
                    shutdown=Supervisor.request_close,
                    shutdown_seconds=DRAIN_SECONDS,
                )
            )
        ref, inbox = open_inbox[EngineMessage](1024)
        log.info("engine started", monitors=sum(len(s.entries) for s in shards), shards=len(shards))
        every = settings.gc_freeze_every_seconds
        engine = Engine(ref, root, shards, stats, settings, keys)
        with unfrozen_on_exit(every is not None):
            if every is not None:
                freeze_heap()
            task_status.started(engine)
            async with inbox, trio.open_nursery() as nursery:
                nursery.start_soon(
                    _serve_commands,
                    inbox,
                    shards,
                    settings,
                    engine,
                    db,
                    dict(started_with),
                    holding,
                )
                nursery.start_soon(follow, holding, started_with, ref.tell)
                nursery.start_soon(tick, ref, Reconcile(), settings.reconcile_seconds)
                if every is not None:
                    nursery.start_soon(keep_heap_frozen, every)
                await engine._stop_requested.wait()
                log.info("engine stopping; monitors finish the probes in flight")
                await root.close()  # commands are still served meanwhile
                nursery.cancel_scope.cancel()


async def _serve_commands(
    inbox: trio.MemoryReceiveChannel[EngineMessage],
    shards: list[Shard],
    settings: EngineSettings,
    engine: Engine,
    db: Database,
    epochs: dict[int, int],
    holding: Holding,
) -> None:
    """The engine's command actor: handle each command in turn (once ``engine`` is
    stopping, none starts a monitor actor). ``epochs``: the buckets the shards run, with
    their lease epochs; each rebalance is acknowledged to ``holding``."""
    async for message in inbox:
        if isinstance(message, Reconcile):
            if not engine._stop_requested.is_set():
                apply = partial(apply_change, shards)
                await reconcile(db, shards, epochs, apply, settings, engine.statistics)
            continue
        if isinstance(message, Rebalance):
            try:
                stopping = engine._stop_requested.is_set()
                await rebalance(db, shards, epochs, message.held, stopping, message.releasing)
            except SupervisorError as exc:  # its next load reads the buckets held
                log.warning("shard restarting; buckets apply on reload", error=repr(exc))
            holding.mark_applied(message.version)
            continue
        with message.reply:
            try:
                await _handle(
                    shards,
                    message,
                    settings.ask_timeout_seconds,
                    stopping=engine._stop_requested.is_set(),
                )
            except SupervisorError as exc:
                # The shard is between incarnations (escalated, not yet reloaded) or
                # stopping: its next load reads the committed change.
                log.warning("shard restarting; change applies on reload", error=repr(exc))
            answer(message.reply, None)
