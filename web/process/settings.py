"""The settings of ``uptrio serve`` as a whole (:class:`ServiceSettings`: every default of
the service is defined here or in the settings dataclasses it holds, and the command
line, ``web.process.cli``, reads it from there) and the web server's part of the tree
(:class:`WebOptions`). Pure data, read by the composition root, ``web.process.service``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from engine import (
    Apply,
    Backoff,
    EngineSettings,
    Intensity,
    LeaseSettings,
    NotifierSettings,
    SourceAddress,
    TargetPolicy,
    WebhookSettings,
)
from store import MaintenanceSettings, StoreSettings

from ..http.deps import Dependencies, PingVerb, WebSettings

__all__ = ["ROOT_BACKOFF", "ROOT_INTENSITY", "ServiceSettings", "WebOptions"]

ROOT_INTENSITY = Intensity(max_restarts=5, period_seconds=60.0)
ROOT_BACKOFF = Backoff(min_seconds=0.5, max_seconds=10.0, random_factor=0.2)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceSettings:
    """Everything ``uptrio serve`` is configured with; every default of the service is
    defined here or in the settings it holds, and the command line reads it from there.

    Attributes:
        store: how the store actor batches and buffers.
        maintenance: partitions and retention (``store.maintenance``), or None to run no
            maintenance actor (tests of other things).
        engine: the engine's settings, or None to run no engine (``--no-engine``).
        web: the web layer's settings (body size, rate limits, idempotency).
        webhooks: the webhook sender's settings (``engine.WebhookSettings``), or None
            to send no webhooks (``--no-webhooks``; deliveries then wait, pending).
        notifier: the notifier's settings (``engine.NotifierSettings``: SMTP relay,
            provider bases, retries; docs/alerts.md); its ``public_url`` is filled in
            by the composition root.
        target_policy: which addresses monitors may point at (web layer and probes).
        dns_nameserver: ``(ip, port)`` of dns checks, or None for the system's.
        probe_source: the local address every probe of this node leaves from
            (``--probe-source-address``; ``engine.probes.source_address``, docs/checks.md,
            Source address), or None for the system's choice. Webhook deliveries and
            notification sends are not bound to it.
        host: the address the API listens on (default 127.0.0.1).
        port: its port (default 8080; 0: the OS picks).
        shutdown_seconds: the whole graceful shutdown's deadline, seconds
            (``--shutdown-seconds``, default 10); the web server may use 60 % of it to
            finish requests in flight.
        database_timeout_seconds: longest an API request waits on the database before a
            500 ``database_unavailable``, seconds (default 2).
        root_intensity: restarts the root tolerates per period before it escalates (the
            process then exits with an error).
        root_backoff: back-off before the root restarts a crashed child.
        leases: this node's name and lease (``--node-name``, ``--lease-seconds``): a
            lease actor then holds its share of the buckets (docs/several-nodes.md, Leases),
            or None (tests, embedders): no lease actor, the engine runs every bucket.
    """

    store: StoreSettings = field(default_factory=StoreSettings)
    maintenance: MaintenanceSettings | None = field(default_factory=MaintenanceSettings)
    engine: EngineSettings | None = field(default_factory=EngineSettings)
    web: WebSettings = field(default_factory=WebSettings)
    webhooks: WebhookSettings | None = field(default_factory=WebhookSettings)
    notifier: NotifierSettings = field(default_factory=NotifierSettings)
    target_policy: TargetPolicy = field(default_factory=TargetPolicy)
    dns_nameserver: tuple[str, int] | None = None
    probe_source: SourceAddress | None = None
    host: str = "127.0.0.1"
    port: int = 8080
    shutdown_seconds: float = 10.0
    database_timeout_seconds: float = 2.0
    root_intensity: Intensity = ROOT_INTENSITY
    root_backoff: Backoff = ROOT_BACKOFF
    leases: LeaseSettings | None = None

    @property
    def smtp_configured(self) -> bool:
        """Whether an SMTP relay is configured (``--smtp-url``): email channels are
        refused without one (docs/alerts.md)."""
        return self.notifier.smtp_configured

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
        make_deps: builds the app's :class:`~web.http.deps.Dependencies` around the engine's
            two verbs the tree provides, ``apply`` and ``ping`` (the caller owns the other
            fields).
    """

    bind: list[str]
    make_deps: Callable[[Apply, PingVerb], Dependencies]
