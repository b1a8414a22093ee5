"""What the commands of ``uptrio`` share on their command line: where the database is
(``--data-dir``, ``--database-url``, :func:`store_location`), the log flags, number
types (:func:`positive_int`), the probes' source address (:func:`probe_source`), and
:func:`command`, which adds a command with them.

Configuration: flags, else environment (``UPTRIO_DATABASE_URL``, ``UPTRIO_DATA_DIR``),
else the settings' defaults.
"""

from __future__ import annotations

import argparse
import ipaddress
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from engine import SourceAddress, source_address
from store import DEFAULT_DATA_DIR, StoreLocation, leases

__all__ = [
    "Commands",
    "command",
    "data_dir_flag",
    "log_flags",
    "positive_float",
    "positive_int",
    "probe_source",
    "region_name",
    "source_family_conflict",
    "store_flags",
    "store_location",
]

_N = TypeVar("_N", int, float)


def _positive(text: str, kind: type[_N]) -> _N:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a {kind.__name__}: {text!r}") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite number above 0: {text}")
    return value


def region_name(text: str) -> str:
    """A region's name (``store.leases.REGION_NAME``: ``a-z 0-9 -``, 1 to 32 characters),
    for ``argparse``.

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    if not leases.REGION_NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(f"a region is 1 to 32 of a-z, 0-9 and -: {text!r}")
    return text


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


def probe_source(text: str) -> SourceAddress:
    """One of this host's IP addresses, for ``--probe-source-address``: parsed and bound
    once now (`engine.source_address`), so that a bad one stops ``uptrio serve`` with
    status 2 before it starts rather than failing every check.

    Raises:
        argparse.ArgumentTypeError: not an IP address, or not one this host can bind.
    """
    try:
        return source_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def source_family_conflict(
    source: SourceAddress | None, nameserver: tuple[str, int] | None
) -> str | None:
    """Why ``--probe-source-address`` and ``--dns-nameserver`` cannot go together (a
    nameserver of the other family cannot be asked from the source), or None."""
    if source is None or nameserver is None:
        return None
    if ipaddress.ip_address(nameserver[0]).version == source.ip.version:
        return None
    return (
        f"--dns-nameserver {nameserver[0]} cannot be asked from --probe-source-address "
        f"{source.ip}: give both of one family (IPv4 or IPv6)"
    )


def store_location(args: argparse.Namespace) -> StoreLocation:
    """The database's location from ``--data-dir`` / ``--database-url``, else
    ``UPTRIO_DATA_DIR`` / ``UPTRIO_DATABASE_URL``, else the data directory's default."""
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


Commands = argparse._SubParsersAction  # the type add_subparsers returns


def command(
    commands: Commands[argparse.ArgumentParser],
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
