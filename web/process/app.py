"""The service's ASGI application: the API (:func:`web.http.app.api_app` serving
:data:`web.routes.ROUTES` behind :data:`web.http.middleware.DEFAULT_MIDDLEWARES`) and,
beside it, the plain Quart routes that need no token: ``/openapi.json`` and its viewer at
``/docs`` (:mod:`web.public.docs`), the operational endpoints (:mod:`web.process.ops`),
the public status pages (:mod:`web.public.status_pages`), the heartbeats' ping URLs
(:mod:`web.public.pings`), the alerts' acknowledge links (:mod:`web.public.alert_ack`)
and the schedules' calendar feeds (:mod:`web.public.calendar_feed`).
"""

from __future__ import annotations

from collections.abc import Sequence

from quart_trio import QuartTrio

from ..http.app import api_app
from ..http.deps import Dependencies
from ..http.middleware import DEFAULT_MIDDLEWARES
from ..http.pipeline import Middleware, Route
from ..public.alert_ack import add_alert_ack_routes
from ..public.badges import add_badge_routes
from ..public.calendar_feed import add_calendar_routes
from ..public.docs import add_docs_routes
from ..public.pings import add_ping_routes
from ..public.status_feeds import add_status_feed_routes
from ..public.status_pages import add_status_page_routes
from ..public.subscriptions import add_subscription_routes
from ..routes import ROUTES
from ..routes.openapi import openapi_document
from .ops import Operations, add_operational_routes

__all__ = ["create_app"]


def create_app(
    deps: Dependencies,
    *,
    routes: Sequence[Route] = ROUTES,
    middlewares: Sequence[Middleware] = DEFAULT_MIDDLEWARES,
    ops: Operations | None = None,
) -> QuartTrio:
    """The ASGI application serving ``routes`` behind ``middlewares``, plus the
    operational endpoints of :mod:`web.process.ops` (``/healthz``, ``/readyz``,
    ``/metrics``) reading ``ops`` (a fresh :class:`~web.process.ops.Operations` when
    None), ``/openapi.json`` and its viewer at ``/docs`` (:mod:`web.public.docs`), the
    public status pages and their subscription links, the ping URLs, the acknowledge
    links, the calendar feeds and the badges, none of which needs a token.

    Serve it with Hypercorn's trio worker (``hypercorn.trio.serve``) inside the service's
    root nursery, within ``trio_asyncio.open_loop()`` (the store runs on asyncio).
    """
    ops = Operations() if ops is None else ops
    app = api_app(deps, routes=routes, middlewares=middlewares, observer=ops)
    add_docs_routes(app, openapi_document(routes))
    add_operational_routes(app, deps, ops)
    add_status_page_routes(app, deps)
    add_status_feed_routes(app, deps)
    add_ping_routes(app, deps)
    add_alert_ack_routes(app, deps)
    add_subscription_routes(app, deps)
    add_calendar_routes(app, deps)
    add_badge_routes(app, deps)
    return app
