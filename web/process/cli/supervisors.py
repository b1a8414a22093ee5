"""``uptrio supervisors list|restart NAME``: the running service's supervision tree,
through its admin socket (:mod:`web.process.admin`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .flags import CommandParser, Commands, command, data_dir_flag, store_location

__all__ = ["add_command", "supervisors_command"]


async def supervisors_command(args: argparse.Namespace) -> int:
    """``uptrio supervisors list|restart NAME``: ask the running service through its admin
    socket; exit status 1 (with a message on stderr) when none runs or it refuses."""
    from ..admin import AdminUnavailable, admin_request, admin_socket_path

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


def add_command(commands: Commands[CommandParser], common: CommandParser) -> None:
    """Add ``uptrio supervisors`` and its sub-commands to ``commands``."""
    supervisors_p = commands.add_parser(
        "supervisors", help="list or restart the running service's supervisors"
    )
    supervisors = supervisors_p.add_subparsers(dest="supervisors", required=True)
    command(
        supervisors,
        "list",
        "name, state, children, restarts in the current period, last failure",
        data_dir_flag,
        common,
    )
    restart = command(
        supervisors,
        "restart",
        "restart one supervisor; it reloads its children from the database",
        data_dir_flag,
        common,
    )
    restart.add_argument("name", metavar="NAME", help="root, engine, shard-N (or store, web)")
    supervisors_p.set_defaults(run=run)


def run(args: argparse.Namespace, argv: list[str] | None) -> int:
    """Run ``uptrio supervisors ...``; its exit status (:func:`supervisors_command`)."""
    import trio

    return trio.run(supervisors_command, args)
