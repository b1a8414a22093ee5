"""Heartbeat endpoints (docs/heartbeats.md, "API"): create, read, list, update, delete, pause,
resume, and a heartbeat's pings.

Each mutation commits first (with its ``heartbeat.*`` event), then tells the engine and
waits for its acknowledgement, then responds, as the monitor endpoints do: a 2xx means
stored and in effect (the actor started, retuned or stopped; the ping key known or
forgotten). Rules (docs/heartbeats.md; bodies in
:mod:`web.api.heartbeats`): lists sort by ``created``, ``updated`` or ``name`` and
filter by ``status``; the ping key is made here (128 random bits, 32 hex characters)
and never changes; ``ping_url`` is ``<base>/ping/<key>``, the base being
``--public-url`` or else the base URL of the request (:attr:`RequestContext.ping_base`);
the pings list is newest first, filtered by ``kind`` and ``created[gt|gte|lt|lte]``.
"""

from __future__ import annotations

import secrets
from functools import partial
from typing import Any

from store import CreatedBounds, HeartbeatRecord, heartbeats, new_id, pings

from ..api.common import list_object, merge_metadata
from ..api.heartbeats import (
    HeartbeatCreate,
    HeartbeatList,
    HeartbeatObject,
    HeartbeatUpdate,
    PingList,
    heartbeat_object,
    ping_object,
)
from ..http.params import choice, parse_list_query, parse_time_list
from ..http.pipeline import ApiResponse, RequestContext, Route
from ..http.validation import validate
from .common import (
    CREATED_QUERY,
    PAGE_QUERY,
    delete_owned,
    get_owned,
    move_owned,
    not_found,
    now,
    patch_changes,
    path_id,
)
from .escalation_policies import own_policy
from .resource import Resource

__all__ = ["RESOURCE"]

_KIND = choice("success", "fail", "start")


def _shape(ctx: RequestContext) -> Any:
    """The heartbeat shaper of this request (its ``ping_url`` base)."""
    return partial(heartbeat_object, ping_base=ctx.ping_base)


async def create_heartbeat(ctx: RequestContext) -> ApiResponse:
    """POST /heartbeats: 201 with the new heartbeat, status ``pending`` (until its first
    ping) and its ``ping_url``."""
    body = ctx.json_body(HeartbeatCreate)
    await own_policy(ctx, body.escalation_policy)
    created = now()
    values = {
        "id": new_id(RESOURCE.prefix),
        "account_id": ctx.account_id,
        "name": body.name,
        "period_seconds": body.period_seconds,
        "grace_seconds": body.grace_seconds,
        "status": "pending",
        "ping_key": secrets.token_hex(16),
        "auto_incidents": body.auto_incidents,
        "incident_severity": body.incident_severity,
        "escalation_policy": body.escalation_policy,
        "created": created,
        "updated": created,
        "metadata": merge_metadata({}, body.metadata),
    }
    record = await ctx.deps.db.transaction(heartbeats.insert_heartbeat, values, ctx.cause)
    await ctx.deps.apply(record.id, record)
    return ApiResponse(201, _shape(ctx)(record))


async def get_heartbeat(ctx: RequestContext) -> ApiResponse:
    """GET /heartbeats/:id."""
    return await get_owned(ctx, RESOURCE, heartbeats.get_heartbeat, _shape(ctx))


async def list_heartbeats(ctx: RequestContext) -> ApiResponse:
    """GET /heartbeats: a page, filtered by status."""
    query = parse_list_query(
        ctx.query,
        prefix=RESOURCE.prefix,
        sorts=("created", "updated", "name"),
        filters={"status": choice("pending", "up", "down", "paused")},
    )
    page = await ctx.deps.db.run(
        heartbeats.list_heartbeats, ctx.account_id, query.page, **query.filters
    )
    return ApiResponse(200, list_object("/heartbeats", page.items, page.has_more, _shape(ctx)))


async def update_heartbeat(ctx: RequestContext) -> ApiResponse:
    """PATCH /heartbeats/:id: only the fields sent change; metadata merges."""
    heartbeat_id = path_id(ctx, RESOURCE)
    body = validate(HeartbeatUpdate, ctx.json_object())
    await own_policy(ctx, body.escalation_policy)

    def apply(current: HeartbeatRecord) -> dict[str, Any]:
        return patch_changes(body, current, nullable=frozenset({"escalation_policy"}))

    record = await ctx.deps.db.transaction(
        heartbeats.update_heartbeat, ctx.account_id, heartbeat_id, apply, now(), ctx.cause
    )
    if record is None:
        raise not_found(RESOURCE, heartbeat_id)
    await ctx.deps.apply(record.id, record)
    return ApiResponse(200, _shape(ctx)(record))


async def delete_heartbeat(ctx: RequestContext) -> ApiResponse:
    """DELETE /heartbeats/:id: 204; the heartbeat and its pings are gone for good, and
    its ping URL answers 404."""
    heartbeat_id = await delete_owned(ctx, RESOURCE, heartbeats.delete_heartbeat)
    await ctx.deps.apply(heartbeat_id, None)
    return ApiResponse(204)


