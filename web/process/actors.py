"""Every long-lived actor of ``uptrio serve``, declared in one place
(``docs/architecture.md``, "Actors"): its name (the root supervisor's child id, as
``uptrio supervisors list`` shows it), whether this node runs it, which node in a
cluster does its work (every node, or one holder of a job lease at a time), and how its
child is built from the service's :class:`Parts`. The composition root
(``web.process.service.open_service``) starts them from :data:`ACTORS`, in order: a new actor
is one function that builds its ``ChildSpec`` and one line here.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from functools import partial

import trio

from engine import (
    ChildSpec,
    Engine,
    EngineHandle,
    EngineStatistics,
    Holding,
    NotifierSettings,
    Prober,
    RestartType,
    WalkerSettings,
    run_engine,
    run_escalations,
    run_leases,
    run_listener,
    run_notifier,
    run_page_mailer,
    run_shift_reminders,
    run_webhook_sender,
    run_window_walk,
)
from store import Database, StoreActor, run_maintenance

from ..api.events import render_event
from ..http.deps import Dependencies
from ..http.idempotency import run_idempotency_purge
from ..http.limits.returns import run_quota_returns
from ..http.server import Incarnation, WebServer
from .metrics import Metrics
from .settings import ServiceSettings

__all__ = ["ACTORS", "Actor", "Parts"]

MAINTENANCE_DEADLINE_SECONDS = 300.0
"""The longest one statement of the maintenance actor may take (a partition detached
CONCURRENTLY waits for the transactions using the table), seconds."""

WALKER_DATABASE_DEADLINE_SECONDS = 10.0
"""The longest one walk of a walker (escalations, windows, reminders) may wait on the database,
seconds (a hung database then costs a poll, not the walker)."""

NOTIFIER_DATABASE_DEADLINE_SECONDS = 10.0
"""The longest one claim or record of the notifier may wait on the database, seconds."""

WEBHOOK_DATABASE_DEADLINE_SECONDS = 10.0
"""The longest one claim or record of the webhook sender may wait on the database,
seconds (a hung database then costs a poll, not the sender)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Parts:
    """What the actors are built from, made once by the composition root.

    Attributes:
        db: the database pool.
        settings: everything ``uptrio serve`` is configured with.
        store: the store actor (its inbox and buffer outlive its incarnations).
        engine: the engine's handle, or None without an engine (``--no-engine``).
        holding: the buckets this node holds (every bucket without leases).
        stats: the engine's counters (shared by its incarnations).
        metrics: the service's metrics.
        prober: what the monitors probe with.
        lease_stop: set to give every bucket back (the leases' graceful stop).
        server: the web server, or None (no API in this tree).
        deps: the app's dependencies, or None with no web server.
    """

    db: Database
    settings: ServiceSettings
    store: StoreActor
    engine: EngineHandle | None
    holding: Holding
    stats: EngineStatistics
    metrics: Metrics
    prober: Prober
    lease_stop: trio.Event
    server: WebServer | None
    deps: Dependencies | None

    @property
    def leased(self) -> bool:
        """Whether this node holds bucket leases (an engine and ``--node-name``/leases)."""
        return self.engine is not None and self.settings.leases is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class Actor:
    """One long-lived actor (module docstring).

    Attributes:
        name: the root's child id.
        work: which node does its work in a cluster: ``every node``, or ``one holder of
            the <name> job lease`` (the actor claims it itself: ``store.maintenance``).
        runs: whether this node runs it, given its parts.
        child: its child spec.
    """

    name: str
    work: str
    runs: Callable[[Parts], bool]
    child: Callable[[Parts], ChildSpec]


def _maintenance(p: Parts) -> ChildSpec:
    assert p.settings.maintenance is not None
    leases = p.settings.leases
    start = partial(
        run_maintenance,
        p.db.with_deadline(MAINTENANCE_DEADLINE_SECONDS),
        p.settings.maintenance,
        partition_seconds=p.settings.store.partition_seconds,
        holder=leases.node_name if leases is not None else f"{socket.gethostname()}:{os.getpid()}",
    )
    return ChildSpec(child_id="maintenance", start=start)


def _store(p: Parts) -> ChildSpec:
    return ChildSpec(child_id="store", start=p.store.run, restart=RestartType.TRANSIENT)


def _leases(p: Parts) -> ChildSpec:
    assert p.settings.leases is not None
    start = partial(
        run_leases, p.db, p.settings.leases, p.holding, p.lease_stop, flush=p.store.writer.flush
    )
    return ChildSpec(
        child_id="leases",
        start=start,
        shutdown=partial(_set, p.lease_stop),
        shutdown_seconds=p.settings.margin_seconds + 5.0,
    )


def _engine(p: Parts) -> ChildSpec:
    assert p.engine is not None and p.settings.engine is not None
    start = partial(
        run_engine,
        p.db,
        p.store.writer,
        p.prober,
        replace(p.settings.engine, region=p.holding.region),  # the node's, as its leases'
        stats=p.stats,
        observer=p.metrics,
        holding=p.holding,
    )
    return ChildSpec(
        child_id="engine",
        start=partial(p.engine.run, start),
        shutdown=Engine.stop,  # probes in flight finish and are stored (docs: Shutdown)
        shutdown_seconds=p.settings.graceful_seconds,
    )


