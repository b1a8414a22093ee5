"""The composition root of ``uptrio serve``: the one module that builds the service's
supervision tree and everything around it (``docs/architecture.md``; docs/operations.md,
"The supervision tree")::

    run_service
    └── trio-asyncio loop (asyncpg lives inside it)
        └── database (store.open_store: the embedded Postgres unless a URL is given)
            └── nursery: signal watcher (SIGINT, SIGTERM)
                ├── root ........ open_service: one_for_one; 5 restarts per 60 s,
                │   │             back-off 0.5 s to 10 s; its children are the actors
                │   │             of web.process.actors.ACTORS, started in that order:
                │   ├── maintenance, store, leases, engine (shards and their actors
                │   │   of every kind), listener, webhooks, limits, idempotency
                │   └── web ..... web.http.server.WebServer: Hypercorn serving the app
                └── admin socket (web.process.admin): <data-dir>/admin.sock, mode 0600

Every child hands its siblings something that outlives its incarnations, so any child can be
restarted alone: the store actor's inbox and buffer live in the ``store.StoreActor``, the
engine is reached through an ``engine.EngineHandle`` that waits for the next incarnation,
and the listening sockets are bound once (``web.http.server.WebServer``) and handed to each
incarnation of the web server.

Restarts (:meth:`RunningService.restart`, from ``uptrio supervisors restart NAME``):
``engine`` or ``shard-N`` reload their monitors from the database (the source of truth:
the web layer commits before it tells the engine); every reloaded actor resumes from the
stored status on its grid point. A cancelled actor hands the results it already probed
to the store first, and the store writes every result it was handed: a restart loses no
check result (a probe cut short in flight is not a result). ``root`` restarts its
children one after the other (store, engine, web).

Shutdown (leaving :func:`open_service` normally), within ``shutdown_seconds``: the web
server stops accepting and finishes the requests in flight, then the listening sockets
close; the engine stops gracefully (no new probe starts, probes already sent finish, and
the actors hand over what they probed: ``engine.engine``); the store's inbox
closes and the store writes everything queued; then the lease actor gives every bucket
back at once (the other nodes take them at their next renewal). If the deadline passes
first, what is left is cancelled, and the store makes one last shielded attempt at its
buffer (at most 1 s).
"""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

import structlog
import trio
import trio_asyncio

from engine import (
    Apply,
    ChildInfo,
    EngineHandle,
    EngineStatistics,
    Holding,
    Prober,
    Supervisor,
    SupervisorStatistics,
    open_supervisor,
)
from store import (
    Database,
    MaintenanceSettings,
    StoreActor,
    StoreLocation,
    StoreWriter,
    open_store,
)

from ..http.auth import load_secret
from ..http.deps import Dependencies, PingVerb, apply_nothing, no_pings
from ..http.limits.quota import QuotaLimiter
from ..http.limits.rolling import RateLimiter
from ..http.limits.throttle import SHARED_WINDOWS
from ..http.page_cache import PageCache
from ..http.protocols import hypercorn_config
from ..http.server import WebServer
from ..routes import PERMISSIONS
from .actors import ACTORS, Parts
from .admin import UnknownSupervisor, admin_socket_path, check_admin_socket_free, serve_admin
from .app import create_app
from .metrics import Metrics
from .ops import Operations
from .settings import ServiceSettings, WebOptions
from .startup import (
    FIRST_ACCOUNT,
    SecretMismatch,
    announce,
    check_secret,
    first_token,
    open_data_dir,
    wait_for_signal,
)

__all__ = [
    "FIRST_ACCOUNT",
    "RunningService",
    "ServiceSettings",
    "UnknownSupervisor",
    "WebOptions",
    "open_service",
    "run_service",
]

log = structlog.get_logger("uptrio")


class RunningService:
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
        engine: EngineHandle | None,
        metrics: Metrics,
        binds: list[str],
    ) -> None:
        self.root = root
        self.store = store
        self.engine = engine
        self.metrics = metrics
        self.binds = binds

    @property
    def writer(self) -> StoreWriter:
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
        engine = self.engine.current if self.engine is not None else None
        for supervisor in (self.root, engine.root if engine is not None else None):
            if supervisor is not None and supervisor.has_child(name):
                if not await supervisor.restart_child(name):
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
) -> AsyncIterator[RunningService]:
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
    handle = EngineHandle() if settings.engine is not None else None
    leased = handle is not None and settings.leases is not None
    store = StoreActor(
        db,
        settings.store,
        drain_seconds=settings.margin_seconds,
        observer=metrics,
        fence_node=settings.leases.node_name if leased and settings.leases else None,
    )
    region = settings.leases.region if settings.leases else None
    alone = Holding.everything(settings.engine.region if settings.engine else "default")
    holding = Holding(region) if leased and region else alone
    stats = EngineStatistics()
    metrics.attach(engine=stats, writer=store.writer, holding=holding if leased else None)
    server, deps = _web_server(web, handle, holding, metrics, settings)
    parts = Parts(
        db=db,
        settings=settings,
        store=store,
        engine=handle,
        holding=holding,
        stats=stats,
        metrics=metrics,
        prober=prober if prober is not None else Prober(),
        lease_stop=trio.Event(),
        server=server,
        deps=deps,
    )

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
                for actor in ACTORS:
                    if actor.runs(parts):
                        await root.start_child(actor.child(parts))
                yield RunningService(root, store, handle, metrics, server.binds if server else [])
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


