"""``uptrio serve``: the service (:func:`web.process.service.run_service`).

Its flags and the settings they make are :mod:`.serve_flags`; their defaults come from the
settings of every package, so they are added only when ``uptrio serve`` is parsed
(:meth:`.flags.CommandParser.defer`), and ``uptrio --help`` or ``uptrio tokens create``
import none of the service.
"""

from __future__ import annotations

import argparse
import sys

from .flags import CommandParser, Commands, store_location

__all__ = ["add_command", "run"]


def _serve_flags(parser: argparse.ArgumentParser) -> None:
    """Add :func:`.serve_flags.serve_flags` to ``parser``, importing the settings then."""
    from .serve_flags import serve_flags

    serve_flags(parser)


def add_command(commands: Commands[CommandParser], common: CommandParser) -> None:
    """Add ``uptrio serve`` to ``commands``; its flags are added when it is parsed."""
    serve = commands.add_parser("serve", help="run the service", parents=[common])
    serve.defer(_serve_flags)
    serve.set_defaults(run=run)


def run(args: argparse.Namespace, argv: list[str] | None) -> int:
    """Run the service until SIGINT or SIGTERM; the exit status (1 when it failed, 2
    when its flags contradict each other)."""
    import structlog
    import trio

    from ..service import run_service
    from .serve_flags import service_settings, source_family_conflict

    conflict = source_family_conflict(args.probe_source_address, args.dns_nameserver)
    if conflict:
        print(f"uptrio serve: error: {conflict}", file=sys.stderr)
        return 2
    try:
        return trio.run(run_service, service_settings(args), store_location(args))
    except Exception as exc:  # past the root's restart intensity, or a failed start
        structlog.get_logger("uptrio").critical("service failed", error=repr(exc), exc_info=exc)
        return 1
