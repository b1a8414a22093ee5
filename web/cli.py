"""The ``uptrio`` command line: the parser, the flags of ``uptrio serve`` read into
:class:`web.service.ServiceSettings` (whose dataclasses hold every default), and the
commands that are not the service itself.

Commands:

* ``uptrio serve``: :func:`web.service.run_service`, the composition root.
* ``uptrio tokens create|list|revoke``: API tokens, against the same database whether or
  not the service runs.
* ``uptrio supervisors list|restart NAME``: the running service's supervision tree,
  through its admin socket (:mod:`web.admin`).
* Commands other distributions register in the entry-point group ``uptrio.commands``: each
  entry point names a function ``add_commands(subparsers)`` that adds its sub-commands and
  sets ``run=callable(args, argv) -> int`` as their default. ``uptrio bench`` (the
  harness in ``bench/``, an extra) comes this way; the service never imports it.

Configuration: flags, else environment (``UPTRIO_DATABASE_URL``, ``UPTRIO_DATA_DIR``,
``UPTRIO_JWT_SECRET``), else the settings' defaults.
"""

from __future__ import annotations

import argparse
import ipaddress
import math
import os
import sys
import time
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, TypeVar

import structlog
import trio
import trio_asyncio

from engine import EngineSettings, Intensity, TargetPolicy, WebhookSettings, nameserver_resolver
from store import (
    DEFAULT_DATA_DIR,
    MaintenanceSettings,
    StoreLocation,
    StoreSettings,
    accounts,
    open_store,
)

from .admin import AdminUnavailable, admin_request, admin_socket_path
from .auth import expired, issue_token, load_secret, parse_permissions
from .deps import WebSettings
from .logs import configure_logging
from .service import ServiceSettings, run_service
from .versioning import CURRENT_VERSION

__all__ = [
    "COMMAND_GROUP",
    "build_parser",
    "main",
    "parse_nameserver",
    "positive_float",
    "positive_int",
    "service_settings",
]

log = structlog.get_logger("uptrio")

COMMAND_GROUP = "uptrio.commands"
"""The entry-point group of the sub-commands that other packages add (``uptrio bench``)."""

_SERVICE = ServiceSettings()
_STORE = StoreSettings()
_ENGINE = EngineSettings()
_WEB = WebSettings()
_HISTORY = MaintenanceSettings()
_WEBHOOKS = WebhookSettings()


_N = TypeVar("_N", int, float)


def _positive(text: str, kind: type[_N]) -> _N:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a {kind.__name__}: {text!r}") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite number above 0: {text}")
    return value


def positive_int(text: str) -> int:
    """An integer of at least 1, for ``argparse``.

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    return _positive(text, int)


def positive_float(text: str) -> float:
    """A finite number above 0, for ``argparse``.

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    return _positive(text, float)