def _web_server(
    web: WebOptions | None,
    handle: EngineHandle | None,
    holding: Holding,
    metrics: Metrics,
    settings: ServiceSettings,
) -> tuple[WebServer | None, Dependencies | None]:
    """The web server and the app's dependencies (the engine's two verbs handed in),
    or ``(None, None)`` without ``web``."""
    if web is None:
        return None, None
    ops = Operations(metrics=metrics)
    if handle is not None:
        ops = Operations(
            metrics=metrics,
            engine_state=handle.state,
            buckets_state=partial(_buckets_state, holding),
        )
    deps = (
        web.make_deps(handle.apply, handle.ping)
        if handle is not None
        else web.make_deps(apply_nothing, no_pings)
    )
    metrics.attach_limits(deps.rate_limiter)
    app = create_app(deps, ops=ops)
    config = hypercorn_config(web.bind, graceful_seconds=settings.graceful_seconds)
    return WebServer(app, config), deps


def _buckets_state(holding: Holding) -> str:
    """``/readyz``'s ``buckets`` check (docs/several-nodes.md, Operations)."""
    return "ok" if holding.ready else "claiming"


async def _stop_in_order(
    root: Supervisor,
    store: StoreActor,
    server: WebServer | None,
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
        await root.stop_child("leases")  # every bucket given back at once
    if scope.cancelled_caught:
        log.warning(
            "shutdown deadline passed; cancelling the rest",
            shutdown_seconds=settings.shutdown_seconds,
            unwritten=store.writer.queued(),
        )
        forced.cancel()


async def run_service(settings: ServiceSettings, location: StoreLocation) -> int:
    """``uptrio serve``: run until SIGINT or SIGTERM, then stop cleanly; the exit status.

    Shutdown order: as the module docstring says, within ``settings.shutdown_seconds``;
    a second signal stops at once. Exit status 1 (with a message on stderr) when another
    service already runs with the data directory, or when its JWT secret is not the one
    the database's tokens are signed with (``web.process.startup.check_secret``). A data
    directory open to other users is closed, with a warning (``web.process.startup.open_data_dir``).

    Raises:
        engine.SupervisorEscalation: the root's restart intensity was exceeded.
        OSError: the web server could not bind.
    """
    data_dir = location.data_dir
    open_data_dir(data_dir)  # also with --database-url (its socket, the JWT secret)
    socket_path = admin_socket_path(data_dir)
    try:
        await check_admin_socket_free(socket_path)
    except RuntimeError as exc:
        print(f"uptrio: {exc}", file=sys.stderr)
        return 1
    secret = load_secret(data_dir)
    stop = trio.Event()
    async with trio_asyncio.open_loop(), open_store(location) as db:
        try:
            await check_secret(db, secret, data_dir)
        except SecretMismatch as exc:
            print(f"uptrio: {exc}", file=sys.stderr)
            return 1
        first = await first_token(db, secret, data_dir, PERMISSIONS)
        async with trio.open_nursery() as outer:
            await outer.start(wait_for_signal, stop, outer.cancel_scope)
            prober = Prober(
                dns_nameserver=settings.dns_nameserver,
                address_policy=settings.target_policy,
                source_address=settings.probe_source,
            )
            request_db = db.with_deadline(settings.database_timeout_seconds)

            def make_deps(apply: Apply, ping: PingVerb) -> Dependencies:
                return Dependencies(
                    db=request_db,
                    apply=apply,
                    ping=ping,
                    jwt_secret=secret,
                    settings=settings.web,
                    target_policy=settings.target_policy,
                    history=settings.maintenance or MaintenanceSettings(),
                    # wall clock: slices are compared across nodes (web.http.limits.quota)
                    rate_limiter=QuotaLimiter(
                        RateLimiter(clock=time.time), db=db, shared=SHARED_WINDOWS
                    ),
                    status_cache=PageCache(max_bytes=settings.web.status_cache_bytes),
                    channels=settings.notifier.channel_settings(settings.target_policy),
                )

            web = WebOptions(bind=[f"{settings.host}:{settings.port}"], make_deps=make_deps)
            async with open_service(db, settings, prober=prober, web=web) as service:
                announce(
                    service.binds,
                    data_dir,
                    first,
                    db.url if location.database_url is None else None,
                )
                async with trio.open_nursery() as admin:
                    try:
                        await admin.start(serve_admin, socket_path, service)
                    except ValueError as exc:  # a data directory path too long for a socket
                        log.error("no admin interface", error=str(exc))
                    await stop.wait()
                    admin.cancel_scope.cancel()
            outer.cancel_scope.cancel()
    log.info("stopped")
    return 0
