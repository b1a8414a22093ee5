"""The ``uptrio apply`` and ``uptrio export`` sub-commands (docs/apply.md),
their flags, and their run in trio. The parser imports the standard library only; the
client (httpx), the loader (YAML, JSON Schema) and the API's models are imported when
one of them runs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

from ..flags import CommandParser, Commands

__all__ = ["DEFAULT_API_URL", "add_command", "run"]

DEFAULT_API_URL = "http://127.0.0.1:8080"
"""Where ``uptrio serve`` listens by default (README, "From nothing to an alert")."""


async def _apply(args: argparse.Namespace) -> int:
    from .client import open_client
    from .run import apply_files

    async with open_client(args.api_url) as http:
        return await apply_files(
            [Path(p) for p in args.file], http, dry_run=args.dry_run, prune=args.prune
        )


async def _export(args: argparse.Namespace) -> int:
    from .client import ApiClient, ApiError, open_client
    from .export import export_account

    async with open_client(args.api_url) as http:
        try:
            await export_account(ApiClient(http))
        except ApiError as exc:
            print(f"uptrio: {exc}", file=sys.stderr)
            return 1
    return 0


def add_command(commands: Commands[CommandParser], common: CommandParser) -> None:
    """Add ``uptrio apply`` and ``uptrio export`` to ``commands``."""
    url_help = f"the service's base URL (default {DEFAULT_API_URL}); the token is UPTRIO_TOKEN"
    apply_p = commands.add_parser(
        "apply",
        parents=[common],
        help="make the account what YAML files say (docs/apply.md)",
        description="Print one line per resource (create, update, delete, unchanged), then "
        "apply. Exit status 0, 1 on an API error, 2 on an invalid file.",
    )
    apply_p.add_argument(
        "-f",
        "--file",
        action="append",
        required=True,
        metavar="PATH",
        help="a YAML file, or a directory of *.yaml files (repeatable)",
    )
    apply_p.add_argument("--dry-run", action="store_true", help="print the plan only")
    apply_p.add_argument(
        "--prune",
        action="store_true",
        help="delete what apply created that the files no longer have",
    )
    apply_p.add_argument("--api-url", default=DEFAULT_API_URL, help=url_help)
    apply_p.set_defaults(run=partial(run, _apply))
    export_p = commands.add_parser(
        "export", parents=[common], help="print the account's resources in the apply format"
    )
    export_p.add_argument("--api-url", default=DEFAULT_API_URL, help=url_help)
    export_p.set_defaults(run=partial(run, _export))


def run(
    command: Callable[[argparse.Namespace], Awaitable[int]],
    args: argparse.Namespace,
    argv: list[str] | None,
) -> int:
    """Run ``command`` (``_apply`` or ``_export``) with ``args`` in trio; its exit status."""
    import trio

    return trio.run(command, args)
