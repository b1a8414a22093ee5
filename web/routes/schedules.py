"""Schedule endpoints (docs/on-call.md, "Schedules through the API"): create, read, list,
update, delete; overrides; who is on call; the shifts of a range; the calendar key.

Rules (bodies in :mod:`web.api.schedules`): the layers' members are the account's own
(422 ``unknown_member``, ``param`` ``layers[i].members[j]``); the rest of a schedule is
checked by :func:`store.rotation.parse_plan` (422 ``invalid_value`` naming the field,
``invalid_time_zone`` for ``time_zone``); an override's ``member`` is the account's
(422 ``unknown_member``, ``member``) and its ``end`` after its ``start`` (422
``invalid_value``, ``end``). ``shifts`` takes ``start`` (default now) and ``end``
(default a week after ``start``), at most 90 days apart (400 ``invalid_parameter``
naming ``end``, as every query parameter's error is). The calendar feed, which needs
no token but the schedule's ``calendar_key``, is :mod:`web.public.calendar_feed`.

Changes write their events in their own transaction (docs/incidents.md, Events):
``schedule.created``, ``.updated``, ``.deleted``, ``.override_created``,
``.override_deleted`` (:mod:`store.schedules`). A schedule an escalation policy targets
is not deleted (409 ``schedule_in_use``, type ``invalid_request_error``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import trio

from store import PageRequest, members, new_id, schedule_overrides, schedules

from ..api.common import EmptyBody, list_object, merge_metadata
from ..api.schedules import (
    OnCall,
    OnCallObject,
    OverrideCreate,
    OverrideList,
    OverrideObject,
    ScheduleCreate,
    ScheduleList,
    ScheduleObject,
    ScheduleUpdate,
    ShiftList,
    ShiftRange,
    as_stored,
    on_call_object,
    override_object,
    schedule_object,
    shift_list,
)
from ..http.errors import ApiError
from ..http.params import EPOCH, check_names, page_args, parse_list_query, single
from ..http.pipeline import ApiResponse, RequestContext, Route
from ..http.validation import validate
from .common import (
    PAGE_QUERY,
    crud_routes,
    delete_unless_used,
    get_owned,
    not_found,
    now,
    patch_changes,
    path_id,
)
from .members import own_members
from .resource import Resource

_T = TypeVar("_T")

__all__ = ["HORIZON_SECONDS", "RESOURCE"]

HORIZON_SECONDS = 90 * 86_400
"""The longest range of shifts (90 days, seconds): ``shifts`` and the calendar feed."""
_WEEK = 7 * 86_400
_EPOCH = {"minimum": 0, "maximum": 99_999_999_999}
"""What an epoch-seconds query parameter accepts (:data:`web.http.params.EPOCH`)."""
_PATH = "/schedules"


def _invalid(exc: schedules.InvalidSchedule) -> ApiError:
    """The 422 of a refused schedule, naming its field."""
    code = "invalid_time_zone" if exc.field == "time_zone" else "invalid_value"
    return ApiError(code, f"{exc.field} {exc.message}", param=exc.field)


async def _layers(
    ctx: RequestContext, time_zone: str, layers: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The layers as stored (:func:`store.rotation.plan_json` of the parsed plan), after
    checking them (:func:`store.rotation.parse_plan`) and their members.

    Raises:
        ApiError: 422 naming the first bad field.
    """
    try:
        plan = schedules.parse_plan(time_zone, layers)
    except schedules.InvalidSchedule as exc:
        raise _invalid(exc) from None
    refs = [
        (member, f"layers[{i}].members[{j}]")
        for i, layer in enumerate(layers)
        for j, member in enumerate(layer["members"])
    ]
    await own_members(ctx, refs)
    return schedules.plan_json(plan)


async def create_schedule(ctx: RequestContext) -> ApiResponse:
    """POST /schedules: 201 with the new schedule (and its calendar key)."""
    body = ctx.json_body(ScheduleCreate)
    layers = await _layers(ctx, body.time_zone, as_stored(body.layers))
    created = now()
    values = {
        "id": new_id(RESOURCE.prefix),
        "account_id": ctx.account_id,
        "name": body.name,
        "time_zone": body.time_zone,
        "layers": layers,
        "calendar_key": schedules.new_calendar_key(),
        "created": created,
        "updated": created,
        "metadata": merge_metadata({}, body.metadata),
    }
    record = await ctx.deps.db.transaction(schedules.insert_schedule, values, ctx.cause)
    return ApiResponse(201, schedule_object(record))


