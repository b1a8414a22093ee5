"""Webhook endpoint endpoints (docs/webhooks.md, "Endpoints and deliveries"): create,
read, list, update, delete, rotate the secret, list deliveries.

Rules (docs/webhooks.md): ``url`` must be an absolute http(s)
URL (422 ``invalid_url``) that the monitors' target policy accepts (422
``target_not_allowed``, checked at create and whenever a PATCH sends ``url``; the sender
checks every address again when it connects); the secret is shown only by create and
rotate-secret; rotating keeps the old secret valid 24 hours (a second rotation within
them drops the oldest at once); lists are newest first, endpoints sortable by
``created`` only, deliveries not sortable and filterable by ``status``. Disabling an
endpoint (PATCH ``status``) stops its deliveries; re-enabling resumes the pending ones
still inside their 3 days. A token may create, PATCH or rotate the secret of an endpoint
only if it may read every event the endpoint subscribes to (after the PATCH), else 403
``missing_permission`` on ``enabled_events`` (:func:`check_readable`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from engine import InvalidTarget, parse_target
from store import WebhookEndpointRecord, deliveries, new_id, webhooks

from ..api.common import EmptyBody, list_object, merge_metadata
from ..api.webhooks import (
    WebhookDeliveryList,
    WebhookEndpointCreate,
    WebhookEndpointList,
    WebhookEndpointObject,
    WebhookEndpointUpdate,
    WebhookEndpointWithSecret,
    webhook_delivery_object,
    webhook_endpoint_object,
    webhook_endpoint_with_secret,
)
from ..http.auth import EVENT_READ_PERMISSIONS
from ..http.errors import ApiError
from ..http.params import choice, parse_list_query
from ..http.pipeline import ApiResponse, RequestContext, Route
from ..http.validation import validate
from .common import PAGE_QUERY, delete_owned, get_owned, not_found, now, patch_changes, path_id
from .monitors import check_target_policy
from .resource import Resource

__all__ = ["RESOURCE"]

_DELIVERY_STATUSES = ("pending", "succeeded", "failed")


async def check_url(ctx: RequestContext, url: str) -> None:
    """Raise 422 ``invalid_url`` unless ``url`` is an absolute http(s) URL, and 422
    ``target_not_allowed`` when the target policy refuses it (:mod:`engine.policy`)."""
    try:
        parse_target("http", url)
    except InvalidTarget as exc:
        raise ApiError("invalid_url", str(exc), param="url") from None
    await check_target_policy(ctx.deps.target_policy, "http", url)


def check_readable(ctx: RequestContext, enabled_events: list[str]) -> None:
    """Raise 403 ``missing_permission`` (``param`` ``enabled_events``) unless the token
    may read every event ``enabled_events`` subscribes to (:data:`EVENT_READ_PERMISSIONS`
    by the type's first part; ``*`` takes every kind): an endpoint would otherwise show
    its maker what ``GET /events`` refuses it (docs/webhooks.md, "Permissions")."""
    assert ctx.token is not None
    granted = ctx.token.permissions
    for pattern in enabled_events:
        kinds = list(EVENT_READ_PERMISSIONS) if pattern == "*" else [pattern.split(".")[0]]
        lacking = [
            EVENT_READ_PERMISSIONS[k] for k in kinds if EVENT_READ_PERMISSIONS[k] not in granted
        ]
        if lacking:
            raise ApiError(
                "missing_permission",
                f"enabled_events: {pattern} needs {' and '.join(lacking)}, which this token "
                "lacks (an endpoint may receive only events its token may read)",
                param="enabled_events",
            )


async def create_endpoint(ctx: RequestContext) -> ApiResponse:
    """POST /webhook-endpoints: 201 with the new endpoint, ``enabled``, and its secret."""
    body = ctx.json_body(WebhookEndpointCreate)
    check_readable(ctx, body.enabled_events)
    await check_url(ctx, body.url)
    created = now()
    values = {
        "id": new_id(RESOURCE.prefix),
        "account_id": ctx.account_id,
        "url": body.url,
        "enabled_events": body.enabled_events,
        "description": body.description,
        "status": "enabled",
        "secret": webhooks.new_secret(),
        "created": created,
        "updated": created,
        "metadata": merge_metadata({}, body.metadata),
    }
    record = await ctx.deps.db.transaction(webhooks.insert_endpoint, values)
    if record is None:
        raise ApiError(
            "endpoint_limit_reached",
            f"an account may have at most {webhooks.MAX_ENDPOINTS} webhook endpoints; "
            "delete one first",
        )
    return ApiResponse(201, webhook_endpoint_with_secret(record))


async def get_endpoint(ctx: RequestContext) -> ApiResponse:
    """GET /webhook-endpoints/:id (without the secret)."""
    return await get_owned(ctx, RESOURCE, webhooks.get_endpoint, webhook_endpoint_object)


async def list_endpoints(ctx: RequestContext) -> ApiResponse:
    """GET /webhook-endpoints: a page, newest first (``sort``: ``created`` or
    ``-created``)."""
    query = parse_list_query(ctx.query, prefix=RESOURCE.prefix, sorts=("created",), filters={})
    page = await ctx.deps.db.run(webhooks.list_endpoints, ctx.account_id, query.page)
    return ApiResponse(
        200, list_object("/webhook-endpoints", page.items, page.has_more, webhook_endpoint_object)
    )


async def update_endpoint(ctx: RequestContext) -> ApiResponse:
    """PATCH /webhook-endpoints/:id: only the fields sent change; metadata merges."""
    endpoint_id = path_id(ctx, RESOURCE)
    body = validate(WebhookEndpointUpdate, ctx.json_object())
    if body.url is not None:  # the policy may resolve names: not inside the transaction
        await check_url(ctx, body.url)

    def apply(current: WebhookEndpointRecord) -> dict[str, Any]:
        # whatever it changes, on what the endpoint subscribes to afterwards
        check_readable(ctx, body.enabled_events or current.enabled_events)
        return patch_changes(body, current, nullable=frozenset({"description"}))

    record = await ctx.deps.db.transaction(
        webhooks.update_endpoint, ctx.account_id, endpoint_id, apply, now()
    )
    if record is None:
        raise not_found(RESOURCE, endpoint_id)
    return ApiResponse(200, webhook_endpoint_object(record))


async def delete_endpoint(ctx: RequestContext) -> ApiResponse:
    """DELETE /webhook-endpoints/:id: 204; the endpoint and its deliveries are gone."""
    await delete_owned(ctx, RESOURCE, webhooks.delete_endpoint)
    return ApiResponse(204)


async def rotate_secret(ctx: RequestContext) -> ApiResponse:
    """POST /webhook-endpoints/:id/rotate-secret: 200 with the endpoint and its new
    secret; the old one signs deliveries for 24 more hours."""
    endpoint_id = path_id(ctx, RESOURCE)
    ctx.json_body(EmptyBody, optional=True)
    current = await ctx.deps.db.run(webhooks.get_endpoint, ctx.account_id, endpoint_id)
    if current is not None:
        check_readable(ctx, current.enabled_events)
    record = await ctx.deps.db.transaction(
        webhooks.rotate_secret, ctx.account_id, endpoint_id, now()
    )
    if record is None:
        raise not_found(RESOURCE, endpoint_id)
    return ApiResponse(200, webhook_endpoint_with_secret(record))


async def list_deliveries(ctx: RequestContext) -> ApiResponse:
    """GET /webhook-endpoints/:id/deliveries: newest first, filtered by ``status``."""
    endpoint_id = path_id(ctx, RESOURCE)
    query = parse_list_query(
        ctx.query, prefix="whd", sorts=(), filters={"status": choice(*_DELIVERY_STATUSES)}
    )
    page = dataclasses.replace(query.page, descending=True)
    result = await ctx.deps.db.run(
        deliveries.list_deliveries, ctx.account_id, endpoint_id, page, **query.filters
    )
    if result is None:
        raise not_found(RESOURCE, endpoint_id)
    return ApiResponse(
        200,
        list_object(
            f"/webhook-endpoints/{endpoint_id}/deliveries",
            result.items,
            result.has_more,
            webhook_delivery_object,
        ),
    )


RESOURCE = Resource(
    path="/webhook-endpoints",
    noun="webhook endpoint",
    prefix="we",
    permission="webhooks",
    tag="Webhook endpoints",
    description=(
        "URLs that receive events as they happen, signed with the endpoint's secret and "
        "retried with back-off; each delivery and its latest attempt can be listed."
    ),
    routes=(
        Route(
            name="list_webhook_endpoints",
            method="GET",
            path="/webhook-endpoints",
            handler=list_endpoints,
            permission="webhooks.read",
            summary="List webhook endpoints",
            response_model=WebhookEndpointList,
            query=(*PAGE_QUERY, ("sort", "string", "created or -created (default).")),
            query_schema={"sort": {"pattern": "^-?created$"}},
        ),
        Route(
            name="create_webhook_endpoint",
            method="POST",
            path="/webhook-endpoints",
            handler=create_endpoint,
            permission="webhooks.create",
            summary="Create a webhook endpoint (the response shows its secret)",
            success_status=201,
            request_model=WebhookEndpointCreate,
            response_model=WebhookEndpointWithSecret,
        ),
        Route(
            name="get_webhook_endpoint",
            method="GET",
            path="/webhook-endpoints/<id>",
            handler=get_endpoint,
            permission="webhooks.read",
            summary="Retrieve a webhook endpoint",
            response_model=WebhookEndpointObject,
        ),
        Route(
            name="update_webhook_endpoint",
            method="PATCH",
            path="/webhook-endpoints/<id>",
            handler=update_endpoint,
            permission="webhooks.update",
            summary="Update a webhook endpoint",
            request_model=WebhookEndpointUpdate,
            response_model=WebhookEndpointObject,
        ),
        Route(
            name="delete_webhook_endpoint",
            method="DELETE",
            path="/webhook-endpoints/<id>",
            handler=delete_endpoint,
            permission="webhooks.delete",
            summary="Delete a webhook endpoint and its deliveries",
            success_status=204,
        ),
        Route(
            name="rotate_webhook_secret",
            method="POST",
            path="/webhook-endpoints/<id>/rotate-secret",
            handler=rotate_secret,
            permission="webhooks.update",
            summary="Rotate a webhook endpoint's secret (the old one stays valid 24 h)",
            response_model=WebhookEndpointWithSecret,
        ),
        Route(
            name="list_webhook_deliveries",
            method="GET",
            path="/webhook-endpoints/<id>/deliveries",
            handler=list_deliveries,
            permission="webhooks.read",
            summary="List a webhook endpoint's deliveries, newest first",
            response_model=WebhookDeliveryList,
            query=(*PAGE_QUERY, ("status", "string", "Filter: pending, succeeded, failed.")),
            query_schema={"status": {"enum": list(_DELIVERY_STATUSES)}},
        ),
    ),
)
"""The webhook endpoints resource (permissions ``webhooks.*``)."""
