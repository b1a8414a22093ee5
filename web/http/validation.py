"""A request body validated against its pydantic model, with the first error turned into a
422 in Uptrio's words (docs/api.md, Error codes and Hostile input): ``param`` names the
field, the code comes from :data:`web.http.errors.CODES`, and the message never is
pydantic's own."""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from .errors import CODES, ApiError
from .params import holds_nul

__all__ = ["validate"]

M = TypeVar("M", bound=BaseModel)

_ID_PATTERN = re.compile(r"\^\(?([a-z|]+)\)?_\[a-z0-9\].*")
"""The pattern of an id field (``^esc_[a-z0-9]{1,64}$``, ``^(mon|hbt)_[a-z0-9]{1,64}$``):
its message names the prefixes (docs/api.md, "Error codes")."""

_PYDANTIC_CODES = {
    "missing": "parameter_missing",
    "extra_forbidden": "parameter_unknown",
    "literal_error": "invalid_value",
    "enum": "invalid_value",
    "string_too_long": "value_too_long",
    "string_too_short": "value_too_short",
    "too_long": "value_too_long",
    "too_short": "value_too_short",
    "string_pattern_mismatch": "invalid_value",
    "greater_than_equal": "value_out_of_range",
    "less_than_equal": "value_out_of_range",
    "greater_than": "value_out_of_range",
    "less_than": "value_out_of_range",
}


def _message(error: Any, code: str, param: str | None) -> str:
    """Uptrio's words for a pydantic error (docs/api.md, Hostile input: pydantic's own, such
    as ``Input should be a valid integer``, are not part of this API). Errors raised by our
    own validators (``PydanticCustomError`` with a code of :data:`web.http.errors.CODES`)
    keep their message."""
    kind = error["type"]
    limits = error.get("ctx") or {}
    name = param or "the body"
    if kind in CODES:
        return str(error["msg"])  # ours, naming the field already
    if code == "parameter_unknown":
        return f"unknown field {name!r}"
    if code == "parameter_missing":
        return f"{name} is required"
    if code == "metadata_invalid":
        return f"{name} must be an object of string values"
    if kind == "string_pattern_mismatch":
        pattern = str(limits.get("pattern", ""))
        ids = _ID_PATTERN.fullmatch(pattern)
        if ids is not None:  # an id field: say which ids, not the regular expression
            return f"{name} must be an id: " + " or ".join(
                f"{prefix}_…" for prefix in ids.group(1).split("|")
            )
        return f"{name} is malformed: it must match {pattern}"
    if code == "invalid_value":
        return f"{name} must be one of {limits.get('expected', 'the documented values')}"
    if code == "value_out_of_range":
        bound = {
            "greater_than_equal": "at least",
            "less_than_equal": "at most",
            "greater_than": "greater than",
            "less_than": "less than",
        }[kind]
        return f"{name} must be {bound} {next(iter(limits.values()), '')}".rstrip()
    if kind == "too_long":
        return f"{name} may hold at most {limits.get('max_length')} items"
    if code == "value_too_long":
        return f"{name} may be at most {limits.get('max_length')} characters"
    if kind == "too_short":
        return f"{name} must hold at least {limits.get('min_length')} items"
    if code == "value_too_short":
        if limits.get("min_length") == 1:
            return f"{name} may not be empty"
        return f"{name} must be at least {limits.get('min_length')} characters"
    expected = _TYPE_WORDS.get(kind.removesuffix("_type").removesuffix("_parsing"))
    if kind == "int_from_float":
        expected = "an integer"
    if expected is not None:
        return f"{name} must be {expected}"
    if kind == "string_unicode":
        return f"{name} must be valid Unicode text"
    return f"{name} has the wrong type"


_TYPE_WORDS = {
    "int": "an integer",
    "string": "a string",
    "dict": "an object",
    "list": "an array",
    "bool": "true or false",
    "float": "a number",
    "none_required": "null",
}
"""The JSON type a pydantic ``*_type`` error asked for, in words."""


def validate(model: type[M], data: dict[str, Any]) -> M:
    """Validate ``data`` as ``model``; the first error becomes a 422 naming its field.

    Raises:
        ApiError: 422 with a code from :data:`web.http.errors.CODES`; ``invalid_value`` for
            text holding U+0000, which Postgres cannot store.
    """
    try:
        validated = model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        kind = first["type"]
        code = _PYDANTIC_CODES.get(kind)
        if code is None:
            code = kind if kind in CODES else "invalid_type"
        location = _without_member_tag(model, first["loc"])
        param = str(location[0]) if location else None
        if param == "metadata" and code == "invalid_type":
            code = "metadata_invalid"
        where = param if code == "metadata_invalid" else _location(location)
        raise ApiError(code, _message(first, code, where), param=param) from None
    for name, value in data.items():
        if holds_nul(value):
            # Postgres stores no U+0000 in text or jsonb: refuse it here, not with a 500
            raise ApiError(
                "invalid_value",
                f"{name}: text may not contain the NUL character (\\u0000)",
                param=name,
            )
    return validated


def _without_member_tag(model: type[BaseModel], location: tuple[Any, ...]) -> tuple[Any, ...]:
    """pydantic's error location without the tag it inserts after a field that is a
    union, naming the member it tried (``("interval_seconds", "constrained-int")`` for a
    PATCH field, which is ``X | Absent``): the tag is pydantic's, not the request's. The
    field's core schema says whether it is a union (a ``nullable`` one, ``X | None``,
    inserts no tag)."""
    if len(location) < 2:
        return location
    schema: Any = model.__pydantic_core_schema__
    fields = schema["schema"].get("fields", {}) if schema.get("type") == "model" else {}
    field = fields.get(location[0])
    inner = None if field is None else field["schema"]
    while inner is not None and inner.get("type") == "default":
        inner = inner["schema"]
    if inner is not None and inner.get("type") == "union":
        return (location[0], *location[2:])
    return location


def _location(location: Any) -> str | None:
    """A pydantic error location as the message names it: ``assertions[0].source``,
    ``request_headers.X-Api-Key``; None for the body itself. (``param`` stays the
    top-level field.)"""
    if not location:
        return None
    parts = [str(location[0])]
    parts += [f"[{part}]" if isinstance(part, int) else f".{part}" for part in location[1:]]
    return "".join(parts)