async def pause_heartbeat(ctx: RequestContext) -> ApiResponse:
    """POST /heartbeats/:id/pause: status ``paused``, no deadline (pings are still
    recorded); on a paused heartbeat a no-op 200."""
    return await move_owned(ctx, RESOURCE, heartbeats.pause_heartbeat, _shape(ctx))


async def resume_heartbeat(ctx: RequestContext) -> ApiResponse:
    """POST /heartbeats/:id/resume: status ``pending`` until the next ping; on a
    heartbeat that is not paused a no-op 200."""
    return await move_owned(ctx, RESOURCE, heartbeats.resume_heartbeat, _shape(ctx))


async def _pings_page(
    connection: Any, /, account_id: str, heartbeat_id: str, **query: Any
) -> tuple[list[Any], bool] | None:
    if await heartbeats.get_heartbeat(connection, account_id, heartbeat_id) is None:
        return None
    return await pings.list_pings(connection, heartbeat_id, **query)


async def list_pings(ctx: RequestContext) -> ApiResponse:
    """GET /heartbeats/:id/pings: newest first, filtered by ``kind`` and ``created``."""
    heartbeat_id = path_id(ctx, RESOURCE)
    query = parse_time_list(ctx.query, prefix="png", filters=("kind",))
    raw_kind = query.filters.get("kind")
    found = await ctx.deps.db.run(
        _pings_page,
        ctx.account_id,
        heartbeat_id,
        limit=query.limit,
        starting_after=query.starting_after,
        ending_before=query.ending_before,
        kind=None if raw_kind is None else _KIND("kind", raw_kind),
        bounds=CreatedBounds(
            created_gt=query.created_gt,
            created_gte=query.created_gte,
            created_lt=query.created_lt,
            created_lte=query.created_lte,
        ),
    )
    if found is None:
        raise not_found(RESOURCE, heartbeat_id)
    items, has_more = found
    return ApiResponse(
        200, list_object(f"/heartbeats/{heartbeat_id}/pings", items, has_more, ping_object)
    )


RESOURCE = Resource(
    path="/heartbeats",
    noun="heartbeat",
    prefix="hbt",
    permission="heartbeats",
    tag="Heartbeats",
    description=(
        "Monitors of jobs that call in: a job requests its `ping_url` at least every "
        "`period_seconds`; a heartbeat with no ping for `period_seconds + grace_seconds` "
        "is down."
    ),
    routes=(
        Route(
            name="list_heartbeats",
            method="GET",
            path="/heartbeats",
            handler=list_heartbeats,
            permission="heartbeats.read",
            summary="List heartbeats",
            response_model=HeartbeatList,
            cursor="hbt",
            query=(
                *PAGE_QUERY,
                ("status", "string", "Filter: pending, up, down, paused."),
                ("sort", "string", "created, updated or name; leading - for descending."),
            ),
            query_schema={
                "status": {"enum": ["pending", "up", "down", "paused"]},
                "sort": {"pattern": "^-?(created|updated|name)$"},
            },
        ),
        Route(
            name="create_heartbeat",
            method="POST",
            path="/heartbeats",
            handler=create_heartbeat,
            permission="heartbeats.create",
            summary="Create a heartbeat (the response shows its ping_url)",
            success_status=201,
            request_model=HeartbeatCreate,
            response_model=HeartbeatObject,
            links=(
                "get_heartbeat",
                "update_heartbeat",
                "delete_heartbeat",
                "pause_heartbeat",
                "resume_heartbeat",
                "list_pings",
            ),
        ),
        Route(
            name="get_heartbeat",
            method="GET",
            path="/heartbeats/<id>",
            handler=get_heartbeat,
            permission="heartbeats.read",
            summary="Retrieve a heartbeat",
            response_model=HeartbeatObject,
        ),
        Route(
            name="update_heartbeat",
            method="PATCH",
            path="/heartbeats/<id>",
            handler=update_heartbeat,
            permission="heartbeats.update",
            summary="Update a heartbeat",
            request_model=HeartbeatUpdate,
            response_model=HeartbeatObject,
        ),
        Route(
            name="delete_heartbeat",
            method="DELETE",
            path="/heartbeats/<id>",
            handler=delete_heartbeat,
            permission="heartbeats.delete",
            summary="Delete a heartbeat and its pings",
            success_status=204,
        ),
        Route(
            name="pause_heartbeat",
            method="POST",
            path="/heartbeats/<id>/pause",
            handler=pause_heartbeat,
            permission="heartbeats.update",
            summary="Pause a heartbeat",
            response_model=HeartbeatObject,
        ),
        Route(
            name="resume_heartbeat",
            method="POST",
            path="/heartbeats/<id>/resume",
            handler=resume_heartbeat,
            permission="heartbeats.update",
            summary="Resume a heartbeat",
            response_model=HeartbeatObject,
        ),
        Route(
            name="list_pings",
            method="GET",
            path="/heartbeats/<id>/pings",
            handler=list_pings,
            permission="heartbeats.read",
            summary="List a heartbeat's pings, newest first",
            response_model=PingList,
            cursor="png",
            query=(
                *PAGE_QUERY,
                ("kind", "string", "Filter: success, fail, start."),
                *CREATED_QUERY,
            ),
            query_schema={"kind": {"enum": ["success", "fail", "start"]}},
        ),
    ),
)
"""The heartbeats resource."""
