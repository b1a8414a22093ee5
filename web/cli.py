"""The ``uptrio`` command line and the composition root of the service.

``uptrio serve`` wires store, engine and web into one root nursery (DESIGN: Shape)::

    trio.run
    └── trio-asyncio loop (asyncpg lives inside it)
        └── database pool (embedded Postgres unless a URL is given)
            └── nursery: signal watcher, idempotency key purge (hourly),
                ├── the supervision tree (web.service): root supervisor over the store
                │   actor, the engine supervisor and the web server
                └── the admin socket (web.admin): <data-dir>/admin.sock, mode 0600

``uptrio tokens create|list|revoke`` manage API tokens against the same database, whether
or not the service runs. ``uptrio supervisors list|restart NAME`` talk to the running
service through its admin socket. Configuration: flags, else environment (``UPTRIO_DATABASE_URL``,
``UPTRIO_DATA_DIR``, ``UPTRIO_JWT_SECRET``), else defaults.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import structlog
import trio
import trio_asyncio

from engine import EngineSettings, Intensity, Prober
from store import (
    Database,
    EmbeddedPostgres,
    accounts,
    apply_migrations,
    open_database,
    start_embedded,
)

from .admin import AdminUnavailable, admin_request, admin_socket_path, check_admin_socket_free
from .admin import serve_admin as serve_admin_socket
from .auth import PERMISSIONS, issue_token, load_secret, parse_permissions
from .idempotency import run_idempotency_purge
from .logs import configure_logging
from .options import add_request_safety_flags, positive_int, target_policy, web_settings
from .service import ServiceSettings, WebOptions, open_service
from .services import MonitorEngine, Services
from .versioning import CURRENT_VERSION

log = structlog.get_logger("uptrio")

DEFAULT_DATA_DIR = "./.uptrio"
FIRST_ACCOUNT = "default"


def _data_dir(args: argparse.Namespace) -> Path:
    return Path(args.data_dir or os.environ.get("UPTRIO_DATA_DIR") or DEFAULT_DATA_DIR)


def _database_url(args: argparse.Namespace) -> str | None:
    return args.database_url or os.environ.get("UPTRIO_DATABASE_URL") or None


@asynccontextmanager
async def open_store(args: argparse.Namespace) -> AsyncIterator[Database]:
    """The database of ``args`` (the given URL, else the embedded server in the data
    directory), migrated, as a pool; the embedded server's handle is released on exit.
    Must run inside ``trio_asyncio.open_loop()``."""
    url = _database_url(args)
    embedded: EmbeddedPostgres | None = None
    if url is None:
        embedded = await trio.to_thread.run_sync(start_embedded, _data_dir(args))
        url = embedded.url
    try:
        async with open_database(url) as db:
            applied = await db.run(apply_migrations)
            if applied:
                log.info("migrations applied", migrations=applied)
            yield db
    finally:
        if embedded is not None:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(embedded.stop)


async def _first_token(db: Database, secret: bytes, data_dir: Path) -> str | None:
    """On the very first start (no account yet): create account ``default`` with a token
    holding all eight permissions; return the JWT (also saved to
    ``<data-dir>/first-token``, mode 0600), else None."""

    async def no_accounts(connection: Any) -> bool:
        return bool(await connection.fetchval("SELECT NOT EXISTS (SELECT 1 FROM accounts)"))

    if not await db.run(no_accounts):
        return None
    now = int(time.time())
    _, token = await db.transaction(
        accounts.create_token,
        FIRST_ACCOUNT,
        list(PERMISSIONS),
        now=now,
        expires_at=None,
        current_version=CURRENT_VERSION,
    )
    jwt_token = issue_token(secret, token.id, now=now, expires_at=None)
    _save_private(data_dir / "first-token", jwt_token + "\n")
    return jwt_token


def _save_private(path: Path, content: str) -> None:
    """Write ``content`` to ``path`` with mode 0600 (its directory created if missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(content)


async def _wait_for_signal(
    stop: trio.Event, force: trio.CancelScope, *, task_status: Any = trio.TASK_STATUS_IGNORED
) -> None:
    """SIGINT or SIGTERM: set ``stop`` (the graceful shutdown); a second one cancels
    ``force`` (everything, at once)."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for signum in signals:
            if stop.is_set():
                log.warning("second signal: stopping at once", signal=signal.Signals(signum).name)
                force.cancel()
                return
            log.info("stopping", signal=signal.Signals(signum).name)
            stop.set()


def parse_nameserver(text: str) -> tuple[str, int]:
    """``IP[:PORT]`` (IPv6 as ``[IP]:PORT``) for ``--dns-nameserver``; port 53 by default.

    Raises:
        argparse.ArgumentTypeError: not an IP address with an optional port.
    """
    import ipaddress

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


def engine_settings(args: argparse.Namespace) -> EngineSettings:
    """The engine's settings from ``uptrio serve`` flags."""
    return EngineSettings(
        max_probes_in_flight=args.max_probes_in_flight,
        shard_count=args.shards,
        monitor_intensity=Intensity(
            max_restarts=args.restart_intensity, period_seconds=args.restart_period
        ),
    )


def service_settings(args: argparse.Namespace) -> ServiceSettings:
    """The supervision tree's settings from ``uptrio serve`` flags."""
    return ServiceSettings(
        engine=None if args.no_engine else engine_settings(args),
        batch_size=args.batch_size,
        batch_age_seconds=args.batch_age_ms / 1000,
        store_buffer=args.store_buffer,
        shutdown_seconds=args.shutdown_seconds,
    )


async def serve(args: argparse.Namespace) -> int:
    """``uptrio serve``: run until SIGINT or SIGTERM, then stop cleanly; the exit status.

    Shutdown order (``web.service``), within ``--shutdown-seconds``: Hypercorn stops
    accepting and finishes requests in flight, the engine's actors stop, then the store
    actor writes every result still queued and the pool closes: no probed check is lost.
    A second signal stops at once. Exit status 1 when another service already runs with
    the data directory.
    """
    data_dir = _data_dir(args)
    socket_path = admin_socket_path(data_dir)
    try:
        await check_admin_socket_free(socket_path)
    except RuntimeError as exc:
        print(f"uptrio: {exc}", file=sys.stderr)
        return 1
    secret = load_secret(data_dir)
    stop = trio.Event()
    async with trio_asyncio.open_loop(), open_store(args) as db:
        first = await _first_token(db, secret, data_dir)
        async with trio.open_nursery() as outer:
            await outer.start(_wait_for_signal, stop, outer.cancel_scope)
            await outer.start(
                partial(
                    run_idempotency_purge,
                    db,
                    retention_seconds=args.idempotency_retention_seconds,
                )
            )
            prober = Prober(dns_nameserver=args.dns_nameserver, address_policy=target_policy(args))
            request_db = db.with_deadline(args.database_timeout_seconds)

            def make_services(engine: MonitorEngine) -> Services:
                return Services(
                    db=request_db,
                    engine=engine,
                    jwt_secret=secret,
                    settings=web_settings(args),
                    target_policy=target_policy(args),
                    data_dir=data_dir,
                )

            web = WebOptions(bind=[f"{args.host}:{args.port}"], make_services=make_services)
            async with open_service(db, service_settings(args), prober=prober, web=web) as service:
                _announce(service.binds, data_dir, first)
                async with trio.open_nursery() as admin:
                    try:
                        await admin.start(serve_admin_socket, socket_path, service)
                    except ValueError as exc:  # a data directory path too long for a socket
                        log.error("no admin interface", error=str(exc))
                    await stop.wait()
                    admin.cancel_scope.cancel()
            outer.cancel_scope.cancel()
    log.info("stopped")
    return 0


def _announce(binds: list[str], data_dir: Path, first: str | None) -> None:
    log.info("listening", binds=binds, data_dir=str(data_dir))
    print(f"Uptrio is listening on {', '.join(binds)}", flush=True)
    if first is not None:
        print(
            "\nFirst start: created account 'default' and a token with all eight "
            f"permissions (also saved in {data_dir / 'first-token'}):\n\n{first}\n",
            flush=True,
        )


async def supervisors_command(args: argparse.Namespace) -> int:
    """``uptrio supervisors list|restart NAME``: ask the running service through its admin
    socket; exit status 1 (with a message on stderr) when none runs or it refuses."""
    path = admin_socket_path(_data_dir(args))
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
    """``uptrio tokens create|list|revoke``."""
    async with trio_asyncio.open_loop(), open_store(args) as db:
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
            secret = load_secret(_data_dir(args))
            print(issue_token(secret, token.id, now=now, expires_at=expires_at))
            return 0
        if args.tokens == "list":
            rows = await db.run(accounts.list_tokens, args.account)
            print(f"{'ID':<30} {'ACCOUNT':<20} {'STATE':<8} {'EXPIRES':<10} PERMISSIONS")
            for account_name, t in rows:
                state = (
                    "revoked"
                    if t.revoked_at
                    else ("expired" if t.expires_at and t.expires_at <= now else "active")
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


def _store_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", help="data directory (default $UPTRIO_DATA_DIR or ./.uptrio)")
    parser.add_argument(
        "--database-url", help="external Postgres URL (default $UPTRIO_DATABASE_URL; else embedded)"
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``uptrio`` argument parser (its sub-commands add their own flags)."""
    parser = argparse.ArgumentParser(prog="uptrio", description="Uptime monitoring service.")
    parser.add_argument("--log-format", choices=("json", "console"), default="json")
    parser.add_argument("--log-level", default="info")
    commands = parser.add_subparsers(dest="command", required=True)

    serve_p = commands.add_parser("serve", help="run the service")
    add_request_safety_flags(serve_p)
    _store_flags(serve_p)
    serve_p.add_argument("--host", default="127.0.0.1")
    serve_p.add_argument("--port", type=int, default=8080)
    serve_p.add_argument(
        "--max-body-bytes",
        type=int,
        default=1024 * 1024,
        help="largest request body, bytes (default 1 MiB)",
    )
    serve_p.add_argument(
        "--shutdown-seconds",
        type=float,
        default=10.0,
        help="graceful shutdown deadline, seconds (default 10)",
    )
    serve_p.add_argument(
        "--no-engine", action="store_true", help="serve the API only; probe nothing"
    )
    serve_p.add_argument(
        "--dns-nameserver",
        type=parse_nameserver,
        default=None,
        help="IP[:PORT] for dns checks (default: the system's)",
    )
    serve_p.add_argument(
        "--max-probes-in-flight",
        type=int,
        default=1000,
        help="global cap on concurrent probes (default 1000)",
    )
    serve_p.add_argument("--shards", type=int, default=8, help="monitor supervisors (default 8)")
    serve_p.add_argument(
        "--restart-intensity",
        type=int,
        default=50,
        help="monitor restarts one shard tolerates per period (default 50)",
    )
    serve_p.add_argument(
        "--restart-period",
        type=float,
        default=60.0,
        help="restart intensity period, seconds (default 60)",
    )
    serve_p.add_argument(
        "--batch-size", type=int, default=500, help="check results per store batch (default 500)"
    )
    serve_p.add_argument(
        "--batch-age-ms",
        type=float,
        default=200.0,
        help="oldest result age before a batch is written, ms (default 200)",
    )
    serve_p.add_argument(
        "--store-buffer",
        type=positive_int,
        default=100_000,
        help="check results buffered while the database is down; past it the oldest are "
        "dropped (default 100000)",
    )
    serve_p.add_argument(
        "--database-timeout-seconds",
        type=float,
        default=2.0,
        help="longest an API request waits on the database before a 500 "
        "database_unavailable, seconds (default 2)",
    )

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
    list_s.add_argument("--data-dir", help="data directory (default $UPTRIO_DATA_DIR or ./.uptrio)")
    restart_s = supervisor_commands.add_parser(
        "restart", help="restart one supervisor; it reloads its children from the database"
    )
    restart_s.add_argument(
        "--data-dir", help="data directory (default $UPTRIO_DATA_DIR or ./.uptrio)"
    )
    restart_s.add_argument("name", metavar="NAME", help="root, engine, shard-N (or store, web)")

    from bench.cli import add_commands as add_bench_commands  # argparse only: cheap

    add_bench_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``uptrio`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    configure_logging(args.log_format, args.log_level)
    if args.command == "serve":
        try:
            return trio.run(serve, args)
        except Exception as exc:  # past the root's restart intensity, or a failed start
            log.critical("service failed", error=repr(exc), exc_info=exc)
            return 1
    if args.command == "supervisors":
        return trio.run(supervisors_command, args)
    if args.command == "tokens":
        return trio.run(tokens_command, args)
    if args.command == "bench":
        from bench.cli import main as bench_main  # the harness (bench/), loaded on use

        return bench_main(args, argv)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
