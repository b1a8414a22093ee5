"""Alert endpoints (docs/alerts.md, "Alerts"): list, read, acknowledge, resolve, and the
messages sent for an alert.

Alerts are raised by the engine (a monitor's or heartbeat's move into ``down``), never
by the API, so there is no create, update or delete. Decisions (docs/alerts.md,
"Alerts"):

- ``POST /alerts/:id/acknowledge`` acknowledges on behalf of the calling token
  (``acknowledged_by`` ``{"type": "token", "id": "tok_…"}``) and stops the escalation
  walk; on an alert already acknowledged it is a no-op 200 (the first acknowledger is
  kept); on a resolved one a 400 ``alert_not_open``.
- ``POST /alerts/:id/resolve`` resolves by hand (the acknowledge links die); a 400
  ``alert_not_open`` when already resolved. An alert resolved while its monitor is still
  down stays resolved; the next down after an up raises a new one.
- Both take no body, or ``{}``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, get_args

from store import AlertNotOpen, AlertRecord, Connection, alerts, notifications

from ..api.alerts import (
    AlertList,
    AlertObject,
    AlertStatus,
    NotificationList,
    alert_object,
    notification_object,
)
from ..api.common import EmptyBody, list_object
from ..http.errors import ApiError
from ..http.params import MONITOR_PATTERN, choice, monitor_filter, parse_list_query
from ..http.pipeline import ApiResponse, RequestContext, Route
from .common import PAGE_QUERY, get_owned, not_found, now, path_id
from .resource import Resource

_STATUSES = get_args(AlertStatus)


async def list_alerts(ctx: RequestContext) -> ApiResponse:
    """GET /alerts: a page, newest first, filtered by status and monitor."""
    query = parse_list_query(
        ctx.query,
        prefix=RESOURCE.prefix,
        sorts=("created",),
        filters={"status": choice(*_STATUSES), "monitor": monitor_filter},
    )
    filters = query.filters
    page = await ctx.deps.db.run(
        alerts.list_alerts,
        ctx.account_id,
        query.page,
        status=filters.get("status"),
        resource_id=filters.get("monitor"),
    )
    return ApiResponse(200, list_object("/alerts", page.items, page.has_more, alert_object))


async def get_alert(ctx: RequestContext) -> ApiResponse:
    """GET /alerts/:id."""
    return await get_owned(ctx, RESOURCE, alerts.get_alert, alert_object)


def _not_open(alert_id: str) -> ApiError:
    return ApiError("alert_not_open", f"alert {alert_id} is already resolved", param="id")


async def _change(ctx: RequestContext, change: Callable[..., Awaitable[Any]]) -> ApiResponse:
    """Acknowledge or resolve the alert of the path by the request's API token
    (``change(connection, account_id, alert_id, by=..., now=...)`` in one transaction,
    returning the alert or None): 200 with the alert.

    Raises:
        ApiError: 404 ``resource_missing``; 400 ``alert_not_open`` (already resolved).
    """
    alert_id = path_id(ctx, RESOURCE)
    ctx.json_body(EmptyBody, optional=True)
    assert ctx.token is not None
    by = {"type": "token", "id": ctx.token.id}
    try:
        record = await ctx.deps.db.transaction(change, ctx.account_id, alert_id, by=by, now=now())
    except AlertNotOpen:
        raise _not_open(alert_id) from None
    if record is None:
        raise not_found(RESOURCE, alert_id)
    return ApiResponse(200, alert_object(record))


async def _acknowledge(connection: Connection, *args: Any, **kwargs: Any) -> AlertRecord | None:
    """``store.alerts.acknowledge`` without its ``changed`` flag (acknowledging twice
    answers the alert as it is)."""
    record, _ = await alerts.acknowledge(connection, *args, **kwargs)
    return record


async def acknowledge_alert(ctx: RequestContext) -> ApiResponse:
    """POST /alerts/:id/acknowledge: 200 with the alert (module docstring)."""
    return await _change(ctx, _acknowledge)


async def resolve_alert(ctx: RequestContext) -> ApiResponse:
    """POST /alerts/:id/resolve: 200 with the resolved alert (module docstring)."""
    return await _change(ctx, alerts.resolve)


async def list_alert_notifications(ctx: RequestContext) -> ApiResponse:
    """GET /alerts/:id/notifications: every message of the alert, oldest first, each
    with its attempts (one list: an alert's messages are bounded by its policy)."""
    alert_id = path_id(ctx, RESOURCE)
    if await ctx.deps.db.run(alerts.get_alert, ctx.account_id, alert_id) is None:
        raise not_found(RESOURCE, alert_id)
    found = await ctx.deps.db.run(notifications.list_for_alert, ctx.account_id, alert_id)
    return ApiResponse(
        200,
        list_object(f"/alerts/{alert_id}/notifications", found, False, notification_object),
    )


RESOURCE = Resource(
    path="/alerts",
    noun="alert",
    prefix="alt",
    permission="on_call",
    tag="Alerts",
    description=(
        "Alerts: page-worthy episodes of a monitor or heartbeat with an escalation policy, "
        "walked until acknowledged, resolved when it comes back up; with every message "
        "sent for each."
    ),
    routes=(
        Route(
            name="list_alerts",
            method="GET",
            path="/alerts",
            handler=list_alerts,
            permission="on_call.read",
            summary="List alerts, newest first",
            response_model=AlertList,
            cursor="alt",
            query=(
                *PAGE_QUERY,
                ("status", "string", "Filter: " + ", ".join(_STATUSES) + "."),
                ("monitor", "string", "Filter: the mon_ or hbt_ id the alert is about."),
                ("sort", "string", "created; leading - for descending (the default)."),
            ),
            query_schema={
                "status": {"enum": list(_STATUSES)},
                "monitor": {"pattern": "^" + MONITOR_PATTERN.pattern + "$"},
                "sort": {"pattern": "^-?created$"},
            },
        ),
        Route(
            name="get_alert",
            method="GET",
            path="/alerts/<id>",
            handler=get_alert,
            permission="on_call.read",
            summary="Retrieve an alert",
            response_model=AlertObject,
        ),
        Route(
            name="acknowledge_alert",
            method="POST",
            path="/alerts/<id>/acknowledge",
            handler=acknowledge_alert,
            permission="on_call.update",
            summary="Acknowledge an alert",
            response_model=AlertObject,
        ),
        Route(
            name="resolve_alert",
            method="POST",
            path="/alerts/<id>/resolve",
            handler=resolve_alert,
            permission="on_call.update",
            summary="Resolve an alert",
            response_model=AlertObject,
        ),
        Route(
            name="list_alert_notifications",
            method="GET",
            path="/alerts/<id>/notifications",
            handler=list_alert_notifications,
            permission="on_call.read",
            summary="List the messages sent for an alert, each with its attempts",
            response_model=NotificationList,
        ),
    ),
)
"""The alerts resource."""
