"""The service's supervision tree: one root supervisor over the store actor, the engine
and the web server (DESIGN: Shape; operations issue, items 1 and 6)::

    root ............ one_for_one; 5 restarts per 60 s, back-off 0.5 s to 10 s
    ├── store ....... the store actor (store.actor.StoreActor; transient: it returns
    │                 only once closed and drained)
    ├── engine ...... engine.run_engine: the engine supervisor
    │   └── shard-0 .. shard-N-1   monitor supervisors
    │       └── mon_...            monitor actors
    └── web ......... Hypercorn serving the Quart-Trio app (graceful stop: it stops
                      accepting and finishes the requests in flight)

Everything a child hands to its siblings outlives its incarnations, so any child can be
restarted alone: the store actor's inbox and buffer live in the :class:`StoreActor`, the
engine is reached through an :class:`EngineSlot` that waits for the next incarnation, and
the listening sockets are bound once, here, and handed to each incarnation of the web
server (a restart keeps the port; connections wait in the backlog meanwhile).

Restarts (:meth:`Service.restart`, from ``uptrio supervisors restart NAME``): ``engine``
or ``shard-N`` reload their monitors from the database (the source of truth: the web
layer commits before it tells the engine). Every reloaded actor resumes from the stored
status and thresholds (``engine.monitor``: ``Health`` starts from the stored status) on
its grid point (``engine.schedule``: the phase is a pure function of monitor id and
interval, so a reload neither bursts nor shifts checks). A cancelled actor hands the
results it already probed to the store first, and the store writes every result it was
handed: a restart loses no check result (a probe cut short in flight is not a result).
``root`` restarts its children one after the other (store, engine, web).

Shutdown (leaving :func:`open_service` normally), within ``shutdown_seconds``: the web
server stops accepting and finishes the requests in flight, then the listening sockets
close; the engine stops gracefully (no new probe starts, probes already sent finish, and
the actors hand over what they probed: ``engine.engine``); the store's inbox
closes and the store writes everything queued. If the deadline passes first, what is left
is cancelled, and the store makes one last shielded attempt at its buffer (at most
1 s).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import structlog
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.config import Sockets
from hypercorn.trio.run import worker_serve
from hypercorn.utils import wrap_app

from engine import (
    ActorUnavailable,
    Backoff,
    Engine,
    EngineSettings,
    EngineStatistics,
    Intensity,
    Prober,
    SupervisorStatistics,
    run_engine,
)
from engine.supervisor import ChildInfo, ChildSpec, RestartType, Supervisor, open_supervisor
from store import Database, MonitorRecord
from store.actor import CheckWriter, StoreActor

from .app import create_app
from .metrics import Metrics
from .ops import Operations
from .services import MonitorEngine, NoEngine, Services

__all__ = [
    "EngineSlot",
    "Service",
    "ServiceSettings",
    "UnknownSupervisor",
    "WebOptions",
    "open_service",
]

log = structlog.get_logger("uptrio")

ROOT_INTENSITY = Intensity(max_restarts=5, period_seconds=60.0)
ROOT_BACKOFF = Backoff(min_seconds=0.5, max_seconds=10.0, random_factor=0.2)


class UnknownSupervisor(LookupError):
    """:meth:`Service.restart` was given a name that is no supervisor (nor child of the
    root) of this service."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceSettings:
    """How the tree is built (``uptrio serve`` flags).

    Attributes:
        engine: the engine's settings, or None to run no engine (``--no-engine``).
        batch_size: check results per store batch (``--batch-size``).
        batch_age_seconds: oldest result's age before a batch is written, seconds.
        store_buffer: results the store buffers while the database is down, at most; past
            it the oldest are dropped (``--store-buffer``, default 100,000).
        shutdown_seconds: the whole graceful shutdown's deadline, seconds
            (``--shutdown-seconds``, default 10); the web server may use 60 % of it to
            finish requests in flight.
        root_intensity: restarts the root tolerates per period before it escalates (the
            process then exits with an error).
        root_backoff: back-off before the root restarts a crashed child.
    """

    engine: EngineSettings | None = field(default_factory=EngineSettings)
    batch_size: int = 500
    batch_age_seconds: float = 0.2
    store_buffer: int = 100_000
    shutdown_seconds: float = 10.0
    root_intensity: Intensity = ROOT_INTENSITY
    root_backoff: Backoff = ROOT_BACKOFF

    @property
    def graceful_seconds(self) -> float:
        """How long the web server may take to finish requests in flight, seconds."""
        return self.shutdown_seconds * 0.6

    @property
    def margin_seconds(self) -> float:
        """Kept for the last, forced step of a shutdown, seconds."""
        return min(1.0, self.shutdown_seconds / 4)