async def get_schedule(ctx: RequestContext) -> ApiResponse:
    """GET /schedules/:id."""
    return await get_owned(ctx, RESOURCE, schedules.get_schedule, schedule_object)


async def list_schedules(ctx: RequestContext) -> ApiResponse:
    """GET /schedules: a page, newest first by default (``sort``: ``created``,
    ``updated``, ``name``)."""
    query = parse_list_query(
        ctx.query, prefix=RESOURCE.prefix, sorts=("created", "updated", "name"), filters={}
    )
    page = await ctx.deps.db.run(schedules.list_schedules, ctx.account_id, query.page)
    return ApiResponse(200, list_object(_PATH, page.items, page.has_more, schedule_object))


async def update_schedule(ctx: RequestContext) -> ApiResponse:
    """PATCH /schedules/:id: only the fields sent change; ``layers`` replaces the list;
    metadata merges. A new ``time_zone`` alone is checked against the stored layers."""
    schedule_id = path_id(ctx, RESOURCE)
    body = validate(ScheduleUpdate, ctx.json_object())
    current = await ctx.deps.db.run(schedules.get_schedule, ctx.account_id, schedule_id)
    if current is None:
        raise not_found(RESOURCE, schedule_id)
    layers = None
    if body.layers is not None or body.time_zone is not None:
        time_zone = current.time_zone if body.time_zone is None else body.time_zone
        sent = current.layers if body.layers is None else as_stored(body.layers)
        checked = await _layers(ctx, time_zone, sent)
        # a new zone alone is checked against the stored layers but writes none of them
        # (a change of the layers meanwhile is not undone)
        layers = None if body.layers is None else checked

    def apply(record: schedules.ScheduleRecord) -> dict[str, Any]:
        changes = patch_changes(body, record, skip=frozenset({"layers"}))
        if layers is not None and layers != record.layers:
            changes["layers"] = layers
        return changes

    record = await ctx.deps.db.transaction(
        schedules.update_schedule, ctx.account_id, schedule_id, apply, now(), ctx.cause
    )
    if record is None:
        raise not_found(RESOURCE, schedule_id)
    return ApiResponse(200, schedule_object(record))


async def delete_schedule(ctx: RequestContext) -> ApiResponse:
    """DELETE /schedules/:id: 204; its overrides go with it; 409 ``schedule_in_use``
    when an escalation policy targets it."""
    return await delete_unless_used(
        ctx,
        RESOURCE,
        schedules.delete_schedule,
        refused=schedules.ScheduleInUse,
        code="schedule_in_use",
        message=lambda exc: (
            f"this schedule is a target of {', '.join(exc.users)}: take it out of their steps first"
        ),
    )


async def rotate_calendar_key(ctx: RequestContext) -> ApiResponse:
    """POST /schedules/:id/rotate-calendar-key: a new key; the old one's feed is a 404
    from the moment this answers."""
    schedule_id = path_id(ctx, RESOURCE)
    ctx.json_body(EmptyBody, optional=True)
    record = await ctx.deps.db.transaction(
        schedules.rotate_calendar_key, ctx.account_id, schedule_id, now()
    )
    if record is None:
        raise not_found(RESOURCE, schedule_id)
    return ApiResponse(200, schedule_object(record))


async def _schedule(ctx: RequestContext) -> schedules.ScheduleRecord:
    """The path's schedule of the account.

    Raises:
        ApiError: 404 ``resource_missing``.
    """
    schedule_id = path_id(ctx, RESOURCE)
    record = await ctx.deps.db.run(schedules.get_schedule, ctx.account_id, schedule_id)
    if record is None:
        raise not_found(RESOURCE, schedule_id)
    return record