def parse_nameserver(text: str) -> tuple[str, int]:
    """``IP[:PORT]`` (IPv6 as ``[IP]:PORT``) for ``--dns-nameserver``; port 53 by default.

    Raises:
        argparse.ArgumentTypeError: not an IP address with an optional port.
    """
    host, port = text, "53"
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":") or "53"
    elif text.count(":") == 1:
        host, port = text.split(":")
    try:
        ipaddress.ip_address(host)
        number = int(port)
        if not 0 < number < 65536:
            raise ValueError(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not IP[:PORT]: {text!r}") from None
    return host, number


def store_location(args: argparse.Namespace) -> StoreLocation:
    """The database's location from ``--data-dir`` / ``--database-url``, else
    ``UPTRIO_DATA_DIR`` / ``UPTRIO_DATABASE_URL``, else the data directory's default."""
    data_dir = getattr(args, "data_dir", None) or os.environ.get("UPTRIO_DATA_DIR")
    url = getattr(args, "database_url", None) or os.environ.get("UPTRIO_DATABASE_URL")
    return StoreLocation(
        data_dir=Path(data_dir) if data_dir else DEFAULT_DATA_DIR, database_url=url or None
    )


def service_settings(args: argparse.Namespace) -> ServiceSettings:
    """The service's settings from ``uptrio serve`` flags."""
    engine = EngineSettings(
        max_probes_in_flight=args.max_probes_in_flight,
        shard_count=args.shards,
        monitor_intensity=Intensity(
            max_restarts=args.restart_intensity, period_seconds=args.restart_period
        ),
    )
    webhooks = WebhookSettings(
        poll_seconds=args.webhook_poll_seconds,
        concurrency=args.webhook_concurrency,
        per_endpoint_concurrency=args.webhook_per_endpoint_concurrency,
        timeout_seconds=args.webhook_timeout_seconds,
        retry_base_seconds=args.webhook_retry_base_seconds,
        claim_seconds=args.webhook_claim_seconds,
    )
    return ServiceSettings(
        webhooks=None if args.no_webhooks else webhooks,
        store=StoreSettings(
            batch_size=args.batch_size,
            batch_age_seconds=args.batch_age_ms / 1000,
            buffer_limit=args.store_buffer,
        ),
        maintenance=MaintenanceSettings(
            check_retention_days=args.check_retention_days,
            rollup_retention_days=args.rollup_retention_days,
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
        ),
        # dns monitors' names are screened with the nameserver their checks ask.
        target_policy=TargetPolicy(
            deny_private=args.deny_private_targets,
            allow_metadata=args.allow_metadata_targets,
            dns_resolver=nameserver_resolver(args.dns_nameserver),
        ),
        dns_nameserver=args.dns_nameserver,
        host=args.host,
        port=args.port,
        shutdown_seconds=args.shutdown_seconds,
        database_timeout_seconds=args.database_timeout_seconds,
    )


async def supervisors_command(args: argparse.Namespace) -> int:
    """``uptrio supervisors list|restart NAME``: ask the running service through its admin
    socket; exit status 1 (with a message on stderr) when none runs or it refuses."""
    path = admin_socket_path(store_location(args).data_dir)
    request: dict[str, Any] = {"command": args.supervisors}
    if args.supervisors == "restart":
        request["name"] = args.name
    try:
        reply = await admin_request(path, request)
    except AdminUnavailable as exc:
        print(f"uptrio: {exc}", file=sys.stderr)
        return 1
    except TimeoutError:
        print("uptrio: the service did not answer in time", file=sys.stderr)
        return 1
    if not reply.get("ok"):
        print(f"uptrio: {reply['error']['message']}", file=sys.stderr)
        return 1
    if args.supervisors == "restart":
        print(f"restarted {reply['restarted']} in {reply['seconds']:.3f} s")
        return 0
    print(f"{'NAME':<12} {'STATE':<10} {'CHILDREN':>8} {'RESTARTS':>8}  LAST FAILURE")
    for row in reply["supervisors"]:
        failure = row["last_failure"] or "-"
        print(
            f"{row['name']:<12} {row['state']:<10} {row['children']:>8} "
            f"{row['restarts_in_period']:>8}  {failure[:100]}"
        )
    return 0


async def tokens_command(args: argparse.Namespace) -> int:
    """``uptrio tokens create|list|revoke``; the exit status (2: bad permissions, 1: no
    such token)."""
    location = store_location(args)
    async with trio_asyncio.open_loop(), open_store(location) as db:
        now = int(time.time())
        if args.tokens == "create":
            try:
                permissions = parse_permissions(args.permissions)
            except ValueError as exc:
                print(f"uptrio: {exc}", file=sys.stderr)
                return 2
            expires_at = now + args.expires_in if args.expires_in else None
            _, token = await db.transaction(
                accounts.create_token,
                args.account,
                permissions,
                now=now,
                expires_at=expires_at,
                current_version=CURRENT_VERSION,
            )
            secret = load_secret(location.data_dir)
            print(issue_token(secret, token.id, now=now, expires_at=expires_at))
            return 0
        if args.tokens == "list":
            rows = await db.run(accounts.list_tokens, args.account)
            print(f"{'ID':<30} {'ACCOUNT':<20} {'STATE':<8} {'EXPIRES':<10} PERMISSIONS")
            for account_name, t in rows:
                state = (
                    "revoked"
                    if t.revoked_at
                    else ("expired" if expired(t.expires_at, now) else "active")
                )
                expires = str(t.expires_at) if t.expires_at else "never"
                print(
                    f"{t.id:<30} {account_name:<20} {state:<8} {expires:<10} "
                    f"{','.join(t.permissions)}"
                )
            return 0
        revoked = await db.run(accounts.revoke_token, args.token_id, now)
        if revoked is None:
            print(f"uptrio: no token {args.token_id}", file=sys.stderr)
            return 1
        print(f"revoked {revoked.id}")
        return 0


def _data_dir_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir", help=f"data directory (default $UPTRIO_DATA_DIR or {DEFAULT_DATA_DIR})"
    )


