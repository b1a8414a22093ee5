"""The middlewares of the API's chain that are not a module of their own, and the chain
itself (:data:`DEFAULT_MIDDLEWARES`): authentication, version negotiation,
authorization and the check of query parameters.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from store import Connection, DatabaseUnavailable, TokenContext, accounts

from .auth import bearer_token, expired, granted, require_permission, verify_token
from .errors import ApiError
from .idempotency import idempotency_keys
from .limits.throttle import rate_limit, throttle_failed_authentication
from .params import check_names, check_utf8, refuse_nul
from .pipeline import ApiResponse, Handler, Middleware, PlannedRead, RequestContext
from .versioning import HEADER, resolve_version

__all__ = [
    "DEFAULT_MIDDLEWARES",
    "authenticate",
    "authorize",
    "negotiate_version",
    "reject_unknown_query",
]


async def authenticate(ctx: RequestContext, call_next: Handler) -> ApiResponse:
    """Middleware: a valid, known, unrevoked, unexpired bearer token (docs/api.md,
    Conventions and decisions: token), else 401; two ``Authorization`` headers are a 400
    ``duplicate_header``."""
    if ctx.route.permission is None:
        return await call_next(ctx)
    token_id = verify_token(
        ctx.deps.jwt_secret,
        bearer_token(ctx.header("Authorization")),
        cache=ctx.deps.token_claims,
    )
    planned = _planned_read(ctx)
    if planned is None:
        token = await ctx.deps.db.run(accounts.token_context, token_id)
    elif planned.with_token is not None:  # what it read reaches the handler only if
        # the token passes the chain, as a read in the handler would
        try:
            token, result = await ctx.deps.db.run(
                planned.with_token, token_id, *planned.args, **planned.kwargs
            )
        except DatabaseUnavailable:
            raise
        except Exception:  # as in _read_ahead: the handler meets it in its own place
            token = await ctx.deps.db.run(accounts.token_context, token_id)
        else:
            ctx.prefetched = (planned, result)
    else:
        token, ctx.prefetched = await ctx.deps.db.run(
            accounts.token_context_then, token_id, _read_ahead(planned, ctx.route.permission)
        )
    if token is None:
        raise ApiError("invalid_token", "invalid token: unknown token")
    if token.revoked_at is not None:
        raise ApiError("token_revoked", "this token was revoked")
    if expired(token.expires_at, time.time()):
        raise ApiError("token_expired", "the token has expired")
    ctx.token = token
    return await call_next(ctx)


def _planned_read(ctx: RequestContext) -> PlannedRead | None:
    """The route's read to make with the token's (``Route.prefetch``), or None: the route
    has none, or would refuse the request before reading."""
    prefetch = ctx.route.prefetch
    if prefetch is None:
        return None
    try:
        return prefetch(ctx)
    except ApiError:
        return None


def _read_ahead(
    planned: PlannedRead, permission: str | tuple[str, ...] | None
) -> Callable[[Connection, TokenContext], Awaitable[tuple[PlannedRead, Any] | None]]:
    """What :func:`store.accounts.token_context_then` runs after the token's read: the
    planned read, only for a token the chain will let through to the handler (unrevoked,
    unexpired, granted the route's permission). It reads nothing the handler would not,
    for the token's own account; a read that fails is left to the handler, which reads
    again and meets the failure in its own place in the chain (a bad cursor's 404 after
    the checks of the query), so every answer is the one a read in the handler gives."""

    async def then(connection: Connection, token: TokenContext) -> tuple[PlannedRead, Any] | None:
        if token.revoked_at is not None or expired(token.expires_at, time.time()):
            return None
        if permission is not None and not granted(token.permissions, permission):
            return None
        try:
            result = await planned.fn(connection, token.account_id, *planned.args, **planned.kwargs)
        except Exception:  # the handler's own read raises it again (docstring)
            return None
        return planned, result

    return then


async def negotiate_version(ctx: RequestContext, call_next: Handler) -> ApiResponse:
    """Middleware: the request's API version (docs/api.md, Conventions and decisions:
    ``Service-Version``), echoed on every response."""
    pinned = ctx.token.api_version if ctx.token is not None else None
    ctx.version = resolve_version(ctx.header(HEADER), pinned)
    return await call_next(ctx)


async def authorize(ctx: RequestContext, call_next: Handler) -> ApiResponse:
    """Middleware: the route's permission must be granted (docs/api.md, Error codes:
    ``missing_permission``), else 403."""
    if ctx.route.permission is not None and ctx.token is not None:
        require_permission(ctx.token.permissions, ctx.route.permission)
    return await call_next(ctx)


async def reject_unknown_query(ctx: RequestContext, call_next: Handler) -> ApiResponse:
    """Middleware: a query parameter, path segment or header holding U+0000 is refused
    (:func:`web.http.params.refuse_nul`); a query parameter the route does not document is a
    400 ``unknown_parameter`` on every endpoint, not only on lists (docs/api.md, Error
    codes); one that is not UTF-8 a 400 ``invalid_parameter``."""
    refuse_nul(ctx.query, ctx.path_params, ctx.headers.items())
    check_names(ctx.query, [name for name, _, _ in ctx.route.query])
    check_utf8(ctx.raw_query)
    return await call_next(ctx)


DEFAULT_MIDDLEWARES: tuple[Middleware, ...] = (
    throttle_failed_authentication,
    authenticate,
    rate_limit,
    negotiate_version,
    authorize,
    reject_unknown_query,
    idempotency_keys,
)
"""The chain every endpoint runs behind, outermost first: failed logins are limited per
address before a token is looked at (:mod:`web.http.limits.throttle`); rate limits count every
authenticated request, errors included; idempotency keys (:mod:`web.http.idempotency`) wrap
the handler alone, so a request refused earlier never claims a key."""
