"""The engine: the supervision tree of monitor actors, and its command inbox.

::

    engine (supervisor: shards as children, restart intensity `shard_intensity`)
    ├── shard-0 (supervisor: monitor actors, one_for_one, `monitor_intensity`, back-off)
    │   ├── mon_...  (engine.monitor.run_monitor)
    │   └── ...
    └── shard-N-1

Monitors are spread over ``shard_count`` shards by a hash of their id, so one flapping
monitor can exhaust at most its own shard's restart intensity; a shard that escalates is
restarted by the engine supervisor and reloads its monitors from the database (the
source of truth: the web layer commits before it tells the engine). Past the engine's own
intensity the failure escalates to the caller of :func:`run_engine`.

The web layer reaches the engine through :class:`Engine` (the ``MonitorEngine`` of
``web.services``): ``monitor_saved`` and ``monitor_deleted`` ask the engine's command
actor and return once the change is in effect (the actor started, reconfigured or
stopped), so no check starts after a pause response is sent.
"""

from __future__ import annotations

import contextlib
import zlib
from dataclasses import dataclass, field
from functools import partial

import structlog
import trio

from store import Database, MonitorRecord, monitors
from store.actor import CheckWriter

from .actor import ActorRef, ActorUnavailable, Reply, answer, ask, open_inbox
from .monitor import EngineStatistics, MonitorDeps, MonitorMessage, Reconfigure, run_monitor
from .probes import Prober
from .supervisor import (
    Backoff,
    ChildSpec,
    Intensity,
    RestartType,
    Supervisor,
    SupervisorError,
    SupervisorStatistics,
    open_supervisor,
    run_supervisor,
)

log = structlog.get_logger("uptrio.engine")


