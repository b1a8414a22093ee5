"""Member endpoints (docs/alerts.md, "Members"): create, read, list, update, delete.

Rules (docs/alerts.md; bodies in :mod:`web.api.members`): every id of
``contact_channels`` is a notification channel of the account (422 ``unknown_channel``,
``param`` ``contact_channels[i]``); lists are sortable by ``created``, ``updated`` and
``name``; PATCH ``contact_channels`` replaces the list. Members write no events. The
permissions are the ``on_call`` namespace's, shared with channels, policies and alerts.
"""

from __future__ import annotations

from typing import Any

from store import MemberRecord, members, new_id, notification_channels, schedules

from ..api.common import list_object, merge_metadata
from ..api.members import MemberCreate, MemberList, MemberObject, MemberUpdate, member_object
from ..http.errors import ApiError
from ..http.params import parse_list_query
from ..http.pipeline import ApiResponse, RequestContext
from ..http.validation import validate
from .common import (
    crud_routes,
    delete_unless_used,
    get_owned,
    not_found,
    now,
    patch_changes,
    path_id,
)
from .resource import Resource

__all__ = ["RESOURCE", "own_channels", "own_members"]


async def own_channels(ctx: RequestContext, refs: list[tuple[str, str]]) -> None:
    """Check that each ``(id, param)`` of ``refs`` names a notification channel of the
    account.

    Raises:
        ApiError: 422 ``unknown_channel`` whose ``param`` is the first bad one's.
    """
    if refs:
        foreign = set(
            await ctx.deps.db.run(
                notification_channels.missing, ctx.account_id, [i for i, _ in refs]
            )
        )
        for channel_id, param in refs:
            if channel_id in foreign:
                raise ApiError(
                    "unknown_channel", f"no such notification channel: {channel_id!r}", param=param
                )


async def own_members(ctx: RequestContext, refs: list[tuple[str, str]]) -> None:
    """Check that each ``(id, param)`` of ``refs`` names a member of the account.

    Raises:
        ApiError: 422 ``unknown_member`` whose ``param`` is the first bad one's.
    """
    if refs:
        foreign = set(await ctx.deps.db.run(members.missing, ctx.account_id, [i for i, _ in refs]))
        for member_id, param in refs:
            if member_id in foreign:
                raise ApiError("unknown_member", f"no such member: {member_id!r}", param=param)


def _channel_refs(channels: list[str]) -> list[tuple[str, str]]:
    return [(c, f"contact_channels[{i}]") for i, c in enumerate(channels)]


async def create_member(ctx: RequestContext) -> ApiResponse:
    """POST /members: 201 with the new member."""
    body = ctx.json_body(MemberCreate)
    await own_channels(ctx, _channel_refs(body.contact_channels))
    created = now()
    values = {
        "id": new_id(RESOURCE.prefix),
        "account_id": ctx.account_id,
        "name": body.name,
        "email": body.email,
        "time_zone": body.time_zone,
        "contact_channels": body.contact_channels,
        "created": created,
        "updated": created,
        "metadata": merge_metadata({}, body.metadata),
    }
    record = await ctx.deps.db.transaction(members.insert_member, values)
    return ApiResponse(201, member_object(record))


async def get_member(ctx: RequestContext) -> ApiResponse:
    """GET /members/:id."""
    return await get_owned(ctx, RESOURCE, members.get_member, member_object)


async def list_members(ctx: RequestContext) -> ApiResponse:
    """GET /members: a page, newest first by default (``sort``: ``created``, ``updated``,
    ``name``, each optionally with a leading ``-``)."""
    query = parse_list_query(
        ctx.query, prefix=RESOURCE.prefix, sorts=("created", "updated", "name"), filters={}
    )
    page = await ctx.deps.db.run(members.list_members, ctx.account_id, query.page)
    return ApiResponse(200, list_object("/members", page.items, page.has_more, member_object))


async def update_member(ctx: RequestContext) -> ApiResponse:
    """PATCH /members/:id: only the fields sent change; ``contact_channels`` replaces the
    list; metadata merges."""
    member_id = path_id(ctx, RESOURCE)
    body = validate(MemberUpdate, ctx.json_object())
    if body.contact_channels is not None:
        await own_channels(ctx, _channel_refs(body.contact_channels))

    def apply(current: MemberRecord) -> dict[str, Any]:
        return patch_changes(body, current, nullable=frozenset({"email"}))

    record = await ctx.deps.db.transaction(
        members.update_member, ctx.account_id, member_id, apply, now()
    )
    if record is None:
        raise not_found(RESOURCE, member_id)
    return ApiResponse(200, member_object(record))


async def delete_member(ctx: RequestContext) -> ApiResponse:
    """DELETE /members/:id: 204; they leave every schedule layer naming them and their
    overrides go (docs/on-call.md, "Deleting a member"); 409 ``member_in_use`` when they
    are the only member of a layer."""
    return await delete_unless_used(
        ctx,
        RESOURCE,
        members.delete_member,
        refused=schedules.MemberInUse,
        code="member_in_use",
        message=lambda exc: (
            f"this member is the only member of layer {exc.layer[:100]!r} of schedule "
            f"{exc.schedule_id}: add someone to that layer, or remove the layer, first"
        ),
    )


RESOURCE = Resource(
    path="/members",
    noun="member",
    prefix="mbr",
    permission="on_call",
    tag="Members",
    description=(
        "People who can be paged: their email, time zone and the notification channels "
        "they are told on, in order."
    ),
    routes=crud_routes(
        path="/members",
        permission="on_call",
        singular="member",
        plural="members",
        prefix="mbr",
        handlers=(list_members, create_member, get_member, update_member, delete_member),
        models=(MemberList, MemberCreate, MemberObject, MemberUpdate),
        noun="member",
    ),
)
"""The members resource (permissions ``on_call.*``)."""
