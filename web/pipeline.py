"""The request pipeline: a context, a response, a route table entry and a middleware chain.

Quart routes a request to a :class:`Route`; the route's handler runs behind a chain of
middlewares, each ``async def middleware(ctx, call_next) -> ApiResponse``::

    failed-login throttle -> authenticate -> rate limit -> negotiate version -> authorize
        -> unknown query parameters -> idempotency keys -> handler

This module owns the shapes; :mod:`web.app` assembles the chain. Request safety
(:mod:`web.throttle`, :mod:`web.idempotency`) plugs in as middlewares without touching
the handlers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from werkzeug.datastructures import Headers

from store import EventCause, TokenContext

from .deps import Dependencies
from .errors import CODES, ApiError
from .json_body import parse_json
from .params import holds_nul
from .versioning import CURRENT_VERSION

M = TypeVar("M", bound=BaseModel)


@dataclass(slots=True)
class ApiResponse:
    """What a handler returns: status, a JSON-able body (None for 204) and extra headers."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class RequestContext:
    """One request as the pipeline sees it. Middlewares fill ``token`` and ``version``;
    handlers read the rest.

    Attributes:
        query: every query parameter with all its values.
        raw_query: the query string as sent (percent-encoded bytes).
        body: the raw request body (bytes; empty when none was sent).
        response_headers: headers every response to this request carries (Request-Id,
            Service-Version, rate-limit headers), errors included.
        base_url: the scheme and host the request came to, without a trailing slash
            (``http://127.0.0.1:8080``).
    """

    request_id: str
    route: Route
    method: str
    path: str
    path_params: dict[str, str]
    query: Mapping[str, list[str]]
    headers: Headers
    body: bytes
    remote_addr: str | None
    deps: Dependencies
    raw_query: bytes = b""
    base_url: str = ""
    token: TokenContext | None = None
    version: str = CURRENT_VERSION
    response_headers: dict[str, str] = field(default_factory=dict)

    @property
    def account_id(self) -> str:
        """The authenticated account's id (only after :func:`web.app.authenticate`)."""
        assert self.token is not None, "authenticate must run first"
        return self.token.account_id

    @property
    def cause(self) -> EventCause:
        """What an event this request causes names as its ``request`` (extensions part 1):
        the Request-Id and the Idempotency-Key sent, if any."""
        return EventCause(
            request_id=self.request_id, idempotency_key=self.headers.get("Idempotency-Key")
        )

    @property
    def ping_base(self) -> str:
        """The base of a heartbeat's ``ping_url``: ``--public-url``, else the base URL
        this request came to (README, Heartbeats)."""
        return self.deps.settings.public_url or self.base_url

    def header(self, name: str) -> str | None:
        """The value of request header ``name`` (case-insensitive), or None when absent.

        Raises:
            ApiError: 400 ``duplicate_header`` (``param`` = ``name``) when it was sent more
                than once: two readers could take different ones (issue 15).
        """
        values = self.headers.getlist(name)
        if len(values) > 1:
            raise ApiError(
                "duplicate_header", f"{name} may be sent once; got {len(values)}", param=name
            )
        return values[0] if values else None

    def json_object(self) -> dict[str, Any]:
        """The body as a JSON object, not yet validated.

        Raises:
            ApiError: 400 ``invalid_json`` for an empty or unreadable body,
                ``json_too_deep`` or ``duplicate_key`` (:mod:`web.json_body`),
                ``unsupported_content_type`` without ``Content-Type: application/json``;
                422 ``invalid_type`` when the JSON is not an object.
        """
        if not self.body.strip():
            raise ApiError("invalid_json", "a JSON object body is required")
        content_type = self.headers.get("content-type", "")
        if content_type.split(";")[0].strip().lower() != "application/json":
            raise ApiError(
                "unsupported_content_type",
                "Content-Type must be application/json",
                param="Content-Type",
            )
        data = parse_json(self.body)
        if not isinstance(data, dict):
            raise ApiError("invalid_type", "the body must be a JSON object")
        return data

    def json_body(self, model: type[M], *, optional: bool = False) -> M:
        """Parse and validate the body as ``model`` (DESIGN: 400 or 422).

        ``optional`` accepts an empty body as ``{}`` (pause, resume, resolve), with no
        Content-Type needed.

        Raises:
            ApiError: as :meth:`json_object`, and 422 (``parameter_missing``,
                ``parameter_unknown``, ``value_out_of_range``, ...) naming the field when
                the object is not valid.
        """
        if optional and not self.body.strip():
            return model.model_validate({})
        return validate(model, self.json_object())


Handler = Callable[[RequestContext], Awaitable[ApiResponse]]
Middleware = Callable[[RequestContext, Handler], Awaitable[ApiResponse]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    """One endpoint: its method and path (Quart syntax, ``<id>``), the permission it needs
    (None: no authentication; a tuple: any one of them, as ``GET /events`` needs the read
    permission of some resource), its handler, and what the OpenAPI document says of it."""

    name: str
    method: str
    path: str
    handler: Handler
    permission: str | tuple[str, ...] | None
    summary: str
    success_status: int = 200
    request_model: type[BaseModel] | None = None
    response_model: type[BaseModel] | None = None
    query: Sequence[tuple[str, str, str]] = ()
    """Query parameters for the OpenAPI document: ``(name, JSON type, description)``."""


def chain(middlewares: Sequence[Middleware], handler: Handler) -> Handler:
    """Compose ``middlewares`` (outermost first) around ``handler``."""
    composed = handler
    for middleware in reversed(middlewares):
        composed = _bind(middleware, composed)
    return composed


def _bind(middleware: Middleware, call_next: Handler) -> Handler:
    async def run(ctx: RequestContext) -> ApiResponse:
        return await middleware(ctx, call_next)

    return run


_PYDANTIC_CODES = {
    "missing": "parameter_missing",
    "extra_forbidden": "parameter_unknown",
    "literal_error": "invalid_value",
    "enum": "invalid_value",
    "string_too_long": "value_too_long",
    "string_too_short": "value_too_short",
    "too_long": "value_too_long",
    "string_pattern_mismatch": "invalid_value",
    "greater_than_equal": "value_out_of_range",
    "less_than_equal": "value_out_of_range",
    "greater_than": "value_out_of_range",
    "less_than": "value_out_of_range",
}


def _message(error: Any, code: str, param: str | None) -> str:
    """Uptrio's words for a pydantic error (issue 15: pydantic's own, such as ``Input
    should be a valid integer``, are not part of this API). Errors raised by our own
    validators (``PydanticCustomError`` with a code of :data:`web.errors.CODES`) keep
    their message."""
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
        return f"{name} is malformed: it must match {limits.get('pattern')}"
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
        ApiError: 422 with a code from :data:`web.errors.CODES`; ``invalid_value`` for
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
