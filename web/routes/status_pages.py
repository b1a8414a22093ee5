"""Status page endpoints (docs/status-pages.md, "API"): create, read, list, update, delete.

Rules (docs/status-pages.md, "API" and "Bounds"; bodies in :mod:`web.api.status_pages`):
``slug`` is 3 to 60 of ``a-z 0-9 -`` without a leading or trailing hyphen (422
``invalid_slug``) and unique over the whole service, whichever account holds it (422
``slug_taken``, also when two requests race for it: the unique index decides, never a
500); every component's ``monitor`` is one of the account's own monitors (422
``unknown_monitor``, ``param`` ``components``); lists are sortable by ``created``,
``updated`` and ``name``; PATCH ``components`` replaces the whole list. No events are
written (no event type names a status page: docs/incidents.md, "Events"). The public page of
``/status/<slug>`` (:mod:`web.public.status_pages`) shows a change within its cache's 10 s.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

from store import IntegrityConflict, StatusPageRecord, new_id, status_pages

from ..api.common import list_object, merge_metadata
from ..api.status_pages import (
    ComponentIn,
    StatusPageCreate,
    StatusPageList,
    StatusPageObject,
    StatusPageUpdate,
    status_page_object,
)
from ..http.errors import ApiError
from ..http.params import parse_list_query
from ..http.pipeline import ApiResponse, RequestContext, Route
from ..http.validation import validate
from .common import PAGE_QUERY, delete_owned, get_owned, not_found, now, patch_changes, path_id
from .incidents import own_monitors
from .resource import Resource

__all__ = ["RESOURCE"]

T = TypeVar("T")


async def _slug_checked(write: Awaitable[T]) -> T:
    """Await ``write``; the unique index on ``slug`` refusing it becomes 422
    ``slug_taken`` (a race between two creates or renames included).

    Raises:
        ApiError: 422 ``slug_taken``.
        IntegrityConflict: any other constraint (a bug: a 500).
    """
    try:
        return await write
    except IntegrityConflict as exc:
        if exc.constraint != status_pages.SLUG_CONSTRAINT:
            raise
        raise ApiError(
            "slug_taken", "another status page already has this slug", param="slug"
        ) from None


async def _components(ctx: RequestContext, components: list[ComponentIn]) -> list[dict[str, Any]]:
    """The components as stored, after checking that each monitor is the account's own.

    Raises:
        ApiError: 422 ``unknown_monitor`` (``param`` ``components``).
    """
    await own_monitors(ctx, [c.monitor for c in components], param="components", heartbeats=False)
    return [{"monitor": c.monitor, "name": c.name, "group": c.group} for c in components]


async def create_status_page(ctx: RequestContext) -> ApiResponse:
    """POST /status-pages: 201 with the new page."""
    body = ctx.json_body(StatusPageCreate)
    components = await _components(ctx, body.components)
    created = now()
    values = {
        "id": new_id(RESOURCE.prefix),
        "account_id": ctx.account_id,
        "name": body.name,
        "slug": body.slug,
        "description": body.description,
        "components": components,
        "created": created,
        "updated": created,
        "metadata": merge_metadata({}, body.metadata),
    }
    record = await _slug_checked(ctx.deps.db.transaction(status_pages.insert_status_page, values))
    return ApiResponse(201, status_page_object(record))


async def get_status_page(ctx: RequestContext) -> ApiResponse:
    """GET /status-pages/:id."""
    return await get_owned(ctx, RESOURCE, status_pages.get_status_page, status_page_object)


async def list_status_pages(ctx: RequestContext) -> ApiResponse:
    """GET /status-pages: a page, newest first by default (``sort``: ``created``,
    ``updated``, ``name``, each optionally with a leading ``-``)."""
    query = parse_list_query(
        ctx.query, prefix=RESOURCE.prefix, sorts=("created", "updated", "name"), filters={}
    )
    page = await ctx.deps.db.run(status_pages.list_status_pages, ctx.account_id, query.page)
    return ApiResponse(
        200, list_object("/status-pages", page.items, page.has_more, status_page_object)
    )


async def update_status_page(ctx: RequestContext) -> ApiResponse:
    """PATCH /status-pages/:id: only the fields sent change; ``components`` replaces the
    list; metadata merges."""
    page_id = path_id(ctx, RESOURCE)
    body = validate(StatusPageUpdate, ctx.json_object())
    components = None if body.components is None else await _components(ctx, body.components)

    def apply(current: StatusPageRecord) -> dict[str, Any]:
        changes = patch_changes(body, current, nullable=frozenset({"description"}))
        if components is None or components == current.components:
            changes.pop("components", None)
        else:
            changes["components"] = components
        return changes

    record = await _slug_checked(
        ctx.deps.db.transaction(
            status_pages.update_status_page, ctx.account_id, page_id, apply, now()
        )
    )
    if record is None:
        raise not_found(RESOURCE, page_id)
    return ApiResponse(200, status_page_object(record))


async def delete_status_page(ctx: RequestContext) -> ApiResponse:
    """DELETE /status-pages/:id: 204; its public page answers 404 once its cached copy
    expires (at most 10 s)."""
    await delete_owned(ctx, RESOURCE, status_pages.delete_status_page)
    return ApiResponse(204)


RESOURCE = Resource(
    path="/status-pages",
    noun="status page",
    prefix="stp",
    permission="status_pages",
    tag="Status pages",
    description=(
        "Public pages at `/status/<slug>` (and `/status/<slug>/summary.json`) showing chosen "
        "monitors under public names, their 90-day uptime and open incidents."
    ),
    routes=(
        Route(
            name="list_status_pages",
            method="GET",
            path="/status-pages",
            handler=list_status_pages,
            permission="status_pages.read",
            summary="List status pages",
            response_model=StatusPageList,
            cursor="stp",
            query=(
                *PAGE_QUERY,
                ("sort", "string", "created, updated or name; a leading - for descending."),
            ),
            query_schema={"sort": {"pattern": "^-?(created|updated|name)$"}},
        ),
        Route(
            name="create_status_page",
            method="POST",
            path="/status-pages",
            handler=create_status_page,
            permission="status_pages.create",
            summary="Create a status page",
            success_status=201,
            request_model=StatusPageCreate,
            response_model=StatusPageObject,
            # no links: a slug is unique over the service, so against the one live server
            # of the stateful test a replayed create fails (slug_taken) where it first
            # succeeded, and hypothesis refuses the run as flaky
        ),
        Route(
            name="get_status_page",
            method="GET",
            path="/status-pages/<id>",
            handler=get_status_page,
            permission="status_pages.read",
            summary="Retrieve a status page",
            response_model=StatusPageObject,
        ),
        Route(
            name="update_status_page",
            method="PATCH",
            path="/status-pages/<id>",
            handler=update_status_page,
            permission="status_pages.update",
            summary="Update a status page",
            request_model=StatusPageUpdate,
            response_model=StatusPageObject,
        ),
        Route(
            name="delete_status_page",
            method="DELETE",
            path="/status-pages/<id>",
            handler=delete_status_page,
            permission="status_pages.delete",
            summary="Delete a status page",
            success_status=204,
        ),
    ),
)
"""The status pages resource (the public pages are in :mod:`web.public.status_pages`)."""
