"""The flags of ``uptrio serve`` (:func:`serve_flags`), their types, and the settings they
make (:func:`service_settings`).

Every default comes from the settings dataclasses (``web.process.settings.ServiceSettings``,
``store.StoreSettings``, ``store.MaintenanceSettings``, ``engine.EngineSettings``,
``engine.WebhookSettings``, ``web.http.deps.WebSettings``): a flag's default is defined
once, where the setting is. Flags are tables ``(flag, type, default, help)`` read by
:func:`serve_flags`. Sizes and counts must be at least 1 (:func:`positive_int`).

Those settings import the engine, the store and the API, so this module is imported only
when ``uptrio serve`` is parsed (:class:`.flags.CommandParser`, ``defer``), never when
``uptrio`` builds its parser (:mod:`.serve`).
"""

from __future__ import annotations

import argparse
import ipaddress
import socket
from collections.abc import Callable
from typing import Any

from engine import (
    CHANNEL_TYPES,
    EngineSettings,
    Intensity,
    LeaseSettings,
    NotifierSettings,
    SourceAddress,
    TargetPolicy,
    WebhookSettings,
    nameserver_resolver,
    source_address,
)
from store import MaintenanceSettings, StoreSettings, leases

from ...http.deps import WebSettings
from ..settings import ServiceSettings
from .addresses import parse_nameserver, parse_provider_base, parse_public_url, parse_smtp_url
from .flags import positive_float, positive_int, store_flags

__all__ = [
    "probe_source",
    "region_name",
    "serve_flags",
    "service_settings",
    "source_family_conflict",
]

_SERVICE = ServiceSettings()
_STORE = StoreSettings()
_ENGINE = EngineSettings()
_WEB = WebSettings()
_HISTORY = MaintenanceSettings()
_WEBHOOKS = WebhookSettings()
_NOTIFIER = NotifierSettings()


def service_settings(args: argparse.Namespace) -> ServiceSettings:
    """The service's settings from ``uptrio serve`` flags."""
    engine = EngineSettings(
        max_probes_in_flight=args.max_probes_in_flight,
        shard_count=args.shards,
        monitor_intensity=Intensity(
            max_restarts=args.restart_intensity, period_seconds=args.restart_period
        ),
        ping_ack_committed=args.ping_ack == "committed",
    )
    webhooks = WebhookSettings(
        poll_seconds=args.webhook_poll_seconds,
        concurrency=args.webhook_concurrency,
        per_account_concurrency=args.webhook_per_account_concurrency,
        per_endpoint_concurrency=args.webhook_per_endpoint_concurrency,
        timeout_seconds=args.webhook_timeout_seconds,
        retry_base_seconds=args.webhook_retry_base_seconds,
        claim_seconds=args.webhook_claim_seconds,
    )
    notifier = NotifierSettings(
        smtp_url=args.smtp_url,
        smtp_from=args.smtp_from,
        provider_bases=dict(args.provider_base or []),
        retry_base_seconds=args.notification_retry_base_seconds,
    )
    return ServiceSettings(
        webhooks=None if args.no_webhooks else webhooks,
        notifier=notifier,
        store=StoreSettings(
            batch_size=args.batch_size,
            batch_age_seconds=args.batch_age_ms / 1000,
            buffer_limit=args.store_buffer,
        ),
        maintenance=MaintenanceSettings(
            check_retention_days=args.check_retention_days,
            rollup_retention_days=args.rollup_retention_days,
            ping_retention_days=args.ping_retention_days,
        ),
        engine=None if args.no_engine else engine,
        web=WebSettings(
            max_body_bytes=args.max_body_bytes,
            token_requests_per_minute=args.token_requests_per_minute,
            token_requests_per_hour=args.token_requests_per_hour,
            account_requests_per_minute=args.account_requests_per_minute,
            auth_failures_per_minute=args.auth_failures_per_minute,
            idempotency_retention_seconds=args.idempotency_retention_seconds,
            body_timeout_seconds=args.body_timeout_seconds,
            public_url=args.public_url,
            pings_per_minute=args.pings_per_minute,
            status_cache_bytes=args.status_cache_bytes,
        ),
        # dns monitors' names are screened with the nameserver their checks ask.
        target_policy=TargetPolicy(
            deny_private=args.deny_private_targets,
            allow_metadata=args.allow_metadata_targets,
            dns_resolver=nameserver_resolver(args.dns_nameserver),
        ),
        dns_nameserver=args.dns_nameserver,
        probe_source=args.probe_source_address,
        host=args.host,
        port=args.port,
        shutdown_seconds=args.shutdown_seconds,
        database_timeout_seconds=args.database_timeout_seconds,
        leases=LeaseSettings(
            node_name=args.node_name or f"{socket.gethostname()}:{args.port}",
            lease_seconds=args.lease_seconds,
            region=args.region,
        ),
    )


