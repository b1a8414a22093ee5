"""The request pipeline: a context, a response, a route table entry and a middleware chain.

Quart routes a request to a :class:`Route`; the route's handler runs behind a chain of
middlewares, each ``async def middleware(ctx, call_next) -> ApiResponse``::

    failed-login throttle -> authenticate -> rate limit -> negotiate version -> authorize
        -> unknown query parameters -> idempotency keys -> handler

This module owns the shapes; :mod:`web.http.app` serves it. Request safety
(:mod:`web.http.limits.throttle`, :mod:`web.http.idempotency`) plugs in as middlewares without
touching the handlers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel
from werkzeug.datastructures import Headers

from store import EventCause, TokenContext

from .deps import Dependencies
from .errors import ApiError
from .json_body import parse_json
from .validation import validate
from .versioning import CURRENT_VERSION

M = TypeVar("M", bound=BaseModel)


@dataclass(slots=True)
class ApiResponse:
    """What a handler returns: status, a JSON-able body (None for 204) and extra headers."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PlannedRead:
    """A handler's read, named before it runs: ``fn(connection, account_id, *args,
    **kwargs)`` (a store function). A GET route's ``prefetch`` plans it, so that
    authentication makes it in the token's own unit of work
    (:func:`web.http.middleware.authenticate`); the handler plans it again and
    :meth:`RequestContext.read` hands over the result when the two are equal."""

    fn: Callable[..., Awaitable[Any]]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    with_token: Callable[..., Awaitable[tuple[TokenContext | None, Any]]] | None = None
    """The same read joined to the token's in one statement, where the store has one:
    ``with_token(connection, token_id, *args, **kwargs) -> (token or None, result)``
    (``store.monitors.get_monitor_with_token``): one round trip instead of two."""


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
    prefetched: tuple[PlannedRead, Any] | None = None
    """A read made ahead with the token's (:class:`PlannedRead`) and its result."""

    @property
    def account_id(self) -> str:
        """The authenticated account's id (only after :func:`web.http.middleware.authenticate`)."""
        assert self.token is not None, "authenticate must run first"
        return self.token.account_id

    @property
    def cause(self) -> EventCause:
        """What an event this request causes names as its ``request``: the Request-Id and
        the Idempotency-Key sent, if any."""
        return EventCause(
            request_id=self.request_id, idempotency_key=self.headers.get("Idempotency-Key")
        )

    @property
    def ping_base(self) -> str:
        """The base of a heartbeat's ``ping_url``: ``--public-url``, else the base URL
        this request came to (docs/heartbeats.md, The ping URL)."""
        return self.deps.settings.public_url or self.base_url

    async def read(self, planned: PlannedRead) -> Any:
        """The result of ``planned`` for the request's account: the one read ahead with
        the token when it is the same read (once), else read now.

        Raises:
            store.DatabaseUnavailable, store.StoreError: as :meth:`store.Database.run`.
        """
        prefetched = self.prefetched
        if prefetched is not None and prefetched[0] == planned:
            self.prefetched = None
            return prefetched[1]
        return await self.deps.db.run(planned.fn, self.account_id, *planned.args, **planned.kwargs)

    def header(self, name: str) -> str | None:
        """The value of request header ``name`` (case-insensitive), or None when absent.

        Raises:
            ApiError: 400 ``duplicate_header`` (``param`` = ``name``) when it was sent more
                than once: two readers could take different ones (docs/api.md,
                Conventions and decisions: repeated header).
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
                ``json_too_deep`` or ``duplicate_key`` (:mod:`web.http.json_body`),
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
        """Parse and validate the body as ``model`` (docs/api.md, Error codes: 400 or 422).

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
    cursor: str | None = None
    """For a list: the prefix of its objects' ids (``mon``), which its ``starting_after``
    and ``ending_before`` take; the OpenAPI document gives them that pattern."""
    query_schema: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """What query parameters accept beyond their JSON type, by name, for the OpenAPI
    document: ``{"sort": {"pattern": "^-?(created|updated|name)$"}}`` (the handler parses
    them: :mod:`web.http.params`)."""
    links: tuple[str, ...] = ()
    """For a create: the operations that take the created object's id, which the OpenAPI
    document links from the response's ``id`` (the stateful API test follows them)."""
    prefetch: Callable[[RequestContext], PlannedRead] | None = None
    """For a GET: the handler's read (:class:`PlannedRead`), made in the token's unit of
    work, one crossing to the database instead of two; it raises ``ApiError`` where the
    handler would refuse the request before reading (then nothing is read ahead)."""


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
