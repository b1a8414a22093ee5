"""The engine: the supervision tree of every kind's actors (``engine.kind``), and its
command actor (``docs/architecture.md``)::

    engine (supervisor: shards as children, restart intensity `shard_intensity`)
    ├── shard-0 (supervisor: one_for_one, `monitor_intensity`, back-off)
    │   ├── mon_...  one child per running monitor (engine.kinds.monitors)
    │   └── heartbeats  one child for the shard's heartbeats (engine.kinds.heartbeats)
    └── shard-N-1

Resources are spread over ``shard_count`` shards by their bucket (:func:`shard_of`), so
one flapping monitor can exhaust at most its own shard's restart intensity; a shard that
escalates is restarted by the engine supervisor and reloads from the database (the
source of truth: a change is committed before it is applied). Past the engine's own
intensity the failure escalates to the caller of :func:`run_engine`.

**The one verb.** Everything that changes what runs reaches the command actor as
:class:`Apply` (a resource's desired state: its record, or None) through
:meth:`Engine.apply`; the command actor finds the resource's kind by its id's prefix
and shard by its bucket and hands it to that kind's runner, serialised with the bucket
moves (:class:`~engine.rebalance.Rebalance`) and the reconciliation (:class:`Reconcile`).
The API's handlers, the listener and the reconciliation all call that verb; it returns
once the change is in effect, so no check starts after a pause's response.

Graceful stop: the engine's ``shutdown`` hook is :meth:`Engine.stop`. The tree is then
stopped with OTP's shutdown ladder, level by level, while changes are still applied (but
no actor starts: the next load from the database starts it): each shard is asked to
close and each actor is told to drain (a probe already sent finishes and its check goes
to the store). Each level is cancelled past its grace (65 s: the longest probe timeout
plus a margin; the caller's grace, ``--shutdown-seconds``, bounds it all). A pause or a
delete stops its actor at once instead: the response does not wait for a probe.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from functools import partial
from typing import Any

import structlog
import trio

from store import Database, StoreWriter, leases

from .actor import ActorRef, ActorUnavailable, Reply, answer, ask, open_inbox
from .heap import freeze_heap, keep_heap_frozen, unfrozen_on_exit, young_gc_threshold
from .kind import EngineContext, Kind
from .kinds import KINDS
from .kinds.monitors import DRAIN_SECONDS
from .leases import Holding
from .monitor import EngineStatistics
from .observer import CheckObserver
from .probes import Prober
from .rebalance import Rebalance, follow, rebalance
from .reconcile import reconcile, tick
from .settings import EngineSettings
from .shard import Shard, shard_of, shard_of_slot
from .supervisor import (
    ChildSpec,
    Supervisor,
    SupervisorError,
    SupervisorStatistics,
    open_supervisor,
)

__all__ = ["Apply", "Engine", "Reconcile", "kind_of", "run_engine"]

log = structlog.get_logger("uptrio.engine")


@dataclass(frozen=True, slots=True, kw_only=True)
class Apply:
    """The desired state of ``resource_id``: its ``record``, or None (deleted, or nothing
    to run); committed before it is sent."""

    resource_id: str
    record: Any
    reply: Reply[None]


@dataclass(frozen=True, slots=True)
class Reconcile:
    """Time to compare the held buckets' resources in the database with what runs
    (``engine.reconcile``)."""


EngineMessage = Apply | Rebalance | Reconcile


def kind_of(kinds: tuple[Kind, ...], resource_id: str) -> Kind | None:
    """The kind of ``resource_id``, told by its id's prefix, or None (no kind of ours)."""
    prefix = resource_id.partition("_")[0]
    for kind in kinds:
        if kind.prefix == prefix:
            return kind
    return None


class Engine:
    """One incarnation of the engine, as :class:`~engine.handle.EngineHandle` and
    operators see it."""

    def __init__(
        self,
        ref: ActorRef[EngineMessage],
        root: Supervisor,
        shards: list[Shard],
        kinds: tuple[Kind, ...],
        context: EngineContext,
    ) -> None:
        self._ref = ref
        self.root = root
        self.shards = shards
        self.kinds = kinds
        self.statistics = context.stats
        self.settings = context.settings
        self._stopping = context.stopping

    async def apply(self, resource_id: str, record: Any) -> None:
        """The one verb (module docstring): returns once in effect.

        Raises:
            engine.ActorUnavailable: the engine is not running or did not answer
                within ``ask_timeout_seconds``.
        """

        def make(reply: Reply[None]) -> Apply:
            return Apply(resource_id=resource_id, record=record, reply=reply)

        await ask(self._ref, make, timeout_seconds=self.settings.ask_timeout_seconds)

    def kind(self, prefix: str) -> Kind | None:
        """This incarnation's kind of id prefix ``prefix``, or None."""
        return kind_of(self.kinds, prefix + "_")

    def heard(self, resource_id: str, detail: str, wall: float) -> None:
        """Another node stored event ``detail`` of ``resource_id`` at ``wall`` (epoch
        seconds; ``engine.listener``): its kind tells the actor if it runs here. Not
        waited for: what the actor cannot take now the reconciliation catches up."""
        kind = kind_of(self.kinds, resource_id)
        if kind is not None:
            shard = self.shards[shard_of(resource_id, len(self.shards))]
            kind.heard(list(shard.runners.values()), resource_id, detail, wall)

    def reconcile_now(self) -> None:
        """Ask for one reconciliation (``engine.reconcile``) now, without waiting: after
        the listener (re)connected or dropped notifications."""
        with contextlib.suppress(trio.WouldBlock, ActorUnavailable):
            self._ref.tell_nowait(Reconcile())

    def stop(self) -> None:
        """Stop gracefully (the engine child's ``shutdown`` hook): every actor drains
        (module docstring), then :func:`run_engine` returns. Changes are still applied
        meanwhile; a start of an actor is left to the next load from the database."""
        self._stopping.set()

    def running(self) -> int:
        """Monitor actors currently registered (``uptrio_monitors`` counts their
        statuses)."""
        return len(self.statistics.statuses)

    def supervisors(self) -> list[SupervisorStatistics]:
        """Statistics of the engine supervisor and of every live shard."""
        found = [self.root.statistics()]
        found += [s.supervisor.statistics() for s in self.shards if s.supervisor is not None]
        return found


