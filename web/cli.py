"""The ``uptrio`` command line and the composition root of the service.

``uptrio serve`` wires store, engine and web into one root nursery (DESIGN: Shape)::

    trio.run
    └── trio-asyncio loop (asyncpg lives inside it)
        └── database pool (embedded Postgres unless a URL is given)
            └── root nursery: engine, Hypercorn serving the Quart-Trio app, signal watcher

``uptrio tokens create|list|revoke`` manage API tokens against the same database, whether
or not the service runs. Configuration: flags, else environment (``UPTRIO_DATABASE_URL``,
``UPTRIO_DATA_DIR``, ``UPTRIO_JWT_SECRET``), else defaults.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import structlog
import trio
import trio_asyncio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve as hypercorn_serve

from store import (
    Database,
    EmbeddedPostgres,
    accounts,
    apply_migrations,
    open_database,
    start_embedded,
)

from .app import create_app
from .auth import PERMISSIONS, issue_token, load_secret, parse_permissions
from .logs import configure_logging
from .services import MonitorEngine, NoEngine, Services, WebSettings
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
    stop: trio.Event, *, task_status: Any = trio.TASK_STATUS_IGNORED
) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for signum in signals:
            log.info("stopping", signal=signal.Signals(signum).name)
            stop.set()
            return


EngineFactory = Callable[..., Awaitable[None]]
"""``async def run_engine(db, args, *, task_status)``: starts the engine, reports a
:class:`web.services.MonitorEngine` with ``task_status.started(engine)``, runs until
cancelled, flushing what it must on the way out."""


async def serve(args: argparse.Namespace, run_engine: EngineFactory | None = None) -> None:
    """``uptrio serve``: run until SIGINT or SIGTERM, then stop cleanly."""
    data_dir = _data_dir(args)
    secret = load_secret(data_dir)
    stop = trio.Event()
    async with trio_asyncio.open_loop(), open_store(args) as db:
        first = await _first_token(db, secret, data_dir)
        async with trio.open_nursery() as nursery:
            await nursery.start(_wait_for_signal, stop)
            engine: MonitorEngine = NoEngine()
            if run_engine is not None and not args.no_engine:
                engine = await nursery.start(run_engine, db, args)
            services = Services(
                db=db,
                engine=engine,
                jwt_secret=secret,
                settings=WebSettings(max_body_bytes=args.max_body_bytes),
                data_dir=data_dir,
            )
            config = HypercornConfig()
            config.bind = [f"{args.host}:{args.port}"]
            config.accesslog = None
            config.errorlog = None
            config.graceful_timeout = args.shutdown_seconds
            binds = await nursery.start(
                partial(hypercorn_serve, create_app(services), config, shutdown_trigger=stop.wait)
            )
            log.info("listening", binds=binds, data_dir=str(data_dir))
            print(f"Uptrio is listening on {', '.join(binds)}", flush=True)
            if first is not None:
                print(
                    "\nFirst start: created account 'default' and a token with all eight "
                    f"permissions (also saved in {data_dir / 'first-token'}):\n\n{first}\n",
                    flush=True,
                )
            await stop.wait()
            # Hypercorn has stopped accepting and finished in-flight requests (it returns
            # on the same trigger); stopping the engine flushes the store on its way out.
            nursery.cancel_scope.cancel()
    log.info("stopped")


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
    create.add_argument("--expires-in", type=int, default=None, help="lifetime in seconds")
    list_p = token_commands.add_parser("list", help="list tokens")
    _store_flags(list_p)
    list_p.add_argument("--account", default=None)
    revoke = token_commands.add_parser("revoke", help="revoke a token from the next request on")
    _store_flags(revoke)
    revoke.add_argument("token_id", metavar="tok_...")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``uptrio`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    configure_logging(args.log_format, args.log_level)
    if args.command == "serve":
        trio.run(serve, args, _engine_factory())
        return 0
    if args.command == "tokens":
        return trio.run(tokens_command, args)
    return 2


def _engine_factory() -> EngineFactory | None:
    return None


if __name__ == "__main__":
    raise SystemExit(main())
