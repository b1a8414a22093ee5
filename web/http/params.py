"""Query parameters of list endpoints (docs/api.md, Conventions and decisions: sort,
cursors, search, repeated parameters; docs/api.md, Error codes).

Every bad query parameter is a 400 ``invalid_request_error`` naming it in ``param``: an
unknown name (``unknown_parameter``), a repeated, empty (``sort=``), malformed or not
UTF-8 (``search=%FF``) value or one out of range (``invalid_parameter``), both cursors
at once (``cursor_conflict``), a cursor that is not an id of the listed kind
(``cursor_not_found``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_to_bytes

from store import PageRequest, has_prefix

from .errors import ApiError

Parser = Callable[[str, str], Any]
"""A filter's parser: ``(param name, raw value) -> value``, raising ApiError."""


def choice(*allowed: str) -> Parser:
    """A parser accepting exactly one of ``allowed``."""

    def parse(name: str, raw: str) -> str:
        if raw not in allowed:
            raise ApiError(
                "invalid_parameter",
                f"{name} must be one of {', '.join(allowed)}; got {raw[:50]!r}",
                param=name,
            )
        return raw

    return parse


def boolean(name: str, raw: str) -> bool:
    """``true`` or ``false`` (lowercase only)."""
    if raw not in ("true", "false"):
        raise ApiError("invalid_parameter", f"{name} must be true or false", param=name)
    return raw == "true"


def region_name(name: str, raw: str) -> str:
    """A region's name: 1 to 32 of ``a-z 0-9 -`` (docs/regions.md).

    Raises:
        ApiError: 400 ``invalid_parameter`` naming ``name`` otherwise.
    """
    if not 0 < len(raw) <= 32 or raw.strip("abcdefghijklmnopqrstuvwxyz0123456789-"):
        raise ApiError(
            "invalid_parameter",
            f"{name} must be a region's name: 1 to 32 of a-z, 0-9 and -",
            param=name,
        )
    return raw


def text(max_length: int) -> Parser:
    """A free string of 1 to ``max_length`` characters, without U+0000 (which Postgres
    cannot compare against)."""

    def parse(name: str, raw: str) -> str:
        if not 0 < len(raw) <= max_length or "\x00" in raw:
            raise ApiError(
                "invalid_parameter",
                f"{name} must be 1 to {max_length} characters, without NUL",
                param=name,
            )
        return raw

    return parse


def integer(low: int, high: int) -> Parser:
    """A decimal integer from ``low`` to ``high``."""

    def parse(name: str, raw: str) -> int:
        digits = len(str(high))
        if not (raw.isascii() and raw.isdigit() and len(raw) <= digits) or not (
            low <= int(raw) <= high
        ):
            raise ApiError(
                "invalid_parameter",
                f"{name} must be an integer from {low} to {high}; got {raw[:20]!r}",
                param=name,
            )
        return int(raw)

    return parse


@dataclass(frozen=True, slots=True)
class ListQuery:
    """A parsed list request: the page and the filters (by parameter name)."""

    page: PageRequest
    filters: dict[str, Any]


MONITOR_PATTERN = re.compile(r"(mon|hbt)_[a-z0-9]{1,64}")
"""A ``mon_`` or ``hbt_`` id (:func:`monitor_filter`)."""


def monitor_filter(name: str, raw: str) -> str:
    """A ``monitor`` filter (of alerts, of maintenance windows): a ``mon_`` or ``hbt_``
    id; anything else is a 400 ``invalid_parameter``."""
    if MONITOR_PATTERN.fullmatch(raw) is None:
        raise ApiError(
            "invalid_parameter", f"{name} must be a mon_ or hbt_ id; got {raw[:50]!r}", param=name
        )
    return raw


def single(args: Mapping[str, list[str]], name: str) -> str | None:
    """The one value of query parameter ``name``, or None when absent.

    Raises:
        ApiError: 400 ``invalid_parameter`` when it is given more than once.
    """
    values = args.get(name)
    if not values:
        return None
    if len(values) > 1:
        raise ApiError("invalid_parameter", f"{name} may be given once", param=name)
    return values[0]


