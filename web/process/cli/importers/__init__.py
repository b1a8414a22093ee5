"""Importers: another tool's configuration turned into Uptrio's apply format
(docs/import.md; README, "Importing from Uptime Kuma and Gatus").

Each importer is a pure converter, ``text -> Conversion``: it reads the other tool's
document and returns the apply document (a dict with the top-level keys
``notification_channels``, ``escalation_policies``, ``monitors`` and ``heartbeats``, each a
list of the API's create fields, references by name) and one :class:`Note` per thing it
could not map. Nothing is sent anywhere: ``uptrio import`` prints the YAML
(:func:`dump_yaml`) and the notes, and ``uptrio apply`` applies it.

* :func:`convert_kuma` (:mod:`.kuma`): an Uptime Kuma 1.x JSON backup.
* :func:`convert_gatus` (:mod:`.gatus`): a Gatus ``config.yaml``.

Error handling: an input that is not a document of the tool at all (not JSON or YAML, not
an object, no monitors or endpoints list) raises :class:`InvalidImport`; anything smaller
(one monitor of an unknown type, one condition without an equivalent) becomes a note and
the rest is still converted.
"""

from __future__ import annotations

from collections.abc import Callable

from ._document import Conversion, InvalidImport, Note, dump_yaml
from .gatus import convert_gatus
from .kuma import convert_kuma

__all__ = [
    "CONVERTERS",
    "Conversion",
    "InvalidImport",
    "Note",
    "convert_gatus",
    "convert_kuma",
    "dump_yaml",
]

CONVERTERS: dict[str, Callable[[str], Conversion]] = {
    "uptime-kuma": convert_kuma,
    "gatus": convert_gatus,
}
"""Each ``uptrio import`` source (the command's sub-command) and its converter."""
