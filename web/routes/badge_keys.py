"""A monitor's badge key (docs/badges.md; the extensions' part 12, "Badges"):
``POST /monitors/:id/badge-key`` creates or rotates it, ``DELETE
/monitors/:id/badge-key`` turns the monitor's badges off. Both need ``monitors.update``
and answer 200 with the monitor (its ``badge_key`` the new key, or null). The old key's
badges are dropped from this process's public cache (:mod:`web.http.page_cache`), so they
are 404s here from the moment either answers, and on other nodes once their cached copy
is 10 s old. The public badges themselves, which need
no token, are :mod:`web.public.badges`.
"""

from __future__ import annotations

from dataclasses import replace

from store import badges

from ..api.common import EmptyBody
from ..api.monitors import MonitorObject, monitor_object
from ..http.page_cache import badge_prefix
from ..http.pipeline import ApiResponse, RequestContext, Route
from .common import not_found, now, path_id
from .monitors import RESOURCE as MONITORS

__all__ = ["RESOURCE"]


async def _set(ctx: RequestContext, key: str | None) -> ApiResponse:
    """Store ``key`` as the monitor's badge key and drop the previous key's cached
    badges; 200 with the monitor, 404 when the account has no such monitor."""
    monitor_id = path_id(ctx, MONITORS)
    found = await ctx.deps.db.transaction(
        badges.set_badge_key, ctx.account_id, monitor_id, key, now()
    )
    if found is None:
        raise not_found(MONITORS, monitor_id)
    record, previous = found
    if previous is not None:
        ctx.deps.status_cache.forget(badge_prefix(previous))
    return ApiResponse(200, monitor_object(record))


async def rotate_badge_key(ctx: RequestContext) -> ApiResponse:
    """POST /monitors/:id/badge-key: a new key (128 random bits); the old one, if any,
    stops working (module docstring)."""
    ctx.json_body(EmptyBody, optional=True)
    return await _set(ctx, badges.new_badge_key())


async def delete_badge_key(ctx: RequestContext) -> ApiResponse:
    """DELETE /monitors/:id/badge-key: badges off (``badge_key`` null); on a monitor
    without a key a no-op 200."""
    return await _set(ctx, None)


RESOURCE = replace(
    MONITORS,
    routes=(
        Route(
            name="rotate_monitor_badge_key",
            method="POST",
            path="/monitors/<id>/badge-key",
            handler=rotate_badge_key,
            permission="monitors.update",
            summary="Create or rotate the key of a monitor's public badges",
            response_model=MonitorObject,
        ),
        Route(
            name="delete_monitor_badge_key",
            method="DELETE",
            path="/monitors/<id>/badge-key",
            handler=delete_badge_key,
            permission="monitors.update",
            summary="Turn a monitor's public badges off",
            response_model=MonitorObject,
        ),
    ),
)
"""The badge-key endpoints: part of the monitors resource."""