def _listener(p: Parts) -> ChildSpec:
    assert p.engine is not None and p.settings.leases is not None
    start = partial(run_listener, p.db, p.engine, p.holding, p.settings.leases.node_name)
    return ChildSpec(child_id="listener", start=start)


def _webhooks(p: Parts) -> ChildSpec:
    assert p.settings.webhooks is not None
    binds = p.server.binds if p.server is not None else []
    start = partial(
        run_webhook_sender,
        p.db.with_deadline(WEBHOOK_DATABASE_DEADLINE_SECONDS),
        p.settings.webhooks,
        render=partial(
            render_event, ping_base=p.settings.web.public_url or (binds[0] if binds else "")
        ),
        policy=p.settings.target_policy,
    )
    return ChildSpec(child_id="webhooks", start=start)


def _mail_settings(p: Parts) -> NotifierSettings:
    """The notifier's settings with the base of its links: ``--public-url``, else the
    first address the API listens on."""
    binds = p.server.binds if p.server is not None else []
    public_url = p.settings.web.public_url or (binds[0] if binds else "")
    return replace(p.settings.notifier, public_url=public_url)


def _notifier(p: Parts) -> ChildSpec:
    db = p.db.with_deadline(NOTIFIER_DATABASE_DEADLINE_SECONDS)
    start = partial(run_notifier, db, _mail_settings(p), policy=p.settings.target_policy)
    return ChildSpec(child_id="notifier", start=start)


def _page_mailer(p: Parts) -> ChildSpec:
    db = p.db.with_deadline(NOTIFIER_DATABASE_DEADLINE_SECONDS)
    return ChildSpec(child_id="page_mailer", start=partial(run_page_mailer, db, _mail_settings(p)))


def _walker(
    child_id: str, run: Callable[..., Awaitable[None]], settings: WalkerSettings
) -> Callable[[Parts], ChildSpec]:
    """The child of a walker (``engine.walker``): ``run(db, settings)``, its database
    calls under :data:`WALKER_DATABASE_DEADLINE_SECONDS`."""

    def child(p: Parts) -> ChildSpec:
        db = p.db.with_deadline(WALKER_DATABASE_DEADLINE_SECONDS)
        return ChildSpec(child_id=child_id, start=partial(run, db, settings))

    return child


def _limits(p: Parts) -> ChildSpec:
    assert p.deps is not None
    return ChildSpec(child_id="limits", start=partial(run_quota_returns, p.deps.rate_limiter))


def _idempotency(p: Parts) -> ChildSpec:
    retention = p.settings.web.idempotency_retention_seconds
    start = partial(run_idempotency_purge, p.db, retention_seconds=retention)
    return ChildSpec(child_id="idempotency", start=start)


def _web(p: Parts) -> ChildSpec:
    assert p.server is not None
    return ChildSpec(
        child_id="web",
        start=p.server.run,
        shutdown=Incarnation.shutdown,
        shutdown_seconds=p.settings.graceful_seconds + 0.5,
    )


def _set(event: trio.Event, _started: object) -> None:
    """A ``shutdown`` hook: set ``event``."""
    event.set()


ACTORS: tuple[Actor, ...] = (
    Actor(
        name="maintenance",
        work="one holder of the maintenance job lease",
        runs=lambda p: p.settings.maintenance is not None,
        child=_maintenance,
    ),
    Actor(name="store", work="every node", runs=lambda p: True, child=_store),
    Actor(name="leases", work="every node", runs=lambda p: p.leased, child=_leases),
    Actor(name="engine", work="every node", runs=lambda p: p.engine is not None, child=_engine),
    Actor(name="listener", work="every node", runs=lambda p: p.leased, child=_listener),
    Actor(
        name="webhooks",
        work="every node (deliveries claimed FOR UPDATE SKIP LOCKED)",
        runs=lambda p: p.settings.webhooks is not None,
        child=_webhooks,
    ),
    Actor(
        name="notifier",
        work="every node (notifications claimed FOR UPDATE SKIP LOCKED)",
        runs=lambda p: True,
        child=_notifier,
    ),
    Actor(
        name="page_mailer",
        work="every node (subscriber mails claimed FOR UPDATE SKIP LOCKED)",
        runs=lambda p: True,
        child=_page_mailer,
    ),
    Actor(
        name="escalations",
        work="every node (alerts claimed FOR UPDATE SKIP LOCKED)",
        runs=lambda p: True,
        child=_walker("escalations", run_escalations, WalkerSettings()),
    ),
    Actor(
        name="windows",
        work="every node (occurrences claimed FOR UPDATE SKIP LOCKED)",
        runs=lambda p: True,
        child=_walker("windows", run_window_walk, WalkerSettings()),
    ),
    Actor(
        name="reminders",
        work="every node (shift reminders claimed FOR UPDATE SKIP LOCKED)",
        runs=lambda p: True,
        child=_walker("reminders", run_shift_reminders, WalkerSettings(poll_seconds=1.0)),
    ),
    Actor(
        name="limits",
        work="every node",
        runs=lambda p: p.deps is not None and p.deps.rate_limiter.leasing,
        child=_limits,
    ),
    Actor(
        name="idempotency",
        work="every node (an idempotent delete)",
        runs=lambda p: p.deps is not None,
        child=_idempotency,
    ),
    Actor(name="web", work="every node", runs=lambda p: p.server is not None, child=_web),
)
"""Every actor, in the order they start (each once the one before is ready)."""