_LEASE_SECONDS = LeaseSettings(node_name="").lease_seconds

_SERVE_FLAGS: list[tuple[str, Callable[[str], Any], object, str]] = [
    ("--host", str, _SERVICE.host, "listen address"),
    ("--port", int, _SERVICE.port, "listen port"),
    ("--max-body-bytes", positive_int, _WEB.max_body_bytes, "largest request body, bytes"),
    ("--shutdown-seconds", float, _SERVICE.shutdown_seconds, "graceful shutdown deadline, s"),
    (
        "--database-timeout-seconds",
        float,
        _SERVICE.database_timeout_seconds,
        "longest an API request waits on the database before a 500 database_unavailable, s",
    ),
    (
        "--max-probes-in-flight",
        positive_int,
        _ENGINE.max_probes_in_flight,
        "global cap on concurrent probes",
    ),
    ("--shards", positive_int, _ENGINE.shard_count, "monitor supervisors"),
    (
        "--restart-intensity",
        positive_int,
        _ENGINE.monitor_intensity.max_restarts,
        "monitor restarts one shard tolerates per period",
    ),
    (
        "--restart-period",
        float,
        _ENGINE.monitor_intensity.period_seconds,
        "restart intensity period, s",
    ),
    ("--batch-size", positive_int, _STORE.batch_size, "check results per store batch"),
    (
        "--batch-age-ms",
        float,
        _STORE.batch_age_seconds * 1000,
        "oldest result age before a batch is written, ms",
    ),
    (
        "--check-retention-days",
        positive_int,
        _HISTORY.check_retention_days,
        "raw checks are kept this many days, then dropped a partition at a time",
    ),
    (
        "--rollup-retention-days",
        positive_int,
        _HISTORY.rollup_retention_days,
        "hourly rollups and status history are kept this many days",
    ),
    (
        "--ping-retention-days",
        positive_int,
        _HISTORY.ping_retention_days,
        "heartbeats' pings are kept this many days",
    ),
    (
        "--status-cache-bytes",
        positive_int,
        _WEB.status_cache_bytes,
        "memory the rendered public status pages may hold, bytes; the least recently read go first",
    ),
    (
        "--store-buffer",
        positive_int,
        _STORE.buffer_limit,
        "check results buffered while the database is down; past it the oldest are dropped",
    ),
]
"""``uptrio serve``'s valued flags: (flag, type, default from the settings, help)."""

