"""The ``uptrio`` command line: the parser, and one module per command (:data:`COMMANDS`).

Commands:

* ``uptrio serve`` (:mod:`.serve`): the service, :func:`web.process.service.run_service`,
  and the flags and settings it runs with.
* ``uptrio tokens create|list|revoke|reset-secret`` (:mod:`.tokens`): API tokens, against
  the same database whether or not the service runs.
* ``uptrio supervisors list|restart NAME`` (:mod:`.supervisors`): the running service's
  supervision tree, through its admin socket (:mod:`web.process.admin`).
* ``uptrio nodes list|forget NAME`` (:mod:`.nodes`): the nodes sharing the database.
* ``uptrio apply -f PATH`` and ``uptrio export`` (:mod:`.apply`): configuration as code,
  through the service's API (docs/apply.md).
* ``uptrio import uptime-kuma|gatus FILE`` (:mod:`.imports`): another tool's
  configuration printed in the apply format (docs/import.md).
* Commands other distributions register in the entry-point group ``uptrio.commands``: each
  entry point names a function ``add_commands(subparsers)`` that adds its sub-commands and
  sets ``run=callable(args, argv) -> int`` as their default. ``uptrio bench`` (the
  harness in ``bench/``, an extra) comes this way; the service never imports it.

``--log-format`` and ``--log-level`` go before the command or after it.

The parser is built on every start, so each command module imports, at its top, only
``argparse`` and :mod:`.flags`, and a command imports its heavy parts when it runs: the
store (``tokens``, ``nodes``), the permission list of ``web.routes`` (``tokens create``),
the API client (``apply``), the engine's rules (``import``), the whole service (``serve``).
``uptrio serve``'s flags, whose defaults come from the settings of every package, are
added only when ``serve`` is parsed (:class:`.flags.CommandParser`), and logging
(structlog) is configured once the arguments are parsed. ``uptrio --help`` so imports none
of them (tests/web/test_cli_imports.py).

Configuration: flags, else environment (``UPTRIO_DATABASE_URL``, ``UPTRIO_DATA_DIR``,
``UPTRIO_JWT_SECRET``), else the settings' defaults.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from importlib.metadata import entry_points

from . import apply, imports, nodes, serve, supervisors, tokens
from .flags import CommandParser, log_flags

__all__ = ["COMMANDS", "COMMAND_GROUP", "build_parser", "main"]

COMMAND_GROUP = "uptrio.commands"
"""The entry-point group of the sub-commands that other packages add (``uptrio bench``)."""

COMMANDS = (serve, tokens, supervisors, nodes, apply, imports)
"""The commands of ``uptrio``, one module each, in the order ``uptrio --help`` lists them:
each has ``add_command(commands, common)``, which adds its parser (``common``: the log
flags every command takes) with ``run(args, argv) -> exit status`` as its default."""


def build_parser() -> argparse.ArgumentParser:
    """The ``uptrio`` argument parser: :data:`COMMANDS`, then the sub-commands of
    :data:`COMMAND_GROUP`."""
    parser = CommandParser(prog="uptrio", description="Uptime monitoring service.")
    log_flags(parser, defaults=True)
    common = CommandParser(add_help=False)
    log_flags(common, defaults=False)
    commands = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        module.add_command(commands, common)
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
    from ..logs import configure_logging  # structlog: after ``--help`` has had its turn

    configure_logging(args.log_format, args.log_level)
    return int(args.run(args, argv))
