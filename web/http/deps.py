"""What the web layer is given at start-up: the store, the engine's two verbs, the
settings.

Passed explicitly to the app factory (no globals). The engine is reached through two
callables handed in by the composition root (``docs/architecture.md``, "The one verb"):
``apply(resource_id, record or None)``, which a handler awaits after its change commits
and before it responds, and ``ping(key)``, the actor a ping key leads to.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import trio

from engine import (
    ActorUnavailable,
    Apply,
    ChannelSettings,
    NotifierSettings,
    PingTarget,
    TargetPolicy,
)
from store import Database, MaintenanceSettings

from .auth import ClaimsCache
from .limits.quota import QuotaLimiter
from .page_cache import DEFAULT_MAX_BYTES, PageCache

STATUS_RENDER_THREADS = 2
"""Public status pages rendered at once, each on a worker thread (``web.public.status_pages``),
and schedules' on-call answers and shifts computed (``web.routes.schedules``): as many as
the cores the service is sized for; more wait their turn."""


PingVerb = Callable[[str], Awaitable[PingTarget | None]]
"""``ping(key)``: the actor a ping key leads to, or None (``engine.EngineHandle.ping``)."""


async def apply_nothing(resource_id: str, record: object) -> None:
    """The engine's verb where no engine runs (``uptrio serve --no-engine``; web tests
    that only exercise the API): changes are stored and nothing runs them."""


async def no_pings(ping_key: str) -> PingTarget | None:
    """The engine's ping verb where no engine runs: no actor can take a ping.

    Raises:
        engine.ActorUnavailable: always.
    """
    raise ActorUnavailable("no engine runs in this process (--no-engine)")


@dataclass(frozen=True, slots=True, kw_only=True)
class WebSettings:
    """Settings of the web layer.

    Attributes:
        max_body_bytes: largest request body read, in bytes (default 1 MiB).
        token_requests_per_minute: requests one token may make per rolling minute
            (default 1,000; docs/api.md, Rate limits).
        token_requests_per_hour: requests one token may make per rolling hour
            (default 10,000; docs/api.md, Rate limits).
        account_requests_per_minute: requests all tokens of one account may make per
            rolling minute (default 5,000; docs/api.md, Rate limits).
        auth_failures_per_minute: failed authentications (401) one client address may
            cause per rolling minute before its requests get 429 (default 60).
        idempotency_retention_seconds: how long an idempotency key's response is kept
            and replayed, in seconds (default 24 hours; docs/api.md, Idempotency keys).
        body_timeout_seconds: longest wait for a request's whole body, in seconds
            (default 10; Quart's ``BODY_TIMEOUT``, whose own default of 60 s let a body
            trickled at a byte a second hold a connection for a minute; docs/api.md, Time
            limits on a connection); past it the answer is 408 ``body_timeout`` and the
            connection is closed.
        public_url: the base of heartbeats' ``ping_url`` and of the status page feeds'
            links (``--public-url``, e.g. ``https://uptrio.example.com``); None: the base
            URL each request came to (its scheme and ``Host``), and the address the
            service listens on in webhook deliveries.
        pings_per_minute: pings one ping key may send per rolling minute
            (``--pings-per-minute``, default 60); past it a ping gets 429.
        status_cache_bytes: memory the cache of rendered public status pages may hold,
            in bytes (``--status-cache-bytes``, default 64 MiB; :mod:`web.http.page_cache`).
    """

    max_body_bytes: int = 1024 * 1024
    token_requests_per_minute: int = 1000
    token_requests_per_hour: int = 10_000
    account_requests_per_minute: int = 5000
    auth_failures_per_minute: int = 60
    idempotency_retention_seconds: int = 24 * 3600
    body_timeout_seconds: float = 10.0
    public_url: str | None = None
    pings_per_minute: int = 60
    status_cache_bytes: int = DEFAULT_MAX_BYTES


@dataclass(frozen=True, slots=True, kw_only=True)
class Dependencies:
    """Everything a handler may use.

    Attributes:
        apply: the engine's one verb, ``apply(resource_id, record or None)``: awaited
            after a change commits, returns once the engine runs what the record asks
            (``engine.EngineHandle.apply``; :func:`apply_nothing` without an engine).
        ping: the actor a ping key leads to, or None (``engine.EngineHandle.ping``;
            :func:`no_pings` without an engine).
        rate_limiter: the rate limits (docs/api.md, Rate limits; :mod:`web.http.limits.quota`):
            leased from the database across nodes under ``uptrio serve``, in memory by
            default.
        target_policy: which addresses monitors may point at (:mod:`engine.policy`).
        history: retention of checks and rollups (``store.MaintenanceSettings``), for the
            availability endpoint's "unknown" past the cutoffs.
        clock: wall-clock time in epoch seconds, for idempotency keys' age, the
            ``X-RateLimit-Reset`` header and what a public status page reads as "now";
            tests inject their own.
        status_cache: the process's rendered public status pages
            (:mod:`web.http.page_cache`: at most one render per page per 10 s).
        status_render_limiter: the worker threads public status pages are rendered on, and
            schedules' answers computed (:data:`STATUS_RENDER_THREADS`).
        token_claims: the claims of the bearer tokens verified lately, for ``jwt_secret``
            (:class:`web.http.auth.ClaimsCache`): a token's signature is checked once per
            token string; its expiry, revocation and permissions on every request.
        channels: what a notification channel's test send is given (the SMTP relay,
            providers' bases, the target policy; docs/alerts.md); by default no relay.
    """

    db: Database
    apply: Apply
    ping: PingVerb
    jwt_secret: bytes
    settings: WebSettings
    data_dir: Path | None = None
    rate_limiter: QuotaLimiter = field(default_factory=QuotaLimiter)
    target_policy: TargetPolicy = field(default_factory=TargetPolicy)
    history: MaintenanceSettings = field(default_factory=MaintenanceSettings)
    clock: Callable[[], float] = time.time
    status_cache: PageCache = field(default_factory=PageCache)
    status_render_limiter: trio.CapacityLimiter = field(
        default_factory=lambda: trio.CapacityLimiter(STATUS_RENDER_THREADS)
    )
    token_claims: ClaimsCache = field(default_factory=ClaimsCache)
    channels: ChannelSettings = field(
        default_factory=lambda: NotifierSettings().channel_settings(TargetPolicy())
    )

    @property
    def smtp_configured(self) -> bool:
        """Whether an SMTP relay is configured (``--smtp-url``): without one an email
        channel is refused, 422 ``smtp_not_configured`` (docs/alerts.md)."""
        return self.channels.smtp_url is not None