_SAFETY_FLAGS: list[tuple[str, Callable[[str], Any], object, str]] = [
    (
        "--token-requests-per-minute",
        positive_int,
        _WEB.token_requests_per_minute,
        "requests per token per rolling minute",
    ),
    (
        "--token-requests-per-hour",
        positive_int,
        _WEB.token_requests_per_hour,
        "requests per token per rolling hour",
    ),
    (
        "--account-requests-per-minute",
        positive_int,
        _WEB.account_requests_per_minute,
        "requests per account, all tokens, per rolling minute",
    ),
    (
        "--auth-failures-per-minute",
        positive_int,
        _WEB.auth_failures_per_minute,
        "failed authentications per client address per rolling minute before it gets 429s",
    ),
    (
        "--pings-per-minute",
        positive_int,
        _WEB.pings_per_minute,
        "pings one heartbeat's key may send per rolling minute before it gets 429s",
    ),
    (
        "--body-timeout-seconds",
        positive_float,
        _WEB.body_timeout_seconds,
        "longest wait for a request's whole body before a 408 body_timeout, s",
    ),
    (
        "--idempotency-retention-seconds",
        positive_int,
        _WEB.idempotency_retention_seconds,
        "how long idempotency keys replay, s",
    ),
]
"""The request-safety flags of ``uptrio serve``, in the same form."""

_WEBHOOK_FLAGS: list[tuple[str, Callable[[str], Any], object, str]] = [
    (
        "--webhook-poll-seconds",
        positive_float,
        _WEBHOOKS.poll_seconds,
        "seconds between two looks for due webhook deliveries",
    ),
    (
        "--webhook-concurrency",
        positive_int,
        _WEBHOOKS.concurrency,
        "webhook attempts in flight at most, all endpoints together",
    ),
    (
        "--webhook-per-account-concurrency",
        positive_int,
        _WEBHOOKS.per_account_concurrency,
        "webhook attempts in flight at most for one account, all its endpoints together "
        "(never below the per-endpoint limit)",
    ),
    (
        "--webhook-per-endpoint-concurrency",
        positive_int,
        _WEBHOOKS.per_endpoint_concurrency,
        "webhook attempts in flight at most for one endpoint",
    ),
    (
        "--webhook-timeout-seconds",
        positive_float,
        _WEBHOOKS.timeout_seconds,
        "a webhook attempt's deadline: a 2xx must arrive within it, s",
    ),
    (
        "--webhook-retry-base-seconds",
        positive_float,
        _WEBHOOKS.retry_base_seconds,
        "delay before a failed webhook's first retry, doubling after each, s",
    ),
    (
        "--webhook-claim-seconds",
        positive_float,
        _WEBHOOKS.claim_seconds,
        "how long a claimed delivery is reserved; an attempt never recorded "
        "(a crash) is retried after it, s",
    ),
]
"""The webhook sender's flags of ``uptrio serve`` (docs/webhooks.md, Flags), in the same form."""


def _notification_flags(group: argparse._ArgumentGroup) -> None:
    """The notifier's flags of ``uptrio serve`` (docs/alerts.md)."""
    group.add_argument(
        "--smtp-url",
        type=parse_smtp_url,
        default=_NOTIFIER.smtp_url,
        help="the SMTP relay of email channels: smtp://user:password@host:port (STARTTLS) "
        "or smtps://... (default: none; email channels are then refused)",
    )
    group.add_argument(
        "--smtp-from",
        default=_NOTIFIER.smtp_from,
        help="the From address of notification emails",
    )
    group.add_argument(
        "--provider-base",
        type=parse_provider_base,
        action="append",
        metavar="NAME=URL",
        help="send one channel type's requests to URL instead of the provider's public "
        f"API (repeatable; NAME one of {', '.join(CHANNEL_TYPES)})",
    )
    group.add_argument(
        "--notification-retry-base-seconds",
        type=positive_float,
        default=_NOTIFIER.retry_base_seconds,
        help="delay before a failed notification's first retry, doubling after each "
        f"(at most 5 minutes apart, for 1 hour), s (default {_NOTIFIER.retry_base_seconds})",
    )


