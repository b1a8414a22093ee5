"""Helpers the resource routes share: path ids, the clock, body-to-changes diffing."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from store import has_prefix

from ..api.common import MAX_METADATA_KEYS, EmptyBody, merge_metadata
from ..http.errors import ApiError
from ..http.pipeline import ApiResponse, Handler, PlannedRead, RequestContext, Route
from .resource import Resource

PAGE_QUERY = (
    ("limit", "integer", "1 to 100, default 10."),
    ("starting_after", "string", "Cursor: objects after this id."),
    ("ending_before", "string", "Cursor: objects before this id."),
)
"""The cursor parameters of every list (docs/api.md, "Conventions and decisions":
cursors), for the OpenAPI document."""
CREATED_QUERY = (
    ("created[gt]", "integer", "Created after (epoch seconds)."),
    ("created[gte]", "integer", "Created at or after (epoch seconds)."),
    ("created[lt]", "integer", "Created before (epoch seconds)."),
    ("created[lte]", "integer", "Created at or before (epoch seconds)."),
)
"""The ``created`` bounds of a time-ordered list, for the OpenAPI document."""


def now() -> int:
    """Wall-clock time as integer epoch seconds (docs/api.md: times), for stored timestamps."""
    return int(time.time())


def path_id(ctx: RequestContext, resource: Resource) -> str:
    """The ``<id>`` of the path, an id of ``resource``; a malformed one is a 404 like an
    unknown one (docs/api.md, "Conventions and decisions")."""
    value = ctx.path_params["id"]
    if not has_prefix(value, resource.prefix):
        raise not_found(resource, value)
    return value


async def get_owned(
    ctx: RequestContext,
    resource: Resource,
    get: Callable[..., Awaitable[Any]],
    to_object: Callable[[Any], dict[str, Any]],
    with_token: Callable[..., Awaitable[Any]] | None = None,
) -> ApiResponse:
    """GET /<resources>/:id: 200 with ``to_object`` of the account's row read by
    ``get(connection, account_id, id)`` (:func:`owned_read`, with ``with_token``).

    Raises:
        ApiError: 404 ``resource_missing`` when the account has no such row.
    """
    planned = owned_read(ctx, resource, get, with_token)
    record = await ctx.read(planned)
    if record is None:
        raise not_found(resource, planned.args[0])
    return ApiResponse(200, to_object(record))


def owned_read(
    ctx: RequestContext,
    resource: Resource,
    get: Callable[..., Awaitable[Any]],
    with_token: Callable[..., Awaitable[Any]] | None = None,
) -> PlannedRead:
    """The read of :func:`get_owned`: ``get(connection, account_id, id)`` of the path's id
    (what a route's ``prefetch`` returns), and ``with_token``, the same read joined to the
    token's (:attr:`PlannedRead.with_token`), if the store has it.

    Raises:
        ApiError: 404 ``resource_missing`` for an id that is not one of ``resource``.
    """
    return PlannedRead(get, (path_id(ctx, resource),), with_token=with_token)


async def delete_owned(
    ctx: RequestContext, resource: Resource, delete: Callable[..., Awaitable[bool]]
) -> str:
    """DELETE /<resources>/:id: delete the account's row with ``delete(connection,
    account_id, id, now, cause)`` in one transaction; the id deleted.

    Raises:
        ApiError: 404 ``resource_missing`` when the account has no such row.
    """
    row_id = path_id(ctx, resource)
    if not await ctx.deps.db.transaction(delete, ctx.account_id, row_id, now(), ctx.cause):
        raise not_found(resource, row_id)
    return row_id


async def delete_unless_used(
    ctx: RequestContext,
    resource: Resource,
    delete: Callable[..., Awaitable[bool]],
    *,
    refused: type[Exception],
    code: str,
    message: Callable[[Any], str],
) -> ApiResponse:
    """DELETE /<resources>/:id whose store refuses to delete what is still used
    (``refused``, raised by ``delete``): 204, or the 409 ``code`` with ``message(exc)``
    (a policy, member or schedule in use: docs/alerts.md, docs/on-call.md).

    Raises:
        ApiError: 404 ``resource_missing`` when the account has no such row; ``code``.
    """
    try:
        await delete_owned(ctx, resource, delete)
    except refused as exc:
        raise ApiError(code, message(exc)) from None
    return ApiResponse(204)


async def move_owned(
    ctx: RequestContext,
    resource: Resource,
    move: Callable[..., Awaitable[tuple[Any, bool]]],
    to_object: Callable[[Any], dict[str, Any]],
) -> ApiResponse:
    """POST /<resources>/:id/pause or resume: ``move(connection, account_id, id, now,
    cause)`` in one transaction, then, when it changed something, the record's desired
    state to the engine (``deps.apply``: a paused one stops, a resumed one runs), and 200
    with ``to_object`` of the record (a no-op is a 200 too: docs/api.md).

    Raises:
        ApiError: 404 ``resource_missing`` when the account has no such row; as
            :meth:`RequestContext.json_body` for a body other than none or ``{}``.
    """
    row_id = path_id(ctx, resource)
    ctx.json_body(EmptyBody, optional=True)
    record, changed = await ctx.deps.db.transaction(move, ctx.account_id, row_id, now(), ctx.cause)
    if record is None:
        raise not_found(resource, row_id)
    if changed:
        await ctx.deps.apply(record.id, record)
    return ApiResponse(200, to_object(record))


def not_found(resource: Resource, value: str) -> ApiError:
    """The 404 ``resource_missing`` for ``value``, an id of ``resource`` the account does
    not have: ``no such monitor: 'mon_x'`` (the id cut at 80 characters)."""
    return ApiError("resource_missing", f"no such {resource.noun}: {value[:80]!r}", param="id")


def patch_changes(
    body: BaseModel,
    current: Any,
    *,
    nullable: frozenset[str] = frozenset(),
    skip: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The columns a PATCH body changes on ``current``: fields sent whose value differs,
    with ``metadata`` merged (docs/api.md, "Conventions and decisions": metadata) and
    its 50-key limit checked after the merge. Fields in ``skip`` are left to the caller
    (a field stored under another name or in another form).

    Raises:
        ApiError: 422 ``invalid_type`` for null sent to a field not in ``nullable``;
            ``metadata_too_many_keys`` when the merge would pass 50 keys.
    """
    changes: dict[str, Any] = {}
    for name in body.model_fields_set - skip:
        value = getattr(body, name)
        if value is None and name not in nullable:
            raise ApiError("invalid_type", f"{name} may not be null", param=name)
        if name == "metadata":
            value = merged_metadata(current.metadata, value)
        if value != getattr(current, name):
            changes[name] = value
    return changes


