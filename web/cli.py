"""The ``uptrio`` command line: the parser and the commands that are not the service
itself; the flags of ``uptrio serve`` and the settings they make are :mod:`web.flags`.

Commands:

* ``uptrio serve``: :func:`web.service.run_service`, the composition root.
* ``uptrio tokens create|list|revoke|reset-secret``: API tokens, against the same
  database whether or not the service runs; refused when the JWT secret is not the
  database's (``reset-secret`` makes it so, revoking every token).
* ``uptrio supervisors list|restart NAME``: the running service's supervision tree,
  through its admin socket (:mod:`web.admin`).
* ``uptrio nodes list|forget NAME``: the nodes sharing the database.
* Commands other distributions register in the entry-point group ``uptrio.commands``: each
  entry point names a function ``add_commands(subparsers)`` that adds its sub-commands and
  sets ``run=callable(args, argv) -> int`` as their default. ``uptrio bench`` (the
  harness in ``bench/``, an extra) comes this way; the service never imports it.

``--log-format`` and ``--log-level`` go before the command or after it.

Configuration: flags, else environment (``UPTRIO_DATABASE_URL``, ``UPTRIO_DATA_DIR``,
``UPTRIO_JWT_SECRET``), else the settings' defaults.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

import structlog
import trio
import trio_asyncio

from store import Connection, accounts, leases, open_store

from .admin import AdminUnavailable, admin_request, admin_socket_path
from .auth import (
    expired,
    issue_token,
    load_secret,
    parse_permissions,
    secret_fingerprint,
    secret_source,
)
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
from .startup import SecretMismatch, check_secret
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


_RESET_WARNING = (
    "reset-secret makes this process's JWT secret the database's and revokes every token "
    "(signed with the previous secret, none of them could be used any more)."
)


async def tokens_command(args: argparse.Namespace) -> int:
    """``uptrio tokens create|list|revoke|reset-secret``; the exit status (2: bad
    permissions, 1: no such token, a JWT secret that is not the database's
    (``web.startup.check_secret``), or ``reset-secret`` without ``--yes``). ``tokens
    list`` shows each token's name (``--name`` at creation) last, ``-`` for none.
    ``reset-secret --yes`` records this process's secret as the database's (a new
    secret, or the first node's one lost) and revokes every token (README: Several
    nodes)."""
    location = store_location(args)
    secret = load_secret(location.data_dir)
    if args.tokens == "reset-secret" and not args.yes:
        print(f"uptrio: {_RESET_WARNING} Run it again with --yes to do so.", file=sys.stderr)
        return 1
    async with trio_asyncio.open_loop(), open_store(location) as db:
        if args.tokens == "reset-secret":
            fingerprint = secret_fingerprint(secret)
            now = int(time.time())
            count = await db.transaction(accounts.reset_fingerprint, "jwt", fingerprint, now)
            print(
                f"the database now takes the JWT secret in {secret_source(location.data_dir)}; "
                f"{count} token(s) revoked. Give every node this secret, and create new "
                "tokens (uptrio tokens create)."
            )
            return 0
        try:
            await check_secret(db, secret, location.data_dir)
        except SecretMismatch as exc:
            print(f"uptrio: {exc}", file=sys.stderr)
            return 1
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
                name=args.name,
            )
            print(issue_token(secret, token.id, now=now, expires_at=expires_at))
            return 0
        if args.tokens == "list":
            rows = await db.run(accounts.list_tokens, args.account)
            print(f"{'ID':<30} {'ACCOUNT':<20} {'STATE':<8} {'EXPIRES':<10} PERMISSIONS  NAME")
            for account_name, t in rows:
                state = (
                    "revoked"
                    if t.revoked_at
                    else ("expired" if expired(t.expires_at, now) else "active")
                )
                expires = str(t.expires_at) if t.expires_at else "never"
                print(
                    f"{t.id:<30} {account_name:<20} {state:<8} {expires:<10} "
                    f"{','.join(t.permissions)}  {t.name or '-'}"
                )
            return 0
        revoked = await db.run(accounts.revoke_token, args.token_id, now)
        if revoked is None:
            print(f"uptrio: no token {args.token_id}", file=sys.stderr)
            return 1
        print(f"revoked {revoked.id}" + (f" ({revoked.name})" if revoked.name else ""))
        return 0


async def nodes_command(args: argparse.Namespace) -> int:
    """``uptrio nodes list``: every node sharing the database, with the buckets it holds
    and the active monitors and heartbeats in them, its state (live, stopped, expired)
    and how long ago it last renewed its leases, by the database's clock (extensions
    part 6). Exit status 0.

    ``uptrio nodes forget NAME``: take a node that is not live (stopped, or expired)
    off the list (``store.leases.forget_node``); exit status 1 for a live node or an
    unknown name. Nodes stopped or expired for three days go by themselves (the
    maintenance round, README: Several nodes)."""
    async with trio_asyncio.open_loop(), open_store(store_location(args)) as db:
        if args.nodes == "forget":
            return _forgot(args.name, await db.transaction(leases.forget_node, args.name))
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


def _forgot(name: str, state: str | None) -> int:
    """Say what ``uptrio nodes forget NAME`` did (``state``: the node's state, None for
    no such node); its exit status."""
    if state is None:
        print(f"uptrio: no node {name!r}", file=sys.stderr)
        return 1
    if state == "live":
        print(
            f"uptrio: node {name!r} is live: stop it first (a node that runs registers "
            "again at its next renewal)",
            file=sys.stderr,
        )
        return 1
    print(f"forgot {name} ({state})")
    return 0


async def _database_now(connection: Connection) -> float:
    return float(await connection.fetchval("SELECT extract(epoch FROM now())::float8"))


_LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def _log_flags(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    """``--log-format`` and ``--log-level``: on ``uptrio`` itself with their defaults, and
    on each command without (``argparse.SUPPRESS``), so that given after the command
    (``uptrio serve --log-format console``, as the README writes it) they count, and
    given before it they are not overwritten by the command's defaults."""
    parser.add_argument(
        "--log-format",
        choices=("json", "console"),
        default="json" if defaults else argparse.SUPPRESS,
        help="JSON lines (default) or lines for humans, on stderr",
    )
    parser.add_argument(
        "--log-level",
        type=str.lower,
        choices=_LOG_LEVELS,
        default="info" if defaults else argparse.SUPPRESS,
        help="the least level logged (default info)",
    )


