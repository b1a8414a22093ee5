"""Reading the apply format's files (docs/apply.md, "Files"): YAML with the line of each
value, checked against the JSON Schema (:mod:`.format`), names unique per kind.

Every problem is an :class:`InvalidFiles` naming file, line, kind, name and field, as
``FILE:LINE: <kind> <name>: <field>: <message>`` (docs/apply.md, "Files": exit status 2 names
file, line and field).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator, ValidationError

from .format import KINDS, kind_named, load_schema

__all__ = ["Desired", "InvalidFiles", "Resource", "load_paths", "load_text"]

Path_ = tuple[str | int, ...]
"""Where a value sits in a document: the keys and list indexes down to it."""


@dataclass(frozen=True)
class Resource:
    """One object of the files: its ``kind`` (top-level key), ``name``, ``fields`` as
    written (references still names), and where it is (``file``, ``line``, 1-based; the
    line of each field in ``field_lines``)."""

    kind: str
    name: str
    fields: dict[str, Any]
    file: str
    line: int
    field_lines: dict[str, int] = field(default_factory=dict)

    def at(self, name: str) -> str:
        """``FILE:LINE: <kind> <name>: <field>`` of the field ``name``, for a message."""
        line = self.field_lines.get(name, self.line)
        return f"{self.file}:{line}: {self.kind} {self.name}: {name}"


@dataclass
class Desired:
    """The resources of all the files, by kind, in file order."""

    by_kind: dict[str, list[Resource]] = field(default_factory=dict)

    def of(self, kind: str) -> list[Resource]:
        """The resources of ``kind`` (empty for a kind the files do not have)."""
        return self.by_kind.get(kind, [])

    def has(self, kind: str) -> bool:
        """Whether the files have the top-level key ``kind`` (even an empty list)."""
        return kind in self.by_kind


class InvalidFiles(Exception):
    """The files are not valid apply files; ``problems`` are the lines to print, one per
    problem, each ``FILE:LINE: ...``."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def _lines(node: yaml.Node, path: Path_, out: dict[Path_, int]) -> None:
    """Record in ``out`` the 1-based line of ``node`` and of each value below it."""
    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                _lines(value, (*path, key.value), out)
                out[(*path, key.value)] = key.start_mark.line + 1  # the key's, not the value's
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _lines(item, (*path, index), out)


def _parse(text: str, file: str) -> tuple[Any, dict[Path_, int]]:
    """The document of ``text`` and the line of each value; InvalidFiles for bad YAML or a
    key twice in one mapping."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return {}, {}
        _check_duplicate_keys(node, file)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise InvalidFiles([f"{file}:{line}: invalid YAML: {exc.problem or exc}"]) from None
    finally:
        loader.dispose()
    lines: dict[Path_, int] = {}
    _lines(node, (), lines)
    return data, lines


def _check_duplicate_keys(node: yaml.Node, file: str) -> None:
    """InvalidFiles for a mapping with a key twice (YAML forbids it; PyYAML keeps the last)."""
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                if key.value in seen:
                    line = key.start_mark.line + 1
                    raise InvalidFiles([f"{file}:{line}: key {key.value!r} given twice"])
                seen.add(key.value)
            _check_duplicate_keys(value, file)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _check_duplicate_keys(item, file)


def _culprit(error: ValidationError) -> list[str]:
    """The key an error is about when it is not on its path: the missing property of a
    ``required`` error, the unknown one of an ``additionalProperties`` error; else none."""
    instance, schema = error.instance, error.schema
    if not isinstance(instance, dict) or not isinstance(schema, dict):
        return []
    if error.validator == "required":
        wanted = schema.get("required", [])
        return [p for p in wanted if p not in instance][:1]
    if error.validator == "additionalProperties":
        known = set(schema.get("properties", {}))
        return [str(key) for key in instance if key not in known][:1]
    return []


def _error_line(error: ValidationError, data: Any, lines: dict[Path_, int], file: str) -> str:
    """``FILE:LINE: <kind> <name>: <field>: <message>`` for one schema error (the line of
    the field when it is in the file, else of the nearest value holding it)."""
    path: Path_ = tuple(error.absolute_path)
    prefix = path
    while prefix and prefix not in lines:
        prefix = prefix[:-1]
    culprit = _culprit(error)
    line = lines.get((*path, *culprit), lines.get(prefix, 1))
    if len(path) < 2:
        return f"{file}:{line}: {error.message}"
    kind, index = str(path[0]), path[1]
    item = data[kind][index] if isinstance(index, int) else None
    name_field = kind_named(kind).name_field if kind in {k.key for k in KINDS} else "name"
    name = item.get(name_field) if isinstance(item, dict) else None
    who = f"{kind} {name}" if isinstance(name, str) else f"{kind} #{int(index) + 1}"
    where = [str(p) if isinstance(p, str) else f"[{p}]" for p in (*path[2:], *culprit)]
    field_name = ".".join(where).replace(".[", "[")
    return f"{file}:{line}: {who}: {field_name or '(object)'}: {error.message}"


def load_text(text: str, file: str, desired: Desired, seen: dict[tuple[str, str], str]) -> None:
    """Add the resources of one file's ``text`` (named ``file`` in messages) to
    ``desired``; ``seen`` maps (kind, name) to the ``FILE:LINE`` of its first definition,
    across files. Raises InvalidFiles with every problem of the file."""
    data, lines = _parse(text, file)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InvalidFiles([f"{file}:1: the file must be a mapping of kinds (monitors: ...)"])
    validator = Draft202012Validator(load_schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    problems = [_error_line(error, data, lines, file) for error in errors]
    if problems:
        raise InvalidFiles(problems)
    for kind in KINDS:
        if kind.key not in data:
            continue
        target = desired.by_kind.setdefault(kind.key, [])
        for index, item in enumerate(data[kind.key]):
            line = lines.get((kind.key, index), 1)
            here = f"{file}:{line}"
            name = item[kind.name_field]
            first = seen.setdefault((kind.key, name), here)
            if first != here:
                problems.append(
                    f"{here}: {kind.key} {name}: {kind.name_field}: given twice (first at {first})"
                )
            field_lines = {k: lines.get((kind.key, index, k), line) for k in item}
            target.append(Resource(kind.key, name, item, file, line, field_lines))
    if problems:
        raise InvalidFiles(problems)


def load_paths(paths: list[Path]) -> Desired:
    """The resources of ``paths``: files, or directories whose ``*.yaml`` and ``*.yml``
    files are read in name order. Raises InvalidFiles (every problem of every file, in
    order), OSError for a file that cannot be read."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted([*path.glob("*.yaml"), *path.glob("*.yml")]))
        else:
            files.append(path)
    desired = Desired()
    seen: dict[tuple[str, str], str] = {}
    problems: list[str] = []
    for file in files:
        try:
            load_text(file.read_text(encoding="utf-8"), str(file), desired, seen)
        except InvalidFiles as exc:
            problems.extend(exc.problems)
    if problems:
        raise InvalidFiles(problems)
    return desired