_MONITOR_INTENSITY = Intensity(max_restarts=50, period_seconds=60.0)
_MONITOR_BACKOFF = Backoff(min_seconds=0.5, max_seconds=30.0, random_factor=0.2)
_SHARD_INTENSITY = Intensity(max_restarts=5, period_seconds=60.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineSettings:
    """Engine settings (command-line flags of ``uptrio serve``).

    Attributes:
        max_probes_in_flight: global cap on concurrent probes (default 1,000).
        shard_count: monitor supervisors (default 8).
        monitor_intensity: restarts of monitor actors one shard tolerates per period.
        monitor_backoff: back-off before restarting a crashed monitor actor.
        shard_intensity: shard restarts the engine supervisor tolerates per period.
        ask_timeout_seconds: how long a web request waits for the engine's acknowledgement.
    """

    max_probes_in_flight: int = 1000
    shard_count: int = 8
    monitor_intensity: Intensity = _MONITOR_INTENSITY
    monitor_backoff: Backoff = _MONITOR_BACKOFF
    shard_intensity: Intensity = _SHARD_INTENSITY
    ask_timeout_seconds: float = 10.0
    monitor_inbox_size: int = 16


@dataclass(frozen=True, slots=True, kw_only=True)
class Save:
    """A monitor was created, updated, paused or resumed (committed)."""

    monitor: MonitorRecord
    reply: Reply[None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Remove:
    """A monitor was deleted (committed)."""

    monitor_id: str
    reply: Reply[None]


EngineMessage = Save | Remove


@dataclass(slots=True)
class _Entry:
    """A running monitor's handle: its inbox (stable across restarts of its actor), the
    latest record known, and whether the next incarnation checks at once."""

    record: MonitorRecord
    ref: ActorRef[MonitorMessage]
    inbox: trio.MemoryReceiveChannel[MonitorMessage]
    check_now: bool
    fresh: bool = True


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
        log.warning(
            "monitor actor restarting", supervisor=self.name, monitor=child_id, error=repr(exc)
        )

    async def _populate(self, supervisor: Supervisor) -> None:
        for entry in self.entries.values():
            entry.ref.inbox.close()
        self.entries.clear()
        self.supervisor = supervisor
        shard_count = self.settings.shard_count
        loaded = await self.db.run(monitors.load_active_monitors)
        for record in loaded:
            if shard_of(record.id, shard_count) == self.index:
                await self.start(record, check_now=False)

    async def start(self, record: MonitorRecord, *, check_now: bool) -> None:
        """Start an actor for ``record`` (not paused) under this shard's supervisor."""
        assert self.supervisor is not None
        ref, inbox = open_inbox(self.settings.monitor_inbox_size)
        entry = _Entry(record=record, ref=ref, inbox=inbox, check_now=check_now)
        self.entries[record.id] = entry
        await self.supervisor.start_child(
            ChildSpec(
                child_id=record.id,
                start=partial(self._incarnation, entry),
                restart=RestartType.TRANSIENT,
            )
        )

    async def stop(self, monitor_id: str) -> None:
        """Stop a monitor's actor (cancelled, in-flight probe included) and forget it."""
        entry = self.entries.pop(monitor_id, None)
        if self.supervisor is not None:
            await self.supervisor.stop_child(monitor_id)
        if entry is not None:
            entry.ref.inbox.close()

    async def _incarnation(self, entry: _Entry, *, task_status: trio.TaskStatus[None]) -> None:
        check_now = entry.check_now and entry.fresh
        if not entry.fresh:  # a restart: the database has the latest config and status
            stored = await self.db.run(monitors.get_monitor, None, entry.record.id)
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
            task_status=task_status,
        )


def shard_of(monitor_id: str, shard_count: int) -> int:
    """The shard of a monitor: a stable hash of its id modulo ``shard_count``."""
    return zlib.crc32(monitor_id.encode()) % shard_count


class Engine:
    """The engine's handle for the web layer and operators (implements
    ``web.services.MonitorEngine``)."""

    def __init__(
        self,
        ref: ActorRef[EngineMessage],
        root: Supervisor,
        shards: list[Shard],
        stats: EngineStatistics,
        settings: EngineSettings,
    ) -> None:
        self._ref = ref
        self.root = root
        self.shards = shards
        self.statistics = stats
        self.settings = settings

    async def monitor_saved(self, monitor: MonitorRecord) -> None:
        """Run ``monitor`` with this configuration (or stop it when paused); returns once
        in effect.

        Raises:
            engine.actor.ActorUnavailable: the engine is not running or did not answer
                within ``ask_timeout_seconds``.
        """

        def make(reply: Reply[None]) -> Save:
            return Save(monitor=monitor, reply=reply)

        await ask(self._ref, make, timeout_seconds=self.settings.ask_timeout_seconds)

    async def monitor_deleted(self, monitor_id: str) -> None:
        """Stop the monitor's actor; returns once stopped.

        Raises:
            engine.actor.ActorUnavailable: as :meth:`monitor_saved`.
        """

        def make(reply: Reply[None]) -> Remove:
            return Remove(monitor_id=monitor_id, reply=reply)

        await ask(self._ref, make, timeout_seconds=self.settings.ask_timeout_seconds)

    def running(self) -> int:
        """Monitor actors currently registered."""
        return sum(len(s.entries) for s in self.shards)

    def supervisors(self) -> list[SupervisorStatistics]:
        """Statistics of the engine supervisor and of every live shard."""
        found = [self.root.statistics()]
        found += [s.supervisor.statistics() for s in self.shards if s.supervisor is not None]
        return found


async def _handle(shards: list[Shard], message: EngineMessage, ask_seconds: float) -> None:
    match message:
        case Save(monitor=record):
            shard = shards[shard_of(record.id, len(shards))]
            if shard.supervisor is None:
                return  # the shard is (re)loading from the database, which has the change
            entry = shard.entries.get(record.id)
            running = entry is not None and shard.supervisor.has_child(record.id)
            if record.status == "paused":
                if entry is not None or running:
                    await shard.stop(record.id)
            elif entry is None or not running or entry.record.run_epoch != record.run_epoch:
                await shard.stop(record.id)
                await shard.start(record, check_now=True)
            else:
                entry.record = record

                def make(reply: Reply[None]) -> Reconfigure:
                    return Reconfigure(monitor=record, reply=reply)

                # When it is restarting, its next incarnation reads the stored config.
                with contextlib.suppress(ActorUnavailable):
                    await ask(entry.ref, make, timeout_seconds=ask_seconds)
        case Remove(monitor_id=monitor_id):
            await shards[shard_of(monitor_id, len(shards))].stop(monitor_id)


async def run_engine(
    db: Database,
    writer: CheckWriter,
    prober: Prober,
    settings: EngineSettings = EngineSettings(),
    *,
    task_status: trio.TaskStatus[Engine] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Load every active monitor, run it, and serve commands until cancelled.

    Reports an :class:`Engine` through ``task_status.started`` once every monitor's actor
    runs.

    Raises:
        engine.supervisor.SupervisorEscalation: shards kept failing past
            ``shard_intensity``.
    """
    stats = EngineStatistics()
    deps = MonitorDeps(
        prober=prober,
        writer=writer,
        limiter=trio.CapacityLimiter(settings.max_probes_in_flight),
        stats=stats,
    )
    shards = [
        Shard(index=i, name=f"shard-{i}", db=db, deps=deps, settings=settings)
        for i in range(settings.shard_count)
    ]
    async with open_supervisor("engine", intensity=settings.shard_intensity) as root:
        for shard in shards:
            await root.start_child(ChildSpec(child_id=shard.name, start=shard.run))
        ref, inbox = open_inbox[EngineMessage](1024)
        log.info("engine started", monitors=sum(len(s.entries) for s in shards), shards=len(shards))
        task_status.started(Engine(ref, root, shards, stats, settings))
        async with inbox:
            async for message in inbox:
                with message.reply:
                    try:
                        await _handle(shards, message, settings.ask_timeout_seconds)
                    except SupervisorError as exc:
                        # The shard is between incarnations (escalated, not yet
                        # reloaded): its reload reads the committed change.
                        log.warning("shard restarting; change applies on reload", error=repr(exc))
                    answer(message.reply, None)
