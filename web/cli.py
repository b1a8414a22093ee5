"""The ``uptrio`` command line: the parser and the commands that are not the service
itself; the flags of ``uptrio serve`` and the settings they make are :mod:`web.flags`.

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
import sys
import time
from importlib.metadata import entry_points
from typing import Any

import structlog
import trio
import trio_asyncio

from store import Connection, accounts, leases, open_store

from .admin import AdminUnavailable, admin_request, admin_socket_path
from .auth import expired, issue_token, load_secret, parse_permissions
from .flags import (
    data_dir_flag,
    positive_int,
    serve_flags,
    service_settings,
    store_flags,
    store_location,
)
from .logs import configure_logging
from .service import run_service
from .versioning import CURRENT_VERSION

__all__ = ["COMMAND_GROUP", "build_parser", "main", "service_settings"]

log = structlog.get_logger("uptrio")

COMMAND_GROUP = "uptrio.commands"
"""The entry-point group of the sub-commands that other packages add (``uptrio bench``)."""


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


async def nodes_command(args: argparse.Namespace) -> int:
    """``uptrio nodes list``: every node sharing the database, with the buckets it holds
    and the active monitors and heartbeats in them, its state (live, stopped, expired)
    and how long ago it last renewed its leases, by the database's clock (extensions
    part 6). Exit status 0."""
    async with trio_asyncio.open_loop(), open_store(store_location(args)) as db:
        rows = await db.run(leases.list_nodes)
        now = await db.run(_database_now)
    print(
        f"{'NAME':<24} {'BUCKETS':>7} {'MONITORS':>8} {'HEARTBEATS':>10} {'STATE':<8}"
        f" {'RENEWED':>12} STARTED"
    )
    for node in rows:
        renewed = f"{max(0.0, now - node.renewed_at):.1f}s ago"
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(node.started))
        print(
            f"{node.name:<24} {node.buckets:>7} {node.monitors:>8} {node.heartbeats:>10}"
            f" {node.state:<8} {renewed:>12} {started}"
        )
    return 0


async def _database_now(connection: Connection) -> float:
    return float(await connection.fetchval("SELECT extract(epoch FROM now())::float8"))


def build_parser() -> argparse.ArgumentParser:
    """The ``uptrio`` argument parser, with the sub-commands of :data:`COMMAND_GROUP`."""
    parser = argparse.ArgumentParser(prog="uptrio", description="Uptime monitoring service.")
    parser.add_argument("--log-format", choices=("json", "console"), default="json")
    parser.add_argument("--log-level", default="info")
    commands = parser.add_subparsers(dest="command", required=True)

    serve_flags(commands.add_parser("serve", help="run the service"))

    tokens_p = commands.add_parser("tokens", help="create, list and revoke API tokens")
    token_commands = tokens_p.add_subparsers(dest="tokens", required=True)
    create = token_commands.add_parser("create", help="create a token; prints the JWT alone")
    store_flags(create)
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
    store_flags(list_p)
    list_p.add_argument("--account", default=None)
    revoke = token_commands.add_parser("revoke", help="revoke a token from the next request on")
    store_flags(revoke)
    revoke.add_argument("token_id", metavar="tok_...")

    supervisors_p = commands.add_parser(
        "supervisors", help="list or restart the running service's supervisors"
    )
    supervisor_commands = supervisors_p.add_subparsers(dest="supervisors", required=True)
    list_s = supervisor_commands.add_parser(
        "list", help="name, state, children, restarts in the current period, last failure"
    )
    data_dir_flag(list_s)
    restart_s = supervisor_commands.add_parser(
        "restart", help="restart one supervisor; it reloads its children from the database"
    )
    data_dir_flag(restart_s)
    restart_s.add_argument("name", metavar="NAME", help="root, engine, shard-N (or store, web)")

    nodes_p = commands.add_parser("nodes", help="the nodes sharing the database")
    node_commands = nodes_p.add_subparsers(dest="nodes", required=True)
    store_flags(
        node_commands.add_parser(
            "list", help="name, buckets held, state, last lease renewal, start time"
        )
    )

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
    if args.command == "nodes":
        return trio.run(nodes_command, args)
    run = getattr(args, "run", None)
    if run is not None:  # a command of COMMAND_GROUP
        return int(run(args, argv))
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
