"""``uptrio apply`` and ``uptrio export``: configuration as code (docs/apply.md).
A client of the service's API over HTTP (httpx), never
of its database.

Modules: :mod:`.format` (the kinds, references and the JSON Schema), :mod:`.loader` (YAML
files with line numbers, validated), :mod:`.client` (the API calls), :mod:`.account` (what
the account holds, names and ids), :mod:`.plan` (the diff), :mod:`.run` (apply),
:mod:`.export`, :mod:`.command` (the two sub-commands).
"""

from .command import add_command, run

__all__ = ["add_command", "run"]