def merged_metadata(current: Mapping[str, str], patch: dict[str, str]) -> dict[str, str]:
    """``current`` merged with ``patch``; raises 422 ``metadata_too_many_keys`` past 50."""
    merged = merge_metadata(dict(current), patch)
    if len(merged) > MAX_METADATA_KEYS:
        raise ApiError(
            "metadata_too_many_keys",
            f"metadata may have at most {MAX_METADATA_KEYS} keys; this update would leave "
            f"{len(merged)}",
            param="metadata",
        )
    return merged


def _sort_query(sorts: Sequence[str]) -> tuple[tuple[str, str, str], ...]:
    """The ``sort`` parameter of a list sortable by ``sorts``, for the OpenAPI document."""
    names = ", ".join(sorts[:-1]) + f" or {sorts[-1]}" if len(sorts) > 1 else sorts[0]
    return (("sort", "string", f"{names}; a leading - for descending."),)


def crud_routes(
    *,
    path: str,
    permission: str,
    singular: str,
    plural: str,
    prefix: str,
    handlers: tuple[Handler, Handler, Handler, Handler, Handler],
    models: tuple[type[BaseModel], type[BaseModel], type[BaseModel], type[BaseModel]],
    noun: str,
    list_query: Sequence[tuple[str, str, str]] = (),
    list_schema: Mapping[str, Mapping[str, Any]] | None = None,
    sorts: Sequence[str] = ("created", "updated", "name"),
) -> tuple[Route, ...]:
    """The five routes of a plain CRUD resource at ``path`` (list, create, retrieve,
    update, delete), named ``list_<plural>``, ``create_<singular>``... and needing
    ``<permission>.read``, ``.create``, ``.update``, ``.delete``: ``handlers`` in that
    order, ``models`` the list, create body, object and update body. The list is
    sortable by ``sorts`` (``created``, ``updated`` and ``name`` unless given) and also
    takes ``list_query``."""
    list_handler, create, get, update, delete = handlers
    list_model, create_model, object_model, update_model = models
    item = f"{path}/<id>"
    return (
        Route(
            name=f"list_{plural}",
            method="GET",
            path=path,
            handler=list_handler,
            permission=f"{permission}.read",
            summary=f"List {noun}s",
            response_model=list_model,
            cursor=prefix,
            query=(*PAGE_QUERY, *_sort_query(sorts), *list_query),
            query_schema={"sort": {"pattern": f"^-?({'|'.join(sorts)})$"}, **(list_schema or {})},
        ),
        Route(
            name=f"create_{singular}",
            method="POST",
            path=path,
            handler=create,
            permission=f"{permission}.create",
            summary=f"Create a {noun}",
            success_status=201,
            request_model=create_model,
            response_model=object_model,
            links=(f"get_{singular}", f"update_{singular}", f"delete_{singular}"),
        ),
        Route(
            name=f"get_{singular}",
            method="GET",
            path=item,
            handler=get,
            permission=f"{permission}.read",
            summary=f"Retrieve a {noun}",
            response_model=object_model,
        ),
        Route(
            name=f"update_{singular}",
            method="PATCH",
            path=item,
            handler=update,
            permission=f"{permission}.update",
            summary=f"Update a {noun}",
            request_model=update_model,
            response_model=object_model,
        ),
        Route(
            name=f"delete_{singular}",
            method="DELETE",
            path=item,
            handler=delete,
            permission=f"{permission}.delete",
            summary=f"Delete a {noun}",
            success_status=204,
        ),
    )
