"""What the commands of ``uptrio`` share on their command line: their parser
(:class:`CommandParser`), where the database is (``--data-dir``, ``--database-url``,
:func:`store_location`), the log flags, number types (:func:`positive_int`), and
:func:`command`, which adds a command with them.

Light on purpose: the whole ``uptrio`` parser is built on every start (``uptrio --help``,
``uptrio tokens create``), so this module imports the standard library only, and the
commands import their heavy parts (the store, the engine, the API) when they run.

Configuration: flags, else environment (``UPTRIO_DATABASE_URL``, ``UPTRIO_DATA_DIR``),
else :data:`DEFAULT_DATA_DIR`.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from store import StoreLocation

__all__ = [
    "DEFAULT_DATA_DIR",
    "CommandParser",
    "Commands",
    "command",
    "data_dir_flag",
    "log_flags",
    "positive_float",
    "positive_int",
    "store_flags",
    "store_location",
]

DEFAULT_DATA_DIR = Path("./.uptrio")
"""The data directory when neither ``--data-dir`` nor ``UPTRIO_DATA_DIR`` is given
(docs/operations.md, Command line)."""

_N = TypeVar("_N", int, float)


class CommandParser(argparse.ArgumentParser):
    """The parser of ``uptrio`` and of each of its commands (``add_subparsers`` makes its
    sub-parsers of its own class).

    Flags whose defaults need heavy imports (``uptrio serve``'s come from the settings of
    every package, and those import the engine, the store and the API) are added with
    :meth:`defer`: they are added the first time this parser parses or formats its help,
    so that building the whole ``uptrio`` parser imports none of them, and ``uptrio serve
    --help`` shows them as if they had been added at once.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deferred: list[Callable[[argparse.ArgumentParser], None]] = []

    def defer(self, flags: Callable[[argparse.ArgumentParser], None]) -> None:
        """Call ``flags(self)`` when this parser first parses or formats its help."""
        self._deferred.append(flags)

    def _add_deferred(self) -> None:
        while self._deferred:
            self._deferred.pop(0)(self)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        """``argparse.ArgumentParser.parse_known_args``, the deferred flags added first."""
        self._add_deferred()
        return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        """The usage line, the deferred flags added first."""
        self._add_deferred()
        return super().format_usage()

    def format_help(self) -> str:
        """The help, the deferred flags added first."""
        self._add_deferred()
        return super().format_help()


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


def store_location(args: argparse.Namespace) -> StoreLocation:
    """The database's location from ``--data-dir`` / ``--database-url``, else
    ``UPTRIO_DATA_DIR`` / ``UPTRIO_DATABASE_URL``, else the data directory's default."""
    from store import StoreLocation  # the store, imported when a command runs

    data_dir = getattr(args, "data_dir", None) or os.environ.get("UPTRIO_DATA_DIR")
    url = getattr(args, "database_url", None) or os.environ.get("UPTRIO_DATABASE_URL")
    return StoreLocation(
        data_dir=Path(data_dir) if data_dir else DEFAULT_DATA_DIR, database_url=url or None
    )


def data_dir_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir", help=f"data directory (default $UPTRIO_DATA_DIR or {DEFAULT_DATA_DIR})"
    )


def store_flags(parser: argparse.ArgumentParser) -> None:
    data_dir_flag(parser)
    parser.add_argument(
        "--database-url", help="external Postgres URL (default $UPTRIO_DATABASE_URL; else embedded)"
    )


_LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def log_flags(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    """``--log-format`` and ``--log-level``: on ``uptrio`` itself with their defaults, and
    on each command without (``argparse.SUPPRESS``), so that given after the command
    (``uptrio serve --log-format console``, as docs/operations.md writes it) they count, and
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


Commands = argparse._SubParsersAction  # add_subparsers returns Commands[CommandParser]


def command(
    commands: Commands[CommandParser],
    name: str,
    text: str,
    flags: Callable[[argparse.ArgumentParser], None],
    common: CommandParser,
) -> CommandParser:
    """Command ``name`` of ``commands``, with the log flags (``common``) and ``flags``
    (``store_flags`` or ``data_dir_flag``)."""
    parser = commands.add_parser(name, help=text, parents=[common])
    flags(parser)
    return parser
