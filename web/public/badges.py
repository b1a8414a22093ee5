"""The public badges of a monitor (docs/badges.md; the extensions' part 12, "Badges"),
no authentication, by the monitor's ``badge_key``:

- ``GET /badges/<badge_key>/status.svg``: the monitor's name, and its status (``up``
  green, ``down`` red, ``paused`` and ``pending`` grey);
- ``GET /badges/<badge_key>/uptime.svg?days=1|7|30|90`` (default 30): ``uptime <days>d``
  and the uptime percent of the last ``days`` days (``store.history``: up / (up + down)
  seconds, from rollups; ``no data`` when there was neither);
- ``GET /badges/<badge_key>/response-time.svg``: ``p95 24h`` and the 95th percentile
  response time of the last 24 hours (the rollups' histogram).

They are plain Quart routes beside the status pages and are served like them
(:mod:`web.public.status_pages`): from the same per-process cache
(:mod:`web.http.page_cache`, ``deps.status_cache``: at most one database read per badge
per 10 s, unknown keys cached too), ``image/svg+xml`` with ``Cache-Control: public,
max-age=10``, a strong ``ETag`` (304 on ``If-None-Match``) and gzip for a reader that
accepts it. Other query parameters are ignored (cache-busting ones are common in READMEs).

Errors, in the API's error shape (``application/json``):

- 400 ``invalid_parameter`` (``param`` ``days``) for a ``days`` other than 1, 7, 30 or 90,
  or given twice; checked before the key is looked up;
- 404 ``resource_missing`` (``param`` ``badge_key``) for a key that names no monitor:
  never set, rotated, deleted, or malformed (that costs no query); the same body
  whichever (its ``request_id`` aside), cached 10 s. Rotating or deleting a key drops
  its badges from the cache of the node that answered (:mod:`web.routes.badge_keys`): a
  404 there at once, on other nodes once their copy is 10 s old;
- 503 ``badge_unavailable`` (``Retry-After: 5``, ``Cache-Control: no-store``) when the
  database cannot be read and no copy is cached.

A badge shows only its label and value: no monitor id, URL, or anything else of it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from quart import Response, request
from quart_trio import QuartTrio

from store import StoreError, badges

from ..http.conditional import answer
from ..http.deps import Dependencies
from ..http.errors import ApiError
from ..http.page_cache import MISSING, Rendered, RenderFailed, badge_prefix
from .badge_svg import (
    STATUS_COLOURS,
    format_ms,
    format_uptime,
    render_badge,
    response_time_colour,
    uptime_colour,
)
from .status_pages import CACHE_CONTROL, json_error

__all__ = ["DAYS", "DEFAULT_DAYS", "SVG", "add_badge_routes"]

SVG = "image/svg+xml"
DAYS = ("1", "7", "30", "90")
"""The ranges ``uptime.svg`` answers, days."""
DEFAULT_DAYS = "30"
_DAY_SECONDS = 86_400


def _image(svg: bytes) -> Rendered:
    """A badge as the cache holds it: the SVG in the page's ``html`` slot (gzipped and
    hashed with it), no JSON."""
    return Rendered.page(svg, b"")


async def _status(deps: Dependencies, key: str) -> Rendered:
    monitor = await deps.db.run(badges.badge_monitor, key)
    if monitor is None:
        return MISSING
    colour = STATUS_COLOURS.get(monitor.status, STATUS_COLOURS["pending"])
    return _image(render_badge(monitor.name, monitor.status, colour))


async def _read(deps: Dependencies, key: str, seconds: int) -> badges.BadgeAvailability | None:
    """The monitor of ``key`` and its availability over the last ``seconds``."""
    now = int(deps.clock())
    retention = deps.history
    return await deps.db.run(
        badges.badge_availability,
        key,
        seconds,
        now=now,
        rollup_cutoff=now - int(retention.rollup_retention_days * _DAY_SECONDS),
        check_cutoff=now - int(retention.check_retention_days * _DAY_SECONDS),
    )


async def _uptime(deps: Dependencies, key: str, days: str) -> Rendered:
    found = await _read(deps, key, int(days) * _DAY_SECONDS)
    if found is None:
        return MISSING
    percent = found[1].uptime_percent
    return _image(render_badge(f"uptime {days}d", format_uptime(percent), uptime_colour(percent)))


async def _response_time(deps: Dependencies, key: str) -> Rendered:
    found = await _read(deps, key, _DAY_SECONDS)
    if found is None:
        return MISSING
    p95 = found[1].response_time_ms()["p95"]
    return _image(render_badge("p95 24h", format_ms(p95), response_time_colour(p95)))


def add_badge_routes(app: QuartTrio, deps: Dependencies) -> None:
    """Add the three badge routes (module docstring) to ``app``, served from
    ``deps.status_cache``."""

    async def serve(key: str, name: str, render: Callable[[], Awaitable[Rendered]]) -> Response:
        headers = {"X-Content-Type-Options": "nosniff"}
        try:
            if not badges.valid_badge_key(key):
                badge = MISSING
            else:
                slug = badge_prefix(key) + name
                badge = await deps.status_cache.get(slug, lambda _: render())
        except (RenderFailed, StoreError):
            error = ApiError("badge_unavailable", "the badge cannot be read right now; retry later")
            return json_error(error, {**headers, "Retry-After": "5", "Cache-Control": "no-store"})
        if not badge.found:
            error = ApiError("resource_missing", "no such badge", param="badge_key")
            return json_error(error, {**headers, "Cache-Control": CACHE_CONTROL})
        return answer(
            badge.html, badge.html_gzip, badge.html_etag, SVG, headers, cache_control=CACHE_CONTROL
        )

    @app.route("/badges/<key>/status.svg", methods=["GET"], provide_automatic_options=False)
    async def status_badge(key: str) -> Response:
        return await serve(key, "status", lambda: _status(deps, key))

    @app.route("/badges/<key>/uptime.svg", methods=["GET"], provide_automatic_options=False)
    async def uptime_badge(key: str) -> Response:
        given = request.args.getlist("days")
        days = given[0] if len(given) == 1 else DEFAULT_DAYS if not given else ""
        if days not in DAYS:
            shown = "given more than once" if len(given) > 1 else f"got {days[:50]!r}"
            error = ApiError(
                "invalid_parameter", f"days must be one of 1, 7, 30, 90; {shown}", param="days"
            )
            return json_error(error, {"Cache-Control": "no-store"})
        return await serve(key, f"uptime-{days}", lambda: _uptime(deps, key, days))

    @app.route("/badges/<key>/response-time.svg", methods=["GET"], provide_automatic_options=False)
    async def response_time_badge(key: str) -> Response:
        return await serve(key, "response-time", lambda: _response_time(deps, key))