async def apply_change(
    shards: list[Shard], kinds: tuple[Kind, ...], resource_id: str, record: Any
) -> None:
    """Hand the desired state of ``resource_id`` to its kind's runner in its shard;
    nothing when this node does not hold its bucket (docs/several-nodes.md: the owner
    applies it) in either of its pools, or it is of no kind of ours (the runner decides
    which pool a monitor's ``regions`` put it in: docs/several-nodes.md, Regions)."""
    kind = kind_of(kinds, resource_id)
    if kind is None:
        return
    shard = shards[shard_of(resource_id, len(shards))]
    if not leases.held_in_either(leases.bucket_of(resource_id), shard.buckets):
        return  # another node holds its bucket: the change reaches it there
    await shard.runners[kind.prefix].apply(resource_id, record)


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
    """Load every kind's resources of the buckets ``holding`` holds (every bucket when
    None: a lone engine), run them, follow ``holding`` as buckets come and go, and serve
    commands until cancelled or stopped (:meth:`Engine.stop`).

    Reports an :class:`Engine` through ``task_status.started`` once every actor runs.
    ``stats`` (new when None) is where the actors count; pass the same one to every
    incarnation of a restarted engine so counters keep going. ``observer`` (the service's
    metrics) is told of every probe and check.

    Raises:
        engine.supervisor.SupervisorEscalation: shards kept failing past
            ``shard_intensity``.
    """
    stats = EngineStatistics() if stats is None else stats
    holding = Holding.everything(settings.region) if holding is None else holding
    context = EngineContext(
        db=db,
        writer=writer,
        prober=prober,
        settings=settings,
        stats=stats,
        observer=observer,
        holding=holding,
        stopping=trio.Event(),
    )
    kinds = tuple(make(context) for make in KINDS)
    shards = [
        Shard(index=i, name=f"shard-{i}", context=context, kinds=kinds)
        for i in range(settings.shard_count)
    ]
    started_with = dict(holding.held)
    for bucket in started_with:
        shards[shard_of_slot(bucket, len(shards))].buckets.add(bucket)

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
        log.info("engine started", monitors=len(stats.statuses), shards=len(shards))
        every = settings.gc_freeze_every_seconds
        engine = Engine(ref, root, shards, kinds, context)
        with unfrozen_on_exit(every is not None):
            if every is not None:
                freeze_heap()
            task_status.started(engine)
            async with inbox, trio.open_nursery() as nursery:
                serve = partial(_serve_commands, inbox, shards, kinds, context, engine)
                nursery.start_soon(serve, dict(started_with))
                nursery.start_soon(follow, holding, started_with, ref.tell)
                nursery.start_soon(tick, ref, Reconcile(), settings.reconcile_seconds)
                if every is not None:
                    nursery.start_soon(keep_heap_frozen, every)
                await context.stopping.wait()
                log.info("engine stopping; monitors finish the probes in flight")
                await root.close()  # changes are still applied meanwhile
                nursery.cancel_scope.cancel()


async def _serve_commands(
    inbox: trio.MemoryReceiveChannel[EngineMessage],
    shards: list[Shard],
    kinds: tuple[Kind, ...],
    context: EngineContext,
    engine: Engine,
    epochs: dict[int, int],
) -> None:
    """The engine's command actor: handle each command in turn. ``epochs``: the buckets
    the shards run, with their lease epochs; each rebalance is acknowledged to the
    holding (the lease actor waits for it before handing buckets over)."""
    apply = partial(apply_change, shards, kinds)
    async for message in inbox:
        if isinstance(message, Reconcile):
            if not context.stopping.is_set():
                await reconcile(kinds, shards, epochs, apply)
            continue
        if isinstance(message, Rebalance):
            try:
                stopping = context.stopping.is_set()
                await rebalance(kinds, shards, epochs, message.held, stopping, message.releasing)
            except SupervisorError as exc:  # its next load reads the buckets held
                log.warning("shard restarting; buckets apply on reload", error=repr(exc))
            context.holding.mark_applied(message.version)
            continue
        with message.reply:
            try:
                await apply(message.resource_id, message.record)
            except SupervisorError as exc:
                # The shard is between incarnations (escalated, not yet reloaded) or
                # stopping: its next load reads the committed change.
                log.warning("shard restarting; change applies on reload", error=repr(exc))
            answer(message.reply, None)