def check_names(args: Mapping[str, list[str]], allowed: Iterable[str]) -> None:
    """Raise ``unknown_parameter`` for a query parameter not in ``allowed``."""
    allowed = set(allowed)
    for name in args:
        if name not in allowed:
            raise ApiError(
                "unknown_parameter",
                f"unknown query parameter {name[:50]!r}; this endpoint takes "
                + ", ".join(sorted(allowed)),
                param=name[:100],
            )


def check_utf8(query_string: bytes) -> None:
    """Raise 400 ``invalid_parameter`` naming the first query parameter whose name or value
    is not UTF-8 once percent-decoded (``search=%FF``). werkzeug keeps such bytes
    percent-encoded (``"%FF"``, three characters), which would search for the wrong text
    (docs/api.md, Conventions and decisions: a non-UTF-8 query parameter is a 400); RFC 3986
    leaves the encoding to the application, and this API's is UTF-8.
    """
    for pair in query_string.split(b"&"):
        name, _, value = pair.replace(b"+", b" ").partition(b"=")
        try:
            unquote_to_bytes(name).decode("utf-8")
            unquote_to_bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            param = name.decode("latin-1")[:100]
            raise ApiError(
                "invalid_parameter",
                f"{param[:50]} is not UTF-8 text once percent-decoded",
                param=param,
            ) from None