@dataclass(frozen=True, slots=True, kw_only=True)
class WebOptions:
    """The web server's part of the tree.

    Attributes:
        bind: Hypercorn binds, e.g. ``["127.0.0.1:8080"]`` (port 0: the OS picks).
        make_services: builds the app's :class:`~web.services.Services` around the
            engine handle the tree provides (the composition root owns the other fields).
    """

    bind: list[str]
    make_services: Callable[[MonitorEngine], Services]


class EngineSlot:
    """The engine as the web layer sees it (a ``MonitorEngine``), stable while the engine
    child restarts: a command waits (up to ``wait_seconds``) for a running incarnation,
    and is told again to the next one if the engine restarted under it."""

    def __init__(self, wait_seconds: float = 10.0) -> None:
        self.current: Engine | None = None
        self._wait_seconds = wait_seconds
        self._changed = trio.Event()

    async def run(
        self,
        start: Callable[..., Awaitable[None]],
        *,
        task_status: trio.TaskStatus[Engine] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """One incarnation: ``await start(task_status=...)`` (``run_engine`` with its
        arguments bound), publishing the :class:`~engine.Engine` it reports."""
        slot = self

        class _Started:
            def started(self, value: Engine) -> None:
                slot._publish(value)
                task_status.started(value)

        try:
            await start(task_status=_Started())
        finally:
            self._publish(None)

    def _publish(self, engine: Engine | None) -> None:
        self.current = engine
        self._changed.set()
        self._changed = trio.Event()

    def state(self) -> str:
        """``running`` or ``starting`` (see :class:`web.ops.Operations`)."""
        return "running" if self.current is not None else "starting"

    async def _call(self, command: Callable[[Engine], Awaitable[None]]) -> None:
        with trio.move_on_after(self._wait_seconds):
            while self.current is None:
                await self._changed.wait()
        engine = self.current
        if engine is None:
            raise ActorUnavailable("the engine is not running (restarting?)")
        try:
            await command(engine)
        except ActorUnavailable:
            if self.current is None or self.current is engine:
                raise
            await command(self.current)  # it restarted meanwhile: tell the new one

    async def monitor_saved(self, monitor: MonitorRecord) -> None:
        """As :meth:`engine.Engine.monitor_saved`, on the running incarnation.

        Raises:
            engine.ActorUnavailable: no running engine within ``wait_seconds``, or it did
                not answer.
        """
        await self._call(lambda engine: engine.monitor_saved(monitor))

    async def monitor_deleted(self, monitor_id: str) -> None:
        """As :meth:`engine.Engine.monitor_deleted`, on the running incarnation.

        Raises:
            engine.ActorUnavailable: as :meth:`monitor_saved`.
        """
        await self._call(lambda engine: engine.monitor_deleted(monitor_id))


class _WebServer:
    """Hypercorn on sockets bound once; each incarnation serves them until its
    :meth:`_Incarnation.shutdown` (the child's polite stop) or a cancellation."""

    def __init__(self, app: Any, config: HypercornConfig) -> None:
        self._app = wrap_app(app, config.wsgi_max_body_size, None)
        self._config = config
        self.sockets: Sockets = config.create_sockets()
        for sock in self.sockets.insecure_sockets:
            sock.listen(config.backlog)
        self.binds = [
            "http://{}:{}".format(*sock.getsockname()[:2]) for sock in self.sockets.insecure_sockets
        ]

    async def run(self, *, task_status: trio.TaskStatus[_Incarnation]) -> None:
        incarnation = _Incarnation()
        # Each incarnation serves duplicates of the listening sockets (the same listen
        # queue): Hypercorn's trio listeners close theirs when the incarnation ends.
        mine = Sockets([], [sock.dup() for sock in self.sockets.insecure_sockets], [])
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(
                    partial(
                        worker_serve,
                        self._app,
                        self._config,
                        sockets=mine,
                        shutdown_trigger=incarnation.stopping.wait,
                    )
                )
                task_status.started(incarnation)
        finally:
            for sock in mine.insecure_sockets:
                sock.close()

    def close(self) -> None:
        """Close the listening sockets: new connections are refused from now on."""
        for sock in self.sockets.insecure_sockets:
            sock.close()


@dataclass(slots=True)
class _Incarnation:
    stopping: trio.Event = field(default_factory=trio.Event)

    def shutdown(self) -> None:
        self.stopping.set()


class Service:
    """A running tree (made by :func:`open_service`): what the admin interface and the
    command line see.

    Attributes:
        root: the root supervisor.
        store: the store actor.
        engine: the engine's slot, or None without an engine.
        metrics: the service's metrics.
        binds: the URLs the web server listens on (``http://host:port``); empty without
            a web server.
    """

    def __init__(
        self,
        root: Supervisor,
        store: StoreActor,
        engine: EngineSlot | None,
        metrics: Metrics,
        binds: list[str],
    ) -> None:
        self.root = root
        self.store = store
        self.engine = engine
        self.metrics = metrics
        self.binds = binds

    @property
    def writer(self) -> CheckWriter:
        """The store actor's writer."""
        return self.store.writer

    def supervisors(self) -> list[SupervisorStatistics]:
        """Statistics of every supervisor: root, then engine and its shards (when the
        engine runs)."""
        found = [self.root.statistics()]
        if self.engine is not None and self.engine.current is not None:
            found += self.engine.current.supervisors()
        return found

    def root_children(self) -> list[ChildInfo]:
        """The root's children (store, engine, web) and their states."""
        infos = (self.root.child_info(child) for child in self.root.child_ids())
        return [info for info in infos if info is not None]

    async def restart(self, name: str) -> None:
        """Restart supervisor ``name`` (``root``, ``engine``, ``shard-N``) or a child of
        the root (``store``, ``web``); returns once the new incarnation started. See the
        module docstring for what a restart keeps.

        Raises:
            UnknownSupervisor: no such supervisor or child (or it is stopping).
        """
        if name == "root":
            for child in self.root.child_ids():
                await self.root.restart_child(child)
            log.info("supervisor restarted", supervisor="root", by="operator")
            return
        if self.root.has_child(name):
            if not await self.root.restart_child(name):
                raise UnknownSupervisor(f"{name} is stopping")
            log.info("supervisor restarted", supervisor=name, by="operator")
            return
        engine = self.engine.current if self.engine is not None else None
        if engine is not None and engine.root.has_child(name):
            if not await engine.root.restart_child(name):
                raise UnknownSupervisor(f"{name} is stopping")
            log.info("supervisor restarted", supervisor=name, by="operator")
            return
        raise UnknownSupervisor(f"no supervisor named {name!r}")


@asynccontextmanager
async def open_service(
    db: Database,
    settings: ServiceSettings,
    *,
    prober: Prober | None = None,
    web: WebOptions | None = None,
    metrics: Metrics | None = None,
) -> AsyncIterator[Service]:
    """Run the tree (see the module docstring) while the block runs; stop it in order
    when the block ends normally, at once when it raises or is cancelled.

    Children start in order (store, engine, web), each once ready: the body sees a
    service whose engine runs every active monitor and whose web server listens. Must run
    inside ``trio_asyncio.open_loop()``.

    Raises:
        engine.SupervisorEscalation: the root's restart intensity was exceeded.
        OSError: the web server could not bind.
    """
    metrics = Metrics() if metrics is None else metrics
    store = StoreActor(
        db,
        batch_size=settings.batch_size,
        batch_age_seconds=settings.batch_age_seconds,
        buffer_limit=settings.store_buffer,
        drain_seconds=settings.margin_seconds,
        observer=metrics,
    )
    stats = EngineStatistics()
    metrics.attach(engine=stats, writer=store.writer)
    slot = EngineSlot() if settings.engine is not None else None
    server: _WebServer | None = None
    if web is not None:
        engine_handle: MonitorEngine = slot if slot is not None else NoEngine()
        ops = Operations(
            metrics=metrics,
            engine_state=slot.state if slot is not None else Operations().engine_state,
        )
        config = HypercornConfig()
        config.bind = web.bind
        config.accesslog = None
        config.errorlog = None
        config.graceful_timeout = settings.graceful_seconds
        server = _WebServer(create_app(web.make_services(engine_handle), ops=ops), config)

    def on_restart(child_id: str, exc: Exception | None) -> None:
        metrics.count_restart("root")
        log.warning("child restarting", supervisor="root", child=child_id, error=repr(exc))

    try:
        with trio.CancelScope() as forced:
            async with open_supervisor(
                "root",
                intensity=settings.root_intensity,
                backoff=settings.root_backoff,
                on_restart=on_restart,
            ) as root:
                await root.start_child(
                    ChildSpec(child_id="store", start=store.run, restart=RestartType.TRANSIENT)
                )
                if slot is not None and settings.engine is not None:
                    engine_start = partial(
                        run_engine,
                        db,
                        store.writer,
                        prober if prober is not None else Prober(),
                        settings.engine,
                        stats=stats,
                        observer=metrics,
                    )
                    await root.start_child(
                        ChildSpec(
                            child_id="engine",
                            start=partial(slot.run, engine_start),
                            # probes in flight finish and are stored (issue 15, item 4)
                            shutdown=Engine.stop,
                            shutdown_seconds=settings.graceful_seconds,
                        )
                    )
                if server is not None:
                    await root.start_child(
                        ChildSpec(
                            child_id="web",
                            start=server.run,
                            shutdown=_Incarnation.shutdown,
                            shutdown_seconds=settings.graceful_seconds + 0.5,
                        )
                    )
                yield Service(root, store, slot, metrics, server.binds if server else [])
                await _stop_in_order(root, store, server, settings, forced)
    finally:
        if server is not None:
            server.close()
    log.info(
        "service stopped",
        checks=stats.checks,
        rows_written=store.statistics.rows_written,
        rows_dropped=store.statistics.dropped,
        unwritten=store.writer.queued(),
    )


async def _stop_in_order(
    root: Supervisor,
    store: StoreActor,
    server: _WebServer | None,
    settings: ServiceSettings,
    forced: trio.CancelScope,
) -> None:
    """The graceful shutdown of the module docstring; cancels ``forced`` past the
    deadline."""
    began = trio.current_time()
    with trio.move_on_at(began + settings.shutdown_seconds - settings.margin_seconds) as scope:
        if server is not None:
            await root.stop_child("web")
            server.close()
            log.info("web server stopped", seconds=round(trio.current_time() - began, 3))
        await root.stop_child("engine")
        store.writer.close()
        await store.wait_finished()
        await root.stop_child("store")
        log.info("store flushed", seconds=round(trio.current_time() - began, 3))
    if scope.cancelled_caught:
        log.warning(
            "shutdown deadline passed; cancelling the rest",
            shutdown_seconds=settings.shutdown_seconds,
            unwritten=store.writer.queued(),
        )
        forced.cancel()
