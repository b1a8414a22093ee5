"""Reading a request body as JSON, strictly (docs/api.md, Error codes and Hostile input).

:func:`parse_json` accepts UTF-8 JSON only, and refuses with a 400 what two JSON parsers
could read differently or what costs more than it is worth to read:

- bytes that are not UTF-8, or not JSON: ``invalid_json``;
- ``NaN``, ``Infinity``, a number beyond the double range or with more than 4,300 digits
  (Python's ``int()`` limit, a CPU-time guard): ``invalid_json``, ``param`` naming the
  top-level field that holds it;
- nesting deeper than :data:`MAX_JSON_DEPTH` objects and arrays: ``json_too_deep``
  (no body of this API nests more than 3 deep; the parser itself would give up with a
  ``RecursionError`` somewhere near 1,000, depending on the stack);
- an object with the same key twice (``{"title": "a", "title": "b"}``):
  ``duplicate_key``, ``param`` naming the key, or the top-level field that holds the
  object (RFC 8259, 4: "the names within an object SHOULD be unique"; parsers differ on
  which value wins, so a proxy and this service could read two different requests).
"""

from __future__ import annotations

import json
import math
from typing import Any

from .errors import ApiError

__all__ = ["MAX_JSON_DEPTH", "parse_json"]

MAX_JSON_DEPTH = 100
"""Deepest nesting of objects and arrays a body may have (the body's own object is 1)."""

_UNREADABLE = object()
"""Stands in for a number that cannot be read (NaN, Infinity, out of range) while parsing,
so that the error can name the field that holds it."""


class _Duplicated(dict[str, Any]):
    """An object that had a key twice (marks where, so the error can name the field)."""

    key: str = ""


def parse_json(raw: bytes) -> Any:
    """Decode a request body (rules in the module docstring).

    Returns:
        The JSON value (dicts, lists, str, int, float, bool, None).

    Raises:
        ApiError: 400 ``invalid_json``, ``json_too_deep`` or ``duplicate_key``.
    """
    unreadable: list[str] = []
    duplicated: list[str] = []

    def constant(text: str) -> object:
        unreadable.append(text)
        return _UNREADABLE

    def floating(text: str) -> object:
        value = float(text)
        if not math.isfinite(value):
            unreadable.append(text)
            return _UNREADABLE
        return value

    def integer(text: str) -> object:
        try:
            return int(text)
        except ValueError:  # more digits than int() takes (a CPU-time guard)
            unreadable.append(text)
            return _UNREADABLE

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        found = dict(items)
        if len(found) == len(items):
            return found
        marked = _Duplicated(found)
        marked.key = _first_repeated(items)
        duplicated.append(marked.key)
        return marked

    try:
        data = json.loads(
            raw.decode("utf-8"),
            parse_constant=constant,
            parse_float=floating,
            parse_int=integer,
            object_pairs_hook=pairs,
        )
    except RecursionError:
        raise _too_deep() from None
    except (UnicodeDecodeError, ValueError) as exc:
        message = "the body is not valid JSON"
        if isinstance(exc, UnicodeDecodeError):
            message = "the body is not valid UTF-8"
        raise ApiError("invalid_json", message) from None
    if _depth(data) > MAX_JSON_DEPTH:
        raise _too_deep()
    if duplicated:
        key = duplicated[0]
        holder = data if isinstance(data, _Duplicated) else None
        param = key if holder is not None else _field_holding(data, _is_duplicated)
        where = "" if holder is not None or param is None else f" (in {param})"
        raise ApiError(
            "duplicate_key",
            f"the key {json.dumps(key)[:60]} appears twice in one JSON object{where}",
            param=(param or key)[:100],
        )
    if unreadable:
        param = _field_holding(data, lambda item: item is _UNREADABLE)
        shown = unreadable[0] if len(unreadable[0]) <= 24 else unreadable[0][:20] + "..."
        raise ApiError(
            "invalid_json",
            f"{param or 'the body'}: {shown} is not a number this API reads (NaN, Infinity "
            "and numbers beyond the double range or 4,300 digits are refused)",
            param=param,
        )
    return data


def _first_repeated(items: list[tuple[str, Any]]) -> str:
    seen: set[str] = set()
    for key, _ in items:
        if key in seen:
            return key
        seen.add(key)
    return ""


def _too_deep() -> ApiError:
    return ApiError(
        "json_too_deep",
        f"the body nests objects and arrays more than {MAX_JSON_DEPTH} levels deep",
    )


def _is_duplicated(item: Any) -> bool:
    return isinstance(item, _Duplicated)


def _depth(data: Any) -> int:
    """How deep objects and arrays nest in ``data`` (a scalar is 0), walked without
    recursion."""
    deepest = 0
    stack = [(data, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in children)
    return deepest


def _field_holding(data: Any, matches: Any) -> str | None:
    """The top-level key of ``data`` whose value holds an item for which ``matches``
    is true, anywhere (walked without recursion, so any nesting the parser accepted is
    safe), or None."""
    if not isinstance(data, dict):
        return None
    for key, value in data.items():
        stack = [value]
        while stack:
            item = stack.pop()
            if matches(item):
                return str(key)
            if isinstance(item, dict):
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)
    return None
