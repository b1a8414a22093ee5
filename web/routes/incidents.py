"""Incident endpoints (docs/incidents.md, "Incidents" and "Timelines"): create, read,
list, update, resolve, delete, and the timeline (post and list updates).

Decisions (docs/incidents.md, "Incidents"): any status move is allowed by PATCH; moving
into ``resolved`` sets ``resolved_at``, moving out of it clears ``resolved_at`` and
``resolution_message``; creating an incident as ``resolved`` sets ``resolved_at`` to its
creation time; resolve on a resolved incident is a 400 ``incident_not_open``.
``monitors`` must name the account's own monitors (422 ``unknown_monitor``, ``param``
``monitors``); duplicates are dropped, keeping the first. A status sent to ``POST
/incidents/:id/updates`` moves the incident as PATCH would, and the post appends one
timeline entry.
"""

from __future__ import annotations

from typing import Any, get_args

from store import IncidentRecord, incidents, new_id

from ..api.common import Severity, list_object, merge_metadata
from ..api.incidents import (
    IncidentCreate,
    IncidentList,
    IncidentObject,
    IncidentResolve,
    IncidentStatus,
    IncidentUpdate,
    IncidentUpdateCreate,
    IncidentUpdateList,
    IncidentUpdateObject,
    incident_object,
    incident_update_object,
)
from ..http.errors import ApiError
from ..http.params import boolean, choice, parse_list_query
from ..http.pipeline import ApiResponse, RequestContext, Route
from .common import PAGE_QUERY, delete_owned, get_owned, not_found, now, patch_changes, path_id
from .resource import Resource

_STATUSES = ("investigating", "identified", "monitoring", "resolved")
_SEVERITIES = ("critical", "major", "minor", "maintenance")


async def own_monitors(
    ctx: RequestContext, monitor_ids: list[str], *, param: str = "monitors", heartbeats: bool = True
) -> list[str]:
    """``monitor_ids`` without duplicates, each one of the account's own monitors (or
    heartbeats, unless ``heartbeats`` is False: a status page's components).

    Raises:
        ApiError: 422 ``unknown_monitor`` (``param``: ``monitors``, or the caller's field,
            such as a status page's ``components``) naming the first id that is not.
    """
    unique = list(dict.fromkeys(monitor_ids))
    if unique:
        foreign = await ctx.deps.db.run(
            incidents.foreign_monitors, ctx.account_id, unique, heartbeats=heartbeats
        )
        if foreign:
            raise ApiError("unknown_monitor", f"no such monitor: {foreign[0][:80]!r}", param=param)
    return unique


async def create_incident(ctx: RequestContext) -> ApiResponse:
    """POST /incidents: 201 with the new incident."""
    body = ctx.json_body(IncidentCreate)
    affected = await own_monitors(ctx, body.monitors)
    created = now()
    values = {
        "id": new_id(RESOURCE.prefix),
        "account_id": ctx.account_id,
        "title": body.title,
        "description": body.description,
        "status": body.status,
        "severity": body.severity,
        "resolved_at": created if body.status == "resolved" else None,
        "resolution_message": None,
        "created": created,
        "updated": created,
        "metadata": merge_metadata({}, body.metadata),
        "monitors": affected,
    }
    record = await ctx.deps.db.transaction(incidents.insert_incident, values, ctx.cause)
    return ApiResponse(201, incident_object(record))


async def get_incident(ctx: RequestContext) -> ApiResponse:
    """GET /incidents/:id."""
    return await get_owned(ctx, RESOURCE, incidents.get_incident, incident_object)


async def list_incidents(ctx: RequestContext) -> ApiResponse:
    """GET /incidents: a page, filtered by status, severity and resolution."""
    query = parse_list_query(
        ctx.query,
        prefix=RESOURCE.prefix,
        sorts=("created", "updated", "title"),
        filters={
            "status": choice(*_STATUSES),
            "severity": choice(*_SEVERITIES),
            "resolved": boolean,
        },
    )
    page = await ctx.deps.db.run(
        incidents.list_incidents, ctx.account_id, query.page, **query.filters
    )
    return ApiResponse(200, list_object("/incidents", page.items, page.has_more, incident_object))


def _status_move(current: IncidentRecord, status: str, at: int) -> dict[str, Any]:
    """The columns a move to ``status`` changes besides ``status`` itself."""
    if status == "resolved" and current.status != "resolved":
        return {"resolved_at": at}
    if status != "resolved" and current.status == "resolved":
        return {"resolved_at": None, "resolution_message": None}
    return {}


async def update_incident(ctx: RequestContext) -> ApiResponse:
    """PATCH /incidents/:id: only the fields sent change; metadata merges."""
    incident_id = path_id(ctx, RESOURCE)
    body = ctx.json_body(IncidentUpdate)
    if body.monitors is not None:
        body.monitors = await own_monitors(ctx, body.monitors)
    at = now()

    def apply(current: IncidentRecord) -> dict[str, Any]:
        changes = patch_changes(body, current, nullable=frozenset({"description", "postmortem"}))
        if "status" in changes:
            changes.update(_status_move(current, changes["status"], at))
        return changes

    record = await ctx.deps.db.transaction(
        incidents.update_incident, ctx.account_id, incident_id, apply, at, ctx.cause
    )
    if record is None:
        raise not_found(RESOURCE, incident_id)
    return ApiResponse(200, incident_object(record))