async def create_override(ctx: RequestContext) -> ApiResponse:
    """POST /schedules/:id/overrides: 201 with the override."""
    schedule_id = path_id(ctx, RESOURCE)
    body = ctx.json_body(OverrideCreate)
    if body.end <= body.start:
        raise ApiError("invalid_value", "end must be after start", param="end")
    await own_members(ctx, [(body.member, "member")])
    values = {
        "account_id": ctx.account_id,
        "schedule_id": schedule_id,
        "member_id": body.member,
        "starts_at": body.start,
        "ends_at": body.end,
        "created": now(),
    }
    record = await ctx.deps.db.transaction(schedule_overrides.insert_override, values, ctx.cause)
    if record is None:
        raise not_found(RESOURCE, schedule_id)
    return ApiResponse(201, override_object(record))


async def list_overrides(ctx: RequestContext) -> ApiResponse:
    """GET /schedules/:id/overrides: a page by start, oldest first; ``ends_after``
    (epoch seconds) keeps those that end later (``ends_after`` = now: the current and
    coming ones)."""
    check_names(ctx.query, ("limit", "starting_after", "ending_before", "ends_after"))
    limit, after, before = page_args(ctx.query, "ovr")
    raw = single(ctx.query, "ends_after")
    ends_after = None if raw is None else EPOCH("ends_after", raw)
    record = await _schedule(ctx)
    page = PageRequest(
        limit=limit, sort="starts_at", descending=False, starting_after=after, ending_before=before
    )
    found = await ctx.deps.db.run(
        schedule_overrides.list_overrides, ctx.account_id, record.id, page, ends_after=ends_after
    )
    return ApiResponse(
        200,
        list_object(f"{_PATH}/{record.id}/overrides", found.items, found.has_more, override_object),
    )


async def delete_override(ctx: RequestContext) -> ApiResponse:
    """DELETE /schedules/:id/overrides/:override_id: 204."""
    schedule_id = path_id(ctx, RESOURCE)
    override_id = ctx.path_params["override_id"]
    deleted = await ctx.deps.db.transaction(
        schedule_overrides.delete_override,
        ctx.account_id,
        schedule_id,
        override_id,
        now(),
        ctx.cause,
    )
    if not deleted:
        raise ApiError(
            "resource_missing", f"no such override: {override_id[:80]!r}", param="override_id"
        )
    return ApiResponse(204)


async def _plan(
    ctx: RequestContext, schedule_id: str, lo: int, hi: int
) -> tuple[schedules.Plan, list[Any]]:
    """The account's schedule's plan and its overrides overlapping ``[lo, hi)`` (epoch
    seconds: :func:`store.schedules.load_plan`, one round trip).

    Raises:
        ApiError: 404 ``resource_missing`` for no such schedule of the account.
    """
    loaded = await ctx.deps.db.run(schedules.load_plan, schedule_id, lo, hi, ctx.account_id)
    if loaded is None:
        raise not_found(RESOURCE, schedule_id)
    return loaded


async def off_loop(ctx: RequestContext, work: Callable[..., _T], *args: Any) -> _T:
    """``work(*args)`` on a worker thread (``trio.to_thread``, sharing the status pages'
    limiter): who is on call and the shifts are pure computation that a schedule with
    many restrictions makes cost a tenth of a second or more, which must not stall the
    probes' event loop."""
    return await trio.to_thread.run_sync(
        partial(work, *args), limiter=ctx.deps.status_render_limiter
    )


async def get_on_call(ctx: RequestContext) -> ApiResponse:
    """GET /schedules/:id/on-call?at= (default now): the members on call and until when."""
    schedule_id = path_id(ctx, RESOURCE)
    raw = single(ctx.query, "at")
    at = int(ctx.deps.clock()) if raw is None else EPOCH("at", raw)
    plan, overrides = await _plan(ctx, schedule_id, at, at + HORIZON_SECONDS)
    ids, until = await off_loop(ctx, schedules.on_call, plan, overrides, at)
    people = await ctx.deps.db.run(members.get_members, ctx.account_id, ids)
    return ApiResponse(200, on_call_object(OnCall(schedule_id, at, people, until)))