def serve_flags(serve: argparse.ArgumentParser) -> None:
    """The flags of ``uptrio serve``; every default comes from the settings dataclasses."""
    store_flags(serve)
    safety = serve.add_argument_group("request safety")
    hooks = serve.add_argument_group("webhooks")
    for group, flags in ((serve, _SERVE_FLAGS), (safety, _SAFETY_FLAGS), (hooks, _WEBHOOK_FLAGS)):
        for flag, kind, default, text in flags:
            group.add_argument(flag, type=kind, default=default, help=f"{text} (default {default})")
    serve.add_argument("--no-engine", action="store_true", help="serve the API only; probe nothing")
    serve.add_argument(
        "--node-name",
        default=None,
        help="this node's name among the nodes sharing the database (default HOST:PORT)",
    )
    serve.add_argument(
        "--region",
        type=region_name,
        default=LeaseSettings(node_name="").region,
        help="this node's region (a-z 0-9 -, at most 32): it probes the monitors without "
        "regions with the other nodes, and those listing its region with that region's "
        "nodes (default %(default)s)",
    )
    serve.add_argument(
        "--lease-seconds",
        type=positive_float,
        default=_LEASE_SECONDS,
        help="how long this node's bucket leases last unrenewed (renewed every third), s "
        f"(default {_LEASE_SECONDS})",
    )
    _notification_flags(serve.add_argument_group("notifications"))
    hooks.add_argument(
        "--no-webhooks",
        action="store_true",
        help="send no webhooks (deliveries wait, pending, for a process that sends them)",
    )
    serve.add_argument(
        "--ping-ack",
        choices=("buffered", "committed"),
        default="committed" if _ENGINE.ping_ack_committed else "buffered",
        help="when a ping is answered 200: once the store actor holds it (buffered, the "
        "default: written within --batch-age-ms, kept through a database outage) or once "
        "its batch is committed (committed: group commit)",
    )
    serve.add_argument(
        "--public-url",
        type=parse_public_url,
        default=None,
        help="the service's address as its users reach it, the base of heartbeats' "
        "ping_url and of the status page feeds' links (e.g. https://uptrio.example.com; "
        "default: the address each request came to)",
    )
    serve.add_argument(
        "--dns-nameserver",
        type=parse_nameserver,
        default=None,
        help="IP[:PORT] for dns checks (default: the system's)",
    )
    serve.add_argument(
        "--probe-source-address",
        type=probe_source,
        default=None,
        metavar="IP",
        help="the local address this node's probes (http, tcp, dns, ping) leave from; "
        "only targets' addresses of its family are used (default: the system's choice; "
        "webhooks and notifications are not bound)",
    )
    safety.add_argument(
        "--deny-private-targets",
        action="store_true",
        help="refuse monitors and checks on loopback, private, link-local, unspecified, "
        "multicast and other non-global addresses",
    )
    safety.add_argument(
        "--allow-metadata-targets",
        action="store_true",
        help="allow link-local and cloud metadata addresses (169.254.169.254, ...), "
        "refused by default",
    )


def region_name(text: str) -> str:
    """A region's name (``store.leases.REGION_NAME``: ``a-z 0-9 -``, 1 to 32 characters),
    for ``argparse``.

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    if not leases.REGION_NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(f"a region is 1 to 32 of a-z, 0-9 and -: {text!r}")
    return text


def probe_source(text: str) -> SourceAddress:
    """One of this host's IP addresses, for ``--probe-source-address``: parsed and bound
    once now (`engine.source_address`), so that a bad one stops ``uptrio serve`` with
    status 2 before it starts rather than failing every check.

    Raises:
        argparse.ArgumentTypeError: not an IP address, or not one this host can bind.
    """
    try:
        return source_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def source_family_conflict(
    source: SourceAddress | None, nameserver: tuple[str, int] | None
) -> str | None:
    """Why ``--probe-source-address`` and ``--dns-nameserver`` cannot go together (a
    nameserver of the other family cannot be asked from the source), or None."""
    if source is None or nameserver is None:
        return None
    if ipaddress.ip_address(nameserver[0]).version == source.ip.version:
        return None
    return (
        f"--dns-nameserver {nameserver[0]} cannot be asked from --probe-source-address "
        f"{source.ip}: give both of one family (IPv4 or IPv6)"
    )