async def resolve_incident(ctx: RequestContext) -> ApiResponse:
    """POST /incidents/:id/resolve: status ``resolved``, ``resolved_at`` now, the optional
    ``resolution_message`` stored; 400 ``incident_not_open`` if already resolved."""
    incident_id = path_id(ctx, RESOURCE)
    body = ctx.json_body(IncidentResolve, optional=True)
    at = now()

    def apply(current: IncidentRecord) -> dict[str, Any]:
        if current.status == "resolved":
            raise ApiError(
                "incident_not_open", f"incident {incident_id} is already resolved", param="id"
            )
        return {
            "status": "resolved",
            "resolved_at": at,
            "resolution_message": body.resolution_message,
        }

    record = await ctx.deps.db.transaction(
        incidents.update_incident, ctx.account_id, incident_id, apply, at, ctx.cause
    )
    if record is None:
        raise not_found(RESOURCE, incident_id)
    return ApiResponse(200, incident_object(record))


async def post_incident_update(ctx: RequestContext) -> ApiResponse:
    """POST /incidents/:id/updates: 201 with the timeline entry appended; a ``status``
    moves the incident as PATCH would (docs/incidents.md, "Timelines")."""
    incident_id = path_id(ctx, RESOURCE)
    body = ctx.json_body(IncidentUpdateCreate)
    at = now()

    def apply(current: IncidentRecord) -> dict[str, Any]:
        if body.status is None or body.status == current.status:
            return {}
        return {"status": body.status, **_status_move(current, body.status, at)}

    update = await ctx.deps.db.transaction(
        incidents.post_update, ctx.account_id, incident_id, body.message, apply, at, ctx.cause
    )
    if update is None:
        raise not_found(RESOURCE, incident_id)
    return ApiResponse(201, incident_update_object(update))


async def list_incident_updates(ctx: RequestContext) -> ApiResponse:
    """GET /incidents/:id/updates: the timeline, oldest first."""
    incident_id = path_id(ctx, RESOURCE)
    query = parse_list_query(ctx.query, prefix="inu", sorts=(), filters={})
    result = await ctx.deps.db.run(incidents.list_updates, ctx.account_id, incident_id, query.page)
    if result is None:
        raise not_found(RESOURCE, incident_id)
    return ApiResponse(
        200,
        list_object(
            f"/incidents/{incident_id}/updates",
            result.items,
            result.has_more,
            incident_update_object,
        ),
    )


async def delete_incident(ctx: RequestContext) -> ApiResponse:
    """DELETE /incidents/:id: 204; gone for good."""
    await delete_owned(ctx, RESOURCE, incidents.delete_incident)
    return ApiResponse(204)


RESOURCE = Resource(
    path="/incidents",
    noun="incident",
    prefix="inc",
    permission="incidents",
    tag="Incidents",
    description=(
        "Incidents, opened by hand or by a monitor or heartbeat going down (then resolved "
        "when it comes back up), with a timeline of updates."
    ),
    routes=(
        Route(
            name="list_incidents",
            method="GET",
            path="/incidents",
            handler=list_incidents,
            permission="incidents.read",
            summary="List incidents",
            response_model=IncidentList,
            cursor="inc",
            query=(
                *PAGE_QUERY,
                ("status", "string", "Filter: " + ", ".join(_STATUSES) + "."),
                ("severity", "string", "Filter: " + ", ".join(_SEVERITIES) + "."),
                ("resolved", "boolean", "Filter: true for resolved, false for open."),
                ("sort", "string", "created, updated or title; leading - for descending."),
            ),
            query_schema={
                "status": {"enum": list(get_args(IncidentStatus))},
                "severity": {"enum": list(get_args(Severity))},
                "sort": {"pattern": "^-?(created|updated|title)$"},
            },
        ),
        Route(
            name="create_incident",
            method="POST",
            path="/incidents",
            handler=create_incident,
            permission="incidents.create",
            summary="Create an incident",
            success_status=201,
            request_model=IncidentCreate,
            response_model=IncidentObject,
            links=("get_incident", "update_incident", "delete_incident", "resolve_incident"),
        ),
        Route(
            name="get_incident",
            method="GET",
            path="/incidents/<id>",
            handler=get_incident,
            permission="incidents.read",
            summary="Retrieve an incident",
            response_model=IncidentObject,
        ),
        Route(
            name="update_incident",
            method="PATCH",
            path="/incidents/<id>",
            handler=update_incident,
            permission="incidents.update",
            summary="Update an incident",
            request_model=IncidentUpdate,
            response_model=IncidentObject,
        ),
        Route(
            name="resolve_incident",
            method="POST",
            path="/incidents/<id>/resolve",
            handler=resolve_incident,
            permission="incidents.update",
            summary="Resolve an incident",
            request_model=IncidentResolve,
            response_model=IncidentObject,
        ),
        Route(
            name="post_incident_update",
            method="POST",
            path="/incidents/<id>/updates",
            handler=post_incident_update,
            permission="incidents.update",
            summary="Post an update to an incident's timeline",
            success_status=201,
            request_model=IncidentUpdateCreate,
            response_model=IncidentUpdateObject,
        ),
        Route(
            name="list_incident_updates",
            method="GET",
            path="/incidents/<id>/updates",
            handler=list_incident_updates,
            permission="incidents.read",
            summary="List an incident's timeline, oldest first",
            response_model=IncidentUpdateList,
            query=PAGE_QUERY,
        ),
        Route(
            name="delete_incident",
            method="DELETE",
            path="/incidents/<id>",
            handler=delete_incident,
            permission="incidents.delete",
            summary="Delete an incident",
            success_status=204,
        ),
    ),
)
"""The incidents resource."""
