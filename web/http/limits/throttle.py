"""Rate limits as middlewares (docs/api.md, Rate limits): per token, per account, and on
failed logins.

Two middlewares of the chain (:data:`web.http.middleware.DEFAULT_MIDDLEWARES`)::

    throttle_failed_authentication -> authenticate -> rate_limit -> negotiate version -> ...

- :func:`rate_limit`, right after authentication, counts every authenticated request in
  three rolling windows (:mod:`web.http.limits.rolling`): the token's minute
  (:attr:`WebSettings.token_requests_per_minute`, 1,000), the token's hour
  (``token_requests_per_hour``, 10,000) and the account's minute
  (``account_requests_per_minute``, 5,000, shared by all its tokens). A request is
  admitted only if all three have room, and then counted in all three; a refused request
  is counted nowhere. Every authenticated response, errors included, carries
  ``X-RateLimit-Limit``, ``X-RateLimit-Remaining`` and ``X-RateLimit-Reset`` for the most
  constraining window (the fewest requests left; when refused, the longest wait).
  ``X-RateLimit-Reset`` is the epoch second at which the oldest request counted in that
  window stops counting, so ``Remaining`` grows again. Over a limit: 429
  ``rate_limit_error``, code ``rate_limited``, ``Retry-After`` in whole seconds,
  ``X-RateLimit-Remaining: 0``.
- :func:`throttle_failed_authentication`, before authentication, counts the 401s each
  client address causes (``auth_failures_per_minute``, default 60 per rolling minute).
  While an address is over it, *every* request from it gets a 429 before its token is
  even looked at, so a token cannot be guessed at speed and a 429 reveals nothing about
  the token sent. Requests with a valid token cost nothing here.

The windows are those of the :class:`web.http.limits.quota.QuotaLimiter` of
:class:`Dependencies`: under ``uptrio serve`` the windows of :data:`SHARED_WINDOWS` are
leased from the database, so those limits hold for the whole service however many nodes
serve it (docs/several-nodes.md, Rate limits across nodes); without a database they are
counted in memory. The client address is the TCP peer's (behind a proxy, the proxy's).
"""

from __future__ import annotations

import math

from ..errors import ApiError
from ..pipeline import ApiResponse, Handler, RequestContext
from .rolling import Decision, Window

__all__ = ["SHARED_WINDOWS", "rate_limit", "rate_limit_headers", "throttle_failed_authentication"]

MINUTE_SECONDS = 60.0
HOUR_SECONDS = 3600.0

SHARED_WINDOWS = ("token/minute", "token/hour", "account/minute", "auth-failures/minute")
"""The windows counted across nodes (docs/several-nodes.md, Rate limits across nodes): the
three of docs/api.md, Rate limits, and failed logins. Pings' per-key window stays per node
(one key per heartbeat, and a ping to its owner answers without the database: a limit that
only protects this node)."""


def rate_limit_headers(decision: Decision, wall_now: float) -> dict[str, str]:
    """The ``X-RateLimit-*`` headers of ``decision`` (``wall_now`` in epoch seconds), and
    ``Retry-After`` (whole seconds, at least 1) when it is a refusal."""
    headers = {
        "X-RateLimit-Limit": str(decision.limit),
        "X-RateLimit-Remaining": str(decision.remaining),
        "X-RateLimit-Reset": str(math.ceil(wall_now + decision.reset_after_seconds)),
    }
    if not decision.allowed:
        headers["Retry-After"] = str(max(1, math.ceil(decision.retry_after_seconds)))
    return headers


def _refusal(ctx: RequestContext, decision: Decision, what: str) -> ApiError:
    """The 429 for ``decision``; its ``X-RateLimit-*`` headers go on the response."""
    headers = rate_limit_headers(decision, ctx.deps.clock())
    retry_after = headers.pop("Retry-After")
    ctx.response_headers.update(headers)
    return ApiError(
        "rate_limited",
        f"too many requests: {what} allows {decision.limit}; retry after {retry_after} s",
        headers={"Retry-After": retry_after},
    )


async def rate_limit(ctx: RequestContext, call_next: Handler) -> ApiResponse:
    """Middleware: the per-token and per-account limits (module docstring; docs/api.md, Rate
    limits).

    Raises:
        ApiError: 429 ``rate_limited`` when a window is full.
    """
    token = ctx.token
    if token is None:
        return await call_next(ctx)
    settings = ctx.deps.settings
    checks = [
        (Window("token/minute", settings.token_requests_per_minute, MINUTE_SECONDS), token.id),
        (Window("token/hour", settings.token_requests_per_hour, HOUR_SECONDS), token.id),
        (
            Window("account/minute", settings.account_requests_per_minute, MINUTE_SECONDS),
            token.account_id,
        ),
    ]
    decision = await ctx.deps.rate_limiter.admit(checks)
    if not decision.allowed:
        what = {
            "token/minute": "this token's per-minute limit",
            "token/hour": "this token's per-hour limit",
            "account/minute": "this account's per-minute limit",
        }[decision.window]
        raise _refusal(ctx, decision, what)
    ctx.response_headers.update(rate_limit_headers(decision, ctx.deps.clock()))
    return await call_next(ctx)


async def throttle_failed_authentication(ctx: RequestContext, call_next: Handler) -> ApiResponse:
    """Middleware: refuse an address that caused too many 401s (module docstring).

    Raises:
        ApiError: 429 ``rate_limited`` while the address is over the limit; otherwise
            whatever the rest of the chain raises (a 401 is counted, then re-raised).
    """
    if ctx.route.permission is None:
        return await call_next(ctx)
    window = Window(
        "auth-failures/minute", ctx.deps.settings.auth_failures_per_minute, MINUTE_SECONDS
    )
    check = [(window, ctx.remote_addr or "unknown")]
    limiter = ctx.deps.rate_limiter
    decision = await limiter.peek(check)
    if not decision.allowed:
        raise _refusal(ctx, decision, "failed authentications from this address")
    try:
        return await call_next(ctx)
    except ApiError as exc:
        if exc.status == 401:
            await limiter.hit(check)
        raise
