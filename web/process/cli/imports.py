"""``uptrio import uptime-kuma FILE.json`` and ``uptrio import gatus FILE.yaml``: another
tool's configuration printed in the apply format (docs/import.md; README, "Importing from
Uptime Kuma and Gatus").

Standard output: the apply document as YAML. Standard error: one line per thing that could
not be mapped, ``FILE: <where>: <what>`` (``where``: a Kuma monitor's name and id, a
Gatus file's line). Exit status 0 when the file was converted (notes or not), 2 when it
cannot be read or is not a document of the tool (the message says why).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .flags import CommandParser, Commands

__all__ = ["add_command", "run"]

_HELP = {  # the sources of importers.CONVERTERS: what each reads, and its file
    "uptime-kuma": ("an Uptime Kuma 1.x JSON backup (Settings → Backup → Export)", "FILE.json"),
    "gatus": ("a Gatus configuration file", "FILE.yaml"),
}


def add_command(commands: Commands[CommandParser], common: CommandParser) -> None:
    """Add ``uptrio import`` and its sources to ``commands``."""
    import_p = commands.add_parser(
        "import", help="print another tool's configuration in the apply format"
    )
    sources = import_p.add_subparsers(dest="source", required=True)
    for source, (what, metavar) in _HELP.items():
        parser = sources.add_parser(source, help=f"convert {what}", parents=[common])
        parser.add_argument("file", metavar=metavar, type=Path, help=what)
    import_p.set_defaults(run=run)


def run(args: argparse.Namespace, argv: list[str] | None) -> int:
    """Run ``uptrio import SOURCE FILE``; its exit status (0, or 2 for a file that cannot
    be read or converted)."""
    from .importers import CONVERTERS, InvalidImport, dump_yaml  # they import the engine

    path: Path = args.file
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"uptrio: {path}: cannot read it: {exc}", file=sys.stderr)
        return 2
    try:
        conversion = CONVERTERS[args.source](text)
    except InvalidImport as exc:
        print(f"uptrio: {path}: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(dump_yaml(conversion.document()))
    for note in conversion.notes:
        print(f"{path}: {note}", file=sys.stderr)
    return 0