def _range(ctx: RequestContext) -> tuple[int, int]:
    """``start`` (default now) and ``end`` (default a week later) of ``shifts``.

    Raises:
        ApiError: 400 ``invalid_parameter`` naming ``end`` when it is not after
            ``start`` or more than 90 days after it.
    """
    raw_start, raw_end = single(ctx.query, "start"), single(ctx.query, "end")
    start = int(ctx.deps.clock()) if raw_start is None else EPOCH("start", raw_start)
    end = start + _WEEK if raw_end is None else EPOCH("end", raw_end)
    if end <= start:
        raise ApiError("invalid_parameter", "end must be after start", param="end")
    if end - start > HORIZON_SECONDS:
        raise ApiError(
            "invalid_parameter", "the range is at most 90 days (7,776,000 seconds)", param="end"
        )
    return start, end


async def get_shifts(ctx: RequestContext) -> ApiResponse:
    """GET /schedules/:id/shifts?start&end: the final timeline of the range."""
    schedule_id = (await _schedule(ctx)).id  # an unknown one is a 404 before its range
    start, end = _range(ctx)
    plan, overrides = await _plan(ctx, schedule_id, start, end)
    found = await off_loop(ctx, schedules.shifts, plan, overrides, start, end)
    return ApiResponse(200, shift_list(ShiftRange(schedule_id, start, end, found)))


def _item(name: str, method: str, suffix: str, handler: Callable[..., Any], **kw: Any) -> Route:
    """A route under ``/schedules/<id>``."""
    return Route(name=name, method=method, path=f"{_PATH}/<id>{suffix}", handler=handler, **kw)


RESOURCE = Resource(
    path=_PATH,
    noun="schedule",
    prefix="sch",
    permission="on_call",
    tag="Schedules",
    description=(
        "Who is on call: layers of daily, weekly or custom rotations handed off at local "
        "wall time, restricted to days and hours, with overrides; the shifts of a range, "
        "and a calendar feed to subscribe to."
    ),
    routes=(
        *crud_routes(
            path=_PATH,
            permission="on_call",
            singular="schedule",
            plural="schedules",
            prefix="sch",
            handlers=(
                list_schedules,
                create_schedule,
                get_schedule,
                update_schedule,
                delete_schedule,
            ),
            models=(ScheduleList, ScheduleCreate, ScheduleObject, ScheduleUpdate),
            noun="schedule",
        ),
        _item(
            "rotate_schedule_calendar_key",
            "POST",
            "/rotate-calendar-key",
            rotate_calendar_key,
            permission="on_call.update",
            summary="Replace the calendar key (the old one stops working at once)",
            response_model=ScheduleObject,
        ),
        _item(
            "create_schedule_override",
            "POST",
            "/overrides",
            create_override,
            permission="on_call.update",
            summary="Put a member on call over a range, whatever the layers say",
            success_status=201,
            request_model=OverrideCreate,
            response_model=OverrideObject,
        ),
        _item(
            "list_schedule_overrides",
            "GET",
            "/overrides",
            list_overrides,
            permission="on_call.read",
            summary="List a schedule's overrides, by start",
            response_model=OverrideList,
            cursor="ovr",
            query=(
                *PAGE_QUERY,
                ("ends_after", "integer", "Only overrides ending after this (epoch seconds)."),
            ),
            query_schema={"ends_after": _EPOCH},
        ),
        _item(
            "delete_schedule_override",
            "DELETE",
            "/overrides/<override_id>",
            delete_override,
            permission="on_call.update",
            summary="Delete an override",
            success_status=204,
        ),
        _item(
            "get_schedule_on_call",
            "GET",
            "/on-call",
            get_on_call,
            permission="on_call.read",
            summary="Who is on call at an instant, and until when",
            response_model=OnCallObject,
            query=(("at", "integer", "The instant (epoch seconds); default now."),),
            query_schema={"at": _EPOCH},
        ),
        _item(
            "list_schedule_shifts",
            "GET",
            "/shifts",
            get_shifts,
            permission="on_call.read",
            summary="The final timeline of a range, overrides applied",
            response_model=ShiftList,
            query=(
                ("start", "integer", "Epoch seconds; default now."),
                ("end", "integer", "Epoch seconds; default start + 7 days; at most 90 days."),
            ),
            query_schema={"start": _EPOCH, "end": _EPOCH},
        ),
    ),
)
"""The schedules resource (permissions ``on_call.*``; the calendar feed, which needs no
token, is :mod:`web.public.calendar_feed`)."""
