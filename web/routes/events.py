"""Event endpoints (docs/incidents.md, "Events"): ``GET /events`` and ``GET /events/:id``.

A token sees the events of the resources it may read: ``monitor.*`` events with
``monitors.read``, ``incident.*`` (``incident.update_posted`` included) with
``incidents.read``, ``heartbeat.*`` with ``heartbeats.read``. The route needs one of
them; an event the token may not read is a 404 like a missing one. ``type`` is an
exact type, or a prefix ending in ``*`` (``monitor.*``; ``*`` alone is every type).
"""

from __future__ import annotations

from functools import partial

from store import EventFilter, events

from ..api.common import list_object
from ..api.events import EventList, EventObject, event_object
from ..http.auth import EVENT_READ_PERMISSIONS, readable_event_kinds
from ..http.errors import ApiError
from ..http.params import parse_time_list
from ..http.pipeline import ApiResponse, RequestContext, Route
from .common import CREATED_QUERY, PAGE_QUERY, not_found, path_id
from .resource import Resource

__all__ = ["RESOURCE"]

_READ = tuple(dict.fromkeys(EVENT_READ_PERMISSIONS.values()))
"""``GET /events`` needs one of them (:data:`web.http.auth.EVENT_READ_PERMISSIONS`, each once)."""


def _kinds(ctx: RequestContext) -> list[str]:
    assert ctx.token is not None
    return readable_event_kinds(ctx.token.permissions)


async def list_events(ctx: RequestContext) -> ApiResponse:
    """GET /events: the token's readable events, newest first."""
    query = parse_time_list(ctx.query, prefix=RESOURCE.prefix, filters=("type",))
    type_filter = query.filters.get("type")
    if type_filter is not None and (
        not 0 < len(type_filter) <= 100 or "*" in type_filter[:-1] or not type_filter.isascii()
    ):
        raise ApiError(
            "invalid_parameter",
            "type must be an event type, or a prefix ending in * (monitor.*)",
            param="type",
        )
    items, has_more = await ctx.deps.db.run(
        events.list_events,
        ctx.account_id,
        _kinds(ctx),
        limit=query.limit,
        starting_after=query.starting_after,
        ending_before=query.ending_before,
        filters=EventFilter(
            type=type_filter,
            created_gt=query.created_gt,
            created_gte=query.created_gte,
            created_lt=query.created_lt,
            created_lte=query.created_lte,
        ),
    )
    shape = partial(event_object, ping_base=ctx.ping_base)
    return ApiResponse(200, list_object("/events", items, has_more, shape))


async def get_event(ctx: RequestContext) -> ApiResponse:
    """GET /events/:id; 404 when the token may not read the event's resource."""
    event_id = path_id(ctx, RESOURCE)
    record = await ctx.deps.db.run(events.get_event, ctx.account_id, event_id, _kinds(ctx))
    if record is None:
        raise not_found(RESOURCE, event_id)
    return ApiResponse(200, event_object(record, ping_base=ctx.ping_base))


RESOURCE = Resource(
    path="/events",
    noun="event",
    prefix="evt",
    permission=None,
    tag="Events",
    description=(
        "Every change to monitors, incidents and heartbeats, newest first, kept 30 days: "
        "the same objects that webhooks deliver."
    ),
    routes=(
        Route(
            name="list_events",
            method="GET",
            path="/events",
            handler=list_events,
            permission=_READ,
            summary="List events, newest first",
            response_model=EventList,
            query=(
                *PAGE_QUERY,
                ("type", "string", "An event type, or a prefix ending in * (monitor.*)."),
                *CREATED_QUERY,
            ),
            # ASCII, 1-100 characters, a * only at the end (list_events checks the same)
            query_schema={
                "type": {
                    "minLength": 1,
                    "maxLength": 100,
                    "pattern": "^[\\x00-\\x29\\x2b-\\x7f]{0,99}\\*?$",
                }
            },
        ),
        Route(
            name="get_event",
            method="GET",
            path="/events/<id>",
            handler=get_event,
            permission=_READ,
            summary="Retrieve an event",
            response_model=EventObject,
        ),
    ),
)
"""The events resource: no permissions of its own (``_READ``)."""
