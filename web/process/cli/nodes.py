"""``uptrio nodes list|forget NAME``: the nodes sharing the database."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from .flags import CommandParser, Commands, command, store_flags, store_location

if TYPE_CHECKING:
    from store import Connection

__all__ = ["add_command", "nodes_command"]


async def nodes_command(args: argparse.Namespace) -> int:
    """``uptrio nodes list``: every node sharing the database, with the buckets it holds
    in the any-region pool and the active monitors and heartbeats it runs, its state
    (live, stopped, expired), how long ago it last renewed its leases, by the database's
    clock (docs/several-nodes.md, Operations), when it started, its region and the
    buckets it holds in its region's pool (docs/several-nodes.md, Regions). Exit status 0.

    ``uptrio nodes forget NAME``: take a node that is not live (stopped, or expired)
    off the list (``store.leases.forget_node``); exit status 1 for a live node or an
    unknown name. Nodes stopped or expired for three days go by themselves (the
    maintenance round, docs/several-nodes.md, Operations)."""
    import trio_asyncio

    from store import leases, open_store

    async with trio_asyncio.open_loop(), open_store(store_location(args)) as db:
        if args.nodes == "forget":
            return _forgot(args.name, await db.transaction(leases.forget_node, args.name))
        rows = await db.run(leases.list_nodes)
        now = await db.run(_database_now)
    print(
        f"{'NAME':<24} {'BUCKETS':>7} {'MONITORS':>8} {'HEARTBEATS':>10} {'STATE':<8}"
        f" {'RENEWED':>12} {'STARTED':<20} {'REGION':<16} IN-REGION"
    )
    for node in rows:
        renewed = f"{max(0.0, now - node.renewed_at):.1f}s ago"
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(node.started))
        print(
            f"{node.name:<24} {node.buckets:>7} {node.monitors:>8} {node.heartbeats:>10}"
            f" {node.state:<8} {renewed:>12} {started:<20} {node.region:<16}"
            f" {node.region_buckets:>9}"
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


def add_command(commands: Commands[CommandParser], common: CommandParser) -> None:
    """Add ``uptrio nodes`` and its sub-commands to ``commands``."""
    nodes_p = commands.add_parser("nodes", help="the nodes sharing the database")
    nodes = nodes_p.add_subparsers(dest="nodes", required=True)
    command(
        nodes,
        "list",
        "name, buckets held, state, last lease renewal, start time",
        store_flags,
        common,
    )
    forget = command(
        nodes, "forget", "take a stopped or expired node off the list", store_flags, common
    )
    forget.add_argument("name", metavar="NAME")
    nodes_p.set_defaults(run=run)


def run(args: argparse.Namespace, argv: list[str] | None) -> int:
    """Run ``uptrio nodes ...``; its exit status (:func:`nodes_command`)."""
    import trio

    return trio.run(nodes_command, args)