def token_name(text: str) -> str:
    """A token's name for ``--name``: 1 to 100 characters, no control characters.

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    if not 1 <= len(text) <= 100 or not text.isprintable():
        raise argparse.ArgumentTypeError("a name is 1 to 100 printable characters")
    return text


_Commands = argparse._SubParsersAction  # the type add_subparsers returns


def _command(
    commands: _Commands[argparse.ArgumentParser],
    name: str,
    text: str,
    flags: Callable[[argparse.ArgumentParser], None],
    common: argparse.ArgumentParser,
) -> argparse.ArgumentParser:
    """Command ``name`` of ``commands``, with the log flags (``common``) and ``flags``
    (``store_flags``, ``data_dir_flag`` or ``serve_flags``)."""
    parser = commands.add_parser(name, help=text, parents=[common])
    flags(parser)
    return parser


def build_parser() -> argparse.ArgumentParser:
    """The ``uptrio`` argument parser, with the sub-commands of :data:`COMMAND_GROUP`."""
    parser = argparse.ArgumentParser(prog="uptrio", description="Uptime monitoring service.")
    _log_flags(parser, defaults=True)
    common = argparse.ArgumentParser(add_help=False)
    _log_flags(common, defaults=False)
    commands = parser.add_subparsers(dest="command", required=True)

    _command(commands, "serve", "run the service", serve_flags, common)

    tokens_p = commands.add_parser("tokens", help="create, list and revoke API tokens")
    tokens = tokens_p.add_subparsers(dest="tokens", required=True)
    create = _command(tokens, "create", "create a token; prints the JWT alone", store_flags, common)
    create.add_argument("--account", required=True, help="account name (created if missing)")
    create.add_argument(
        "--permissions",
        required=True,
        help="comma-separated, e.g. monitors.read,incidents.create; or all",
    )
    create.add_argument(
        "--expires-in", type=positive_int, default=None, help="lifetime in seconds (at least 1)"
    )
    create.add_argument(
        "--name", type=token_name, default=None, help="a name for the token (tokens list)"
    )
    listing = _command(tokens, "list", "list tokens", store_flags, common)
    listing.add_argument("--account", default=None)
    revoke = _command(
        tokens, "revoke", "revoke a token from the next request on", store_flags, common
    )
    revoke.add_argument("token_id", metavar="tok_...")
    reset = _command(
        tokens,
        "reset-secret",
        "make this process's JWT secret the database's; revokes every token",
        store_flags,
        common,
    )
    reset.add_argument("--yes", action="store_true", help="do it (every token is revoked)")

    supervisors_p = commands.add_parser(
        "supervisors", help="list or restart the running service's supervisors"
    )
    supervisors = supervisors_p.add_subparsers(dest="supervisors", required=True)
    _command(
        supervisors,
        "list",
        "name, state, children, restarts in the current period, last failure",
        data_dir_flag,
        common,
    )
    restart = _command(
        supervisors,
        "restart",
        "restart one supervisor; it reloads its children from the database",
        data_dir_flag,
        common,
    )
    restart.add_argument("name", metavar="NAME", help="root, engine, shard-N (or store, web)")

    nodes_p = commands.add_parser("nodes", help="the nodes sharing the database")
    nodes = nodes_p.add_subparsers(dest="nodes", required=True)
    _command(
        nodes,
        "list",
        "name, buckets held, state, last lease renewal, start time",
        store_flags,
        common,
    )
    forget = _command(
        nodes, "forget", "take a stopped or expired node off the list", store_flags, common
    )
    forget.add_argument("name", metavar="NAME")

    for entry in entry_points(group=COMMAND_GROUP):
        entry.load()(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``uptrio`` console script; returns the exit status.

    A reader of stdout that goes away (``uptrio nodes list | head``) ends the command
    quietly with status 141 (128 + SIGPIPE, as a command killed by the signal), not with
    a ``BrokenPipeError`` traceback (Python's ``signal`` docs, "Note on SIGPIPE").
    """
    try:
        status = _run(argv)
        sys.stdout.flush()
    except (BrokenPipeError, BaseExceptionGroup) as exc:
        if isinstance(exc, BaseExceptionGroup) and exc.split(BrokenPipeError)[1] is not None:
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the final flush
        return 128 + signal.SIGPIPE
    return status


def _run(argv: list[str] | None) -> int:
    """Parse ``argv`` and run the command; its exit status."""
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
