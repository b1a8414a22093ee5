"""The Quart-Trio application of the API: pipeline routes served behind the middleware
chain, errors and headers (the routes and pages it serves are the caller's:
``web.process.app.create_app``).

Every response carries ``Request-Id`` (``req_...``) and ``Service-Version``, errors included
(docs/api.md, Conventions and decisions and Error codes). Failures become the error shape of
:mod:`web.http.errors` in one place: :class:`web.http.errors.ApiError` from the chain, store
errors translated at this boundary, Quart's routing errors (404, 405, 408, 413) mapped, and
anything unexpected a 500 ``internal_error`` that is logged with its Request-Id. What the
HTTP server refuses before the app gets the same shape from :mod:`web.http.protocols`.

Routing never redirects (docs/api.md, Conventions and decisions: unknown path): werkzeug's
``merge_slashes`` is off, so ``/monitors//checks`` or ``/monitors/..%2f/pause`` (which
decodes to ``/monitors/..//pause``) is a 404 ``route_not_found`` rather than a 308 to a path
the client did not ask for, and any other routing redirect is turned into that 404 too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any, Protocol

import structlog
from quart import Response, g, request
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound
from werkzeug.routing import RequestRedirect

from engine import ActorUnavailable
from store import CursorNotFound, DatabaseUnavailable, TimelineFull, new_id

from .asgi import ShieldedSendHTTPConnection
from .deps import Dependencies
from .errors import ApiError, error_body
from .pipeline import Handler, Middleware, RequestContext, Route, chain
from .protocols import MAX_HEAD_BYTES, head_bytes, refusal
from .versioning import CURRENT_VERSION, HEADER

__all__ = ["JSON", "RequestObserver", "api_app", "json_response"]

log = structlog.get_logger("uptrio.web")

JSON = "application/json"


class RequestObserver(Protocol):
    """Told of every answered request (``web.process.ops.Operations``: its log line and
    metrics); ``seconds`` of handling."""

    def request_finished(
        self, *, request_id: str | None, method: str, route: str, status: int, seconds: float
    ) -> None: ...


def _translate(exc: Exception) -> ApiError | None:
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, CursorNotFound):
        return ApiError("cursor_not_found", str(exc), param=exc.param)
    if isinstance(exc, ActorUnavailable):
        return ApiError("engine_unavailable", "saved, but the engine did not acknowledge it")
    if isinstance(exc, DatabaseUnavailable):
        return ApiError("database_unavailable", "the database is unavailable; retry later")
    if isinstance(exc, TimelineFull):
        return ApiError(
            "too_many_updates",
            f"the incident's timeline already holds {exc.limit:,} entries; only a move "
            "into resolved is taken",
        )
    return None


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    if status == 204 or body is None:
        empty = Response(b"", status=status, headers=headers)
        # no body, so no Content-Type (Quart's default would be text/html), and a 204 may
        # not carry Content-Length (RFC 9110, 8.6)
        empty.headers.remove("Content-Type")
        if status == 204:
            empty.headers.remove("Content-Length")
        return empty
    return Response(
        json.dumps(body, separators=(",", ":")),
        status=status,
        headers=headers,
        content_type=JSON,
    )


def _error_response(error: ApiError) -> Response:
    return json_response(error.status, error_body(error, g.request_id), error.headers)


def _view(route: Route, deps: Dependencies, pipeline: Handler) -> Any:
    async def view(**path_params: str) -> Response:
        body = await request.get_data(cache=False)
        assert isinstance(body, bytes)
        ctx = RequestContext(
            request_id=g.request_id,
            route=route,
            method=request.method,
            path=request.path,
            path_params=path_params,
            query={k: request.args.getlist(k) for k in request.args},
            raw_query=request.query_string,
            base_url=request.host_url.rstrip("/"),
            headers=request.headers,
            body=body,
            remote_addr=request.remote_addr,
            deps=deps,
        )
        try:
            response = await pipeline(ctx)
        except Exception as exc:
            error = _translate(exc)
            if error is None:
                log.exception("unhandled error", request_id=ctx.request_id, route=route.name)
                error = ApiError("internal_error", "internal error; quote the Request-Id")
            g.version = ctx.version
            g.extra_headers = ctx.response_headers
            return _error_response(error)
        g.version = ctx.version
        g.extra_headers = ctx.response_headers
        status = route.success_status if response.status == 200 else response.status
        return json_response(status, response.body, response.headers)

    view.__name__ = route.name
    return view


def api_app(
    deps: Dependencies,
    *,
    routes: Sequence[Route],
    middlewares: Sequence[Middleware],
    observer: RequestObserver,
) -> QuartTrio:
    """The ASGI application serving ``routes`` behind ``middlewares``, telling
    ``observer`` of every request answered; the caller adds the plain Quart routes that
    live beside the API (``web.process.app.create_app``).

    Serve it with Hypercorn's trio worker (``hypercorn.trio.serve``) inside the service's
    root nursery, within ``trio_asyncio.open_loop()`` (the store runs on asyncio).
    """
    app = QuartTrio("uptrio")
    app.asgi_http_class = ShieldedSendHTTPConnection  # closes cut-off uploads (asgi.py)
    # no redirects (module docstring); set before the rules are added, which copy it. Our
    # rules end without a slash, so strict_slashes (kept on) never redirects: off, it
    # would serve /monitors/ as /monitors.
    app.url_map.merge_slashes = False
    app.config["MAX_CONTENT_LENGTH"] = deps.settings.max_body_bytes
    app.config["BODY_TIMEOUT"] = deps.settings.body_timeout_seconds
    app.config["JSON_SORT_KEYS"] = False

    @app.before_request
    async def start() -> Response | None:
        g.started = time.perf_counter()
        g.request_id = new_id("req")
        g.version = CURRENT_VERSION
        g.extra_headers = {}
        if head_bytes(request.scope) > MAX_HEAD_BYTES:  # docs/api.md: over 16 KiB, 431
            if str(request.scope.get("http_version", "")).startswith("1"):
                g.extra_headers["Connection"] = "close"
            return _error_response(refusal(431))
        sent_path = str(request.scope.get("path", ""))
        if isinstance(request.routing_exception, RequestRedirect) or sent_path.startswith("//"):
            # an API answers, it does not redirect; and werkzeug reads //monitors as
            # /monitors (it strips leading slashes), while /monitors//checks is a 404
            request.routing_exception = NotFound()
        return None

    @app.after_request
    async def finish(response: Response) -> Response:
        response.headers["Request-Id"] = g.get("request_id") or new_id("req")
        response.headers[HEADER] = g.get("version") or CURRENT_VERSION
        for name, value in (g.get("extra_headers") or {}).items():
            response.headers[name] = value
        rule = request.url_rule
        observer.request_finished(
            request_id=response.headers["Request-Id"],
            method=request.method,
            route=rule.rule if rule is not None else "unmatched",
            status=response.status_code,
            seconds=time.perf_counter() - (g.get("started") or time.perf_counter()),
        )
        return response

    @app.errorhandler(HTTPException)
    async def http_error(exc: HTTPException) -> Response:
        if exc.code == 405 and isinstance(exc, MethodNotAllowed):
            allowed = ", ".join(sorted(exc.valid_methods or ()))
            return _error_response(
                ApiError(
                    "method_not_allowed",
                    f"{request.method} is not allowed on {request.path}; allowed: {allowed}",
                    headers={"Allow": allowed},
                )
            )
        if exc.code == 413:
            return _error_response(
                ApiError(
                    "body_too_large",
                    f"the body is larger than {deps.settings.max_body_bytes} bytes",
                )
            )
        if exc.code == 408:
            return _error_response(
                ApiError(
                    "body_timeout",
                    f"the body did not arrive within {deps.settings.body_timeout_seconds:g} s",
                )
            )
        if exc.code == 404:
            return _error_response(
                ApiError("route_not_found", f"no endpoint at {request.path[:200]}")
            )
        return _error_response(ApiError("invalid_json", exc.description or "bad request"))

    @app.errorhandler(Exception)
    async def crashed(exc: Exception) -> Response:
        log.error("unhandled error", request_id=g.get("request_id"), exc_info=exc)
        return _error_response(ApiError("internal_error", "internal error; quote the Request-Id"))

    for route in routes:
        pipeline = chain(middlewares, route.handler)
        app.add_url_rule(
            route.path,
            endpoint=route.name,
            view_func=_view(route, deps, pipeline),
            methods=[route.method],
            provide_automatic_options=False,
        )

    return app