def _store_flags(parser: argparse.ArgumentParser) -> None:
    _data_dir_flag(parser)
    parser.add_argument(
        "--database-url", help="external Postgres URL (default $UPTRIO_DATABASE_URL; else embedded)"
    )


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
        "requests per token per rolling minute (spec 8)",
    ),
    (
        "--token-requests-per-hour",
        positive_int,
        _WEB.token_requests_per_hour,
        "requests per token per rolling hour (spec 8)",
    ),
    (
        "--account-requests-per-minute",
        positive_int,
        _WEB.account_requests_per_minute,
        "requests per account, all tokens, per rolling minute (spec 8)",
    ),
    (
        "--auth-failures-per-minute",
        positive_int,
        _WEB.auth_failures_per_minute,
        "failed authentications per client address per rolling minute before it gets 429s",
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
"""The webhook sender's flags of ``uptrio serve`` (extensions part 2), in the same form."""


def _serve_flags(serve: argparse.ArgumentParser) -> None:
    """The flags of ``uptrio serve``; every default comes from the settings dataclasses."""
    _store_flags(serve)
    safety = serve.add_argument_group("request safety")
    hooks = serve.add_argument_group("webhooks")
    for group, flags in ((serve, _SERVE_FLAGS), (safety, _SAFETY_FLAGS), (hooks, _WEBHOOK_FLAGS)):
        for flag, kind, default, text in flags:
            group.add_argument(flag, type=kind, default=default, help=f"{text} (default {default})")
    serve.add_argument("--no-engine", action="store_true", help="serve the API only; probe nothing")
    hooks.add_argument(
        "--no-webhooks",
        action="store_true",
        help="send no webhooks (deliveries wait, pending, for a process that sends them)",
    )
    serve.add_argument(
        "--dns-nameserver",
        type=parse_nameserver,
        default=None,
        help="IP[:PORT] for dns checks (default: the system's)",
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


def build_parser() -> argparse.ArgumentParser:
    """The ``uptrio`` argument parser, with the sub-commands of :data:`COMMAND_GROUP`."""
    parser = argparse.ArgumentParser(prog="uptrio", description="Uptime monitoring service.")
    parser.add_argument("--log-format", choices=("json", "console"), default="json")
    parser.add_argument("--log-level", default="info")
    commands = parser.add_subparsers(dest="command", required=True)

    _serve_flags(commands.add_parser("serve", help="run the service"))

    tokens_p = commands.add_parser("tokens", help="create, list and revoke API tokens")
    token_commands = tokens_p.add_subparsers(dest="tokens", required=True)
    create = token_commands.add_parser("create", help="create a token; prints the JWT alone")
    _store_flags(create)
    create.add_argument("--account", required=True, help="account name (created if missing)")
    create.add_argument(
        "--permissions",
        required=True,
        help="comma-separated, e.g. monitors.read,incidents.create; or all",
    )
    create.add_argument(
        "--expires-in", type=positive_int, default=None, help="lifetime in seconds (at least 1)"
    )
    list_p = token_commands.add_parser("list", help="list tokens")
    _store_flags(list_p)
    list_p.add_argument("--account", default=None)
    revoke = token_commands.add_parser("revoke", help="revoke a token from the next request on")
    _store_flags(revoke)
    revoke.add_argument("token_id", metavar="tok_...")

    supervisors_p = commands.add_parser(
        "supervisors", help="list or restart the running service's supervisors"
    )
    supervisor_commands = supervisors_p.add_subparsers(dest="supervisors", required=True)
    list_s = supervisor_commands.add_parser(
        "list", help="name, state, children, restarts in the current period, last failure"
    )
    _data_dir_flag(list_s)
    restart_s = supervisor_commands.add_parser(
        "restart", help="restart one supervisor; it reloads its children from the database"
    )
    _data_dir_flag(restart_s)
    restart_s.add_argument("name", metavar="NAME", help="root, engine, shard-N (or store, web)")

    for entry in entry_points(group=COMMAND_GROUP):
        entry.load()(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``uptrio`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    configure_logging(args.log_format, args.log_level)
    if args.command == "serve":
        try:
            return trio.run(run_service, service_settings(args), store_location(args))
        except Exception as exc:  # past the root's restart intensity, or a failed start
            log.critical("service failed", error=repr(exc), exc_info=exc)
            return 1
    if args.command == "supervisors":
        return trio.run(supervisors_command, args)
    if args.command == "tokens":
        return trio.run(tokens_command, args)
    run = getattr(args, "run", None)
    if run is not None:  # a command of COMMAND_GROUP
        return int(run(args, argv))
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