def holds_nul(value: Any) -> bool:
    """True when a string anywhere in ``value`` (a string, or JSON's lists and objects at
    any depth, object keys included) holds U+0000, which Postgres stores in no text or
    jsonb column and compares with nothing (the query fails)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def refuse_nul(
    query: Mapping[str, list[str]],
    path_params: Mapping[str, str],
    headers: Iterable[tuple[str, str]],
) -> None:
    """The one check of U+0000 in the text a request carries outside its body (a JSON body's
    strings are checked by ``web.http.validation.validate``, at any depth): no NUL reaches
    the database, where it would fail the statement (a 500) instead of being refused
    (docs/api.md, Hostile input).

    Raises:
        ApiError: 400 ``invalid_parameter`` naming a query parameter whose name or value
            holds NUL; 404 ``resource_missing`` for a path segment holding it (a
            malformed id, like any other); 400 ``malformed_request`` naming a header
            whose value holds it (as the HTTP/1.1 parser refuses it before the app).
    """
    for name, values in query.items():
        if holds_nul(name) or holds_nul(values):
            raise ApiError(
                "invalid_parameter",
                f"{name[:50]!r} may not hold the NUL character (%00)",
                param=name[:100],
            )
    for name, value in path_params.items():
        if holds_nul(value):
            raise ApiError("resource_missing", f"no such object: the {name} holds NUL", param=name)
    for name, value in headers:
        if holds_nul(value):
            raise ApiError(
                "malformed_request", f"the header {name[:50]} holds NUL", param=name[:100]
            )


def cursor(args: Mapping[str, list[str]], name: str, prefix: str) -> str | None:
    """A cursor parameter: an id with ``prefix``, or None when absent."""
    value = single(args, name)
    if value is not None and not has_prefix(value, prefix):
        raise ApiError(
            "cursor_not_found", f"{name} must be the id of a {prefix}_ object", param=name
        )
    return value


def page_args(args: Mapping[str, list[str]], prefix: str) -> tuple[int, str | None, str | None]:
    """``limit`` (1-100, default 10), ``starting_after`` and ``ending_before`` (ids of
    ``prefix``) of a list request (docs/api.md, Conventions and decisions: cursors).

    Raises:
        ApiError: 400 ``invalid_parameter``; ``cursor_conflict`` when both cursors are
            sent (docs/api.md, Error codes).
    """
    raw_limit = single(args, "limit")
    limit = 10 if raw_limit is None else integer(1, 100)("limit", raw_limit)
    after = cursor(args, "starting_after", prefix)
    before = cursor(args, "ending_before", prefix)
    if after is not None and before is not None:
        raise ApiError(
            "cursor_conflict",
            "starting_after and ending_before are mutually exclusive",
            param="ending_before",
        )
    return limit, after, before


def parse_list_query(
    args: Mapping[str, list[str]],
    *,
    prefix: str,
    sorts: Iterable[str],
    filters: Mapping[str, Parser],
) -> ListQuery:
    """Parse a list endpoint's query string: ``limit`` (1-100, default 10), the cursors,
    ``sort`` (a field of ``sorts``, optionally with a leading ``-``; default ``-created``)
    and ``filters``. With no ``sorts`` the list has one fixed order, oldest first
    (``created`` ascending: a timeline), and ``sort`` is an unknown parameter.

    Raises:
        ApiError: 400 as described in the module docstring.
    """
    sorts = tuple(sorts)
    names = {"limit", "starting_after", "ending_before", *filters}
    check_names(args, names | {"sort"} if sorts else names)
    limit, after, before = page_args(args, prefix)
    raw_sort = single(args, "sort") if sorts else "created"
    if raw_sort is None:
        raw_sort = "-created"
    field = raw_sort.removeprefix("-")  # an empty sort= is no field: refused below
    if sorts and field not in sorts:
        raise ApiError(
            "invalid_parameter",
            "sort must be one of " + ", ".join(f"{s}, -{s}" for s in sorts),
            param="sort",
        )
    parsed: dict[str, Any] = {}
    for name, parse in filters.items():
        raw = single(args, name)
        if raw is not None:
            parsed[name] = parse(name, raw)
    page = PageRequest(
        limit=limit,
        sort=field,
        descending=raw_sort.startswith("-"),
        starting_after=after,
        ending_before=before,
    )
    return ListQuery(page=page, filters=parsed)


CREATED_BOUNDS = ("created[gt]", "created[gte]", "created[lt]", "created[lte]")
"""Bounds on ``created`` a time-ordered list takes (docs/incidents.md, Events; docs/history.md)."""
EPOCH = integer(0, 10**11 - 1)
"""A query parameter holding epoch seconds."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeListQuery:
    """The parameters of a list ordered by time (checks, events): ``limit`` (1-100),
    at most one cursor, the ``created`` bounds (epoch seconds, each None when absent) and
    the endpoint's own ``filters`` (raw strings by name)."""

    limit: int
    starting_after: str | None
    ending_before: str | None
    created_gt: int | None
    created_gte: int | None
    created_lt: int | None
    created_lte: int | None
    filters: dict[str, str]


def parse_time_list(
    args: Mapping[str, list[str]], *, prefix: str, filters: Iterable[str]
) -> TimeListQuery:
    """Parse ``limit``, ``starting_after``/``ending_before`` (ids of ``prefix``),
    ``created[gt|gte|lt|lte]`` and the names of ``filters`` (left as strings for the
    caller to check).

    Raises:
        ApiError: 400 ``unknown_parameter``, ``invalid_parameter`` or ``cursor_conflict``.
    """
    filters = tuple(filters)
    check_names(args, ("limit", "starting_after", "ending_before", *CREATED_BOUNDS, *filters))
    limit, after, before = page_args(args, prefix)

    def bound(name: str) -> int | None:
        raw = single(args, name)
        return None if raw is None else EPOCH(name, raw)

    gt, gte, lt, lte = (bound(name) for name in CREATED_BOUNDS)
    raw_filters = {name: single(args, name) for name in filters}
    return TimeListQuery(
        limit=limit,
        starting_after=after,
        ending_before=before,
        created_gt=gt,
        created_gte=gte,
        created_lt=lt,
        created_lte=lte,
        filters={k: v for k, v in raw_filters.items() if v is not None},
    )
