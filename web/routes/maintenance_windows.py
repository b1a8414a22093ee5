"""Maintenance window endpoints (docs/maintenance.md): create, read, list, update, delete,
end and cancel.

Rules (docs/maintenance.md; bodies in :mod:`web.api.maintenance_windows`): ``monitors``
name the account's own monitors and heartbeats (422 ``unknown_monitor``, ``param``
``monitors[i]`` of the first that is not); the schedule is checked by
:func:`store.recurrence.schedule_of` (422 naming the field: ``ends_at``,
``recurrence.rrule``, ...; an unknown zone is ``invalid_time_zone``); lists sort by
``created``, ``updated`` or ``title`` and filter by ``monitor`` (a ``mon_`` or ``hbt_``
id). ``end`` on a window with no occurrence open is a 400
``maintenance_not_in_progress``; ``cancel`` on a window already canceled or with
nothing starting later a 400 ``maintenance_not_cancelable``.

Every change writes its event in its own transaction (the outbox, docs/incidents.md,
Events): ``maintenance.created``, ``.updated`` (a PATCH that changed something, and
``end``), ``.canceled``, ``.deleted``. The events of an occurrence starting and ending
(``maintenance.started``, ``.ended``) belong to the loop that acts on them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import trio

from store import Connection, EventCause, events, new_id, notify, recurrence, window_walk, windows

from ..api.common import EmptyBody, list_object, merge_metadata
from ..api.maintenance_windows import (
    WindowCreate,
    WindowList,
    WindowObject,
    WindowUpdate,
    as_stored,
    window_object,
)
from ..http.errors import ApiError
from ..http.params import MONITOR_PATTERN, monitor_filter, parse_list_query
from ..http.pipeline import ApiResponse, RequestContext, Route
from ..http.validation import validate
from .common import crud_routes, get_owned, not_found, now, patch_changes, path_id
from .resource import Resource

__all__ = ["RESOURCE"]

_SCHEDULE = frozenset({"starts_at", "ends_at", "recurrence"})


def _shape(at: int) -> Callable[[windows.WindowRecord], dict[str, Any]]:
    """The window shaper at ``at`` (epoch seconds)."""
    return partial(window_object, at=at)


def _invalid(exc: recurrence.InvalidWindow) -> ApiError:
    """The 422 of a refused schedule, naming its field."""
    code = "invalid_time_zone" if exc.field == "recurrence.time_zone" else "invalid_value"
    return ApiError(code, f"{exc.field} {exc.message}", param=exc.field)


def _schedule(starts_at: Any, ends_at: Any, rule: Mapping[str, Any] | None) -> dict[str, Any]:
    """The schedule columns, checked (:func:`store.recurrence.schedule_of`).

    Raises:
        ApiError: 422 naming the offending field.
    """
    try:
        checked = recurrence.schedule_of(starts_at=starts_at, ends_at=ends_at, recurrence=rule)
    except recurrence.InvalidWindow as exc:
        raise _invalid(exc) from None
    return {
        "starts_at": checked.starts_at,
        "ends_at": checked.ends_at,
        "recurrence": None if checked.recurrence is None else checked.recurrence.as_json(),
    }


async def _checked_schedule(
    starts_at: Any, ends_at: Any, rule: Mapping[str, Any] | None
) -> dict[str, Any]:
    """:func:`_schedule` in a worker thread (``trio.to_thread``): checking a rule expands
    it, and an hourly rule that matches rarely or never walks up to ten years of hours
    (seconds of CPU), which must not stall the event loop."""
    return await trio.to_thread.run_sync(_schedule, starts_at, ends_at, rule)


async def _own_resources(ctx: RequestContext, ids: list[str]) -> None:
    """Check that every id is a monitor or heartbeat of the account.

    Raises:
        ApiError: 422 ``unknown_monitor`` naming ``monitors[i]`` of the first that is not.
    """
    missing = set(await ctx.deps.db.run(windows.missing_resources, ctx.account_id, ids))
    for i, value in enumerate(ids):
        if value in missing:
            kind = "heartbeat" if value.startswith("hbt_") else "monitor"
            raise ApiError("unknown_monitor", f"no such {kind}: {value!r}", param=f"monitors[{i}]")


async def _insert(
    connection: Connection, values: Mapping[str, Any], at: int, cause: EventCause
) -> windows.WindowRecord:
    record = await windows.insert_window(connection, values, now=at)
    await events.record_event(
        connection, type="maintenance.created", record=record, created=at, cause=cause
    )
    return record


async def create_window(ctx: RequestContext) -> ApiResponse:
    """POST /maintenance-windows: 201 with the new window and its ``next_window``."""
    body = ctx.json_body(WindowCreate)
    schedule = await _checked_schedule(body.starts_at, body.ends_at, as_stored(body.recurrence))
    await _own_resources(ctx, body.monitors)
    created = now()
    values = {
        "id": new_id(RESOURCE.prefix),
        "account_id": ctx.account_id,
        "title": body.title,
        "description": body.description,
        **schedule,
        "suppress_alerts": body.suppress_alerts,
        "exclude_from_availability": body.exclude_from_availability,
        "pause_checks": body.pause_checks,
        "ended_at": None,
        "canceled_at": None,
        "created": created,
        "updated": created,
        "metadata": merge_metadata({}, body.metadata),
        "monitors": list(dict.fromkeys(body.monitors)),
    }
    record = await ctx.deps.db.transaction(_insert, values, created, ctx.cause)
    return ApiResponse(201, window_object(record, at=created))


async def get_window(ctx: RequestContext) -> ApiResponse:
    """GET /maintenance-windows/:id."""
    return await get_owned(ctx, RESOURCE, windows.get_window, _shape(now()))


async def list_windows(ctx: RequestContext) -> ApiResponse:
    """GET /maintenance-windows: a page, newest first by default (``sort``: ``created``,
    ``updated``, ``title``), only those covering ``monitor`` when given."""
    query = parse_list_query(
        ctx.query,
        prefix=RESOURCE.prefix,
        sorts=("created", "updated", "title"),
        filters={"monitor": monitor_filter},
    )
    page = await ctx.deps.db.run(windows.list_windows, ctx.account_id, query.page, **query.filters)
    return ApiResponse(200, list_object(RESOURCE.path, page.items, page.has_more, _shape(now())))


def _schedule_changes(
    body: WindowUpdate, current: windows.WindowRecord, recurring: dict[str, Any] | None
) -> dict[str, Any]:
    """The schedule columns a PATCH changes: ``recurring`` (the sent recurrence, checked
    already) makes the window recurring, ``starts_at``/``ends_at`` one-off (the other
    bound taken from a one-off window)."""
    sent = body.model_fields_set & _SCHEDULE
    if not sent:
        return {}
    if recurring is not None:
        new = recurring
    else:
        starts_at = body.starts_at if "starts_at" in sent else current.starts_at
        ends_at = body.ends_at if "ends_at" in sent else current.ends_at
        new = _schedule(starts_at, ends_at, None)
    return {k: v for k, v in new.items() if v != getattr(current, k)}


async def _update(
    connection: Connection,
    account_id: str,
    window_id: str,
    apply: Callable[[windows.WindowRecord], dict[str, Any]],
    at: int,
    cause: EventCause,
) -> windows.WindowRecord | None:
    updated = await windows.update_window(connection, account_id, window_id, apply, at)
    record, previous = updated.record, updated.previous
    if record is not None and (record.pause_checks or previous.get("pause_checks")):
        # the engines read these again: a pause may start, end or move
        await notify.notify_resources(connection, [*record.monitors, *previous.get("monitors", ())])
    if updated.record is not None and updated.previous:
        await events.record_event(
            connection,
            type="maintenance.updated",
            record=updated.record,
            created=at,
            cause=cause,
            previous=updated.previous,
        )
    return updated.record


async def update_window(ctx: RequestContext) -> ApiResponse:
    """PATCH /maintenance-windows/:id: only the fields sent change; ``monitors`` replaces
    the list; a new schedule replaces the occurrences ahead; metadata merges."""
    window_id = path_id(ctx, RESOURCE)
    body = validate(WindowUpdate, ctx.json_object())
    if body.monitors is not None:
        await _own_resources(ctx, body.monitors)
    recurring = None
    if body.recurrence is not None:
        recurring = await _checked_schedule(
            body.starts_at, body.ends_at, as_stored(body.recurrence)
        )

    def apply(current: windows.WindowRecord) -> dict[str, Any]:
        changes = patch_changes(
            body, current, nullable=frozenset({"description"}), skip=_SCHEDULE | {"monitors"}
        )
        if body.monitors is not None:
            monitors = list(dict.fromkeys(body.monitors))
            if monitors != current.monitors:
                changes["monitors"] = monitors
        return {**changes, **_schedule_changes(body, current, recurring)}

    at = now()
    record = await ctx.deps.db.transaction(_update, ctx.account_id, window_id, apply, at, ctx.cause)
    if record is None:
        raise not_found(RESOURCE, window_id)
    return ApiResponse(200, window_object(record, at=at))


async def _delete(
    connection: Connection, account_id: str, window_id: str, at: int, cause: EventCause
) -> bool:
    record = await windows.get_window(connection, account_id, window_id, for_update=True)
    if record is None:
        return False
    await windows.delete_window(connection, account_id, window_id, at)
    # what it held back is held no longer; a pause it made ends
    await window_walk.release_window(connection, window_id, record.monitors, at)
    if record.pause_checks:
        await notify.notify_resources(connection, record.monitors)
    await events.record_event(
        connection, type="maintenance.deleted", record=record, created=at, cause=cause
    )
    return True


async def delete_window(ctx: RequestContext) -> ApiResponse:
    """DELETE /maintenance-windows/:id: 204; its occurrences are gone with it, what it
    held back opens its incident and alert now (``store.window_walk.release_window``)
    and a pause it made ends."""
    window_id = path_id(ctx, RESOURCE)
    if not await ctx.deps.db.transaction(_delete, ctx.account_id, window_id, now(), ctx.cause):
        raise not_found(RESOURCE, window_id)
    return ApiResponse(204)


async def _act(
    connection: Connection,
    account_id: str,
    window_id: str,
    at: int,
    cause: EventCause,
    *,
    action: Callable[..., Any],
    event: str,
) -> windows.WindowRecord | None:
    before = await windows.get_window(connection, account_id, window_id, for_update=True)
    if before is None:
        return None
    record: windows.WindowRecord = await action(connection, account_id, window_id, at)
    changed = ("ended_at", "canceled_at", "updated")
    previous = {k: getattr(before, k) for k in changed if getattr(before, k) != getattr(record, k)}
    await events.record_event(
        connection, type=event, record=record, created=at, cause=cause, previous=previous
    )
    return record


async def _act_on(
    ctx: RequestContext, action: Callable[..., Any], event: str, refusal: ApiError
) -> ApiResponse:
    """End or cancel: ``action`` (:func:`store.windows.end_window` or
    ``cancel_window``) with its ``event`` in one transaction; 200 with the window, or
    ``refusal`` when the store refuses (:class:`store.windows.WindowNotInProgress`,
    :class:`store.windows.NothingToCancel`)."""
    window_id = path_id(ctx, RESOURCE)
    ctx.json_body(EmptyBody, optional=True)
    at = now()
    try:
        record = await ctx.deps.db.transaction(
            _act, ctx.account_id, window_id, at, ctx.cause, action=action, event=event
        )
    except (windows.WindowNotInProgress, windows.NothingToCancel):
        raise refusal from None
    if record is None:
        raise not_found(RESOURCE, window_id)
    return ApiResponse(200, window_object(record, at=at))


async def end_window(ctx: RequestContext) -> ApiResponse:
    """POST /maintenance-windows/:id/end: the occurrence open now ends now (later ones
    stay); 400 ``maintenance_not_in_progress`` when none is open."""
    refusal = ApiError(
        "maintenance_not_in_progress",
        "this maintenance window has no occurrence in progress to end (see its status and "
        "next_window)",
    )
    return await _act_on(ctx, windows.end_window, "maintenance.updated", refusal)


async def cancel_window(ctx: RequestContext) -> ApiResponse:
    """POST /maintenance-windows/:id/cancel: every occurrence that starts later is
    dropped (one open now runs on: end it with ``end``); 400
    ``maintenance_not_cancelable`` when it is canceled already or nothing starts later."""
    refusal = ApiError(
        "maintenance_not_cancelable",
        "this maintenance window is canceled already, or no occurrence of it starts later: "
        "nothing is left to cancel",
    )
    return await _act_on(ctx, windows.cancel_window, "maintenance.canceled", refusal)


_PATH = "/maintenance-windows"

RESOURCE = Resource(
    path=_PATH,
    noun="maintenance window",
    prefix="mnt",
    permission="maintenance",
    tag="Maintenance windows",
    description=(
        "Planned work: one-off or recurring windows during which the monitors and "
        "heartbeats they cover raise no incident or alert, count apart in availability, "
        "and may pause. Titles, descriptions and times are public on status pages."
    ),
    routes=(
        *crud_routes(
            path=_PATH,
            permission="maintenance",
            singular="maintenance_window",
            plural="maintenance_windows",
            prefix="mnt",
            handlers=(list_windows, create_window, get_window, update_window, delete_window),
            models=(WindowList, WindowCreate, WindowObject, WindowUpdate),
            noun="maintenance window",
            sorts=("created", "updated", "title"),
            list_query=(("monitor", "string", "Filter: windows covering this mon_ or hbt_ id."),),
            list_schema={"monitor": {"pattern": f"^{MONITOR_PATTERN.pattern}$"}},
        ),
        Route(
            name="end_maintenance_window",
            method="POST",
            path=f"{_PATH}/<id>/end",
            handler=end_window,
            permission="maintenance.update",
            summary="End the occurrence in progress now",
            response_model=WindowObject,
        ),
        Route(
            name="cancel_maintenance_window",
            method="POST",
            path=f"{_PATH}/<id>/cancel",
            handler=cancel_window,
            permission="maintenance.update",
            summary="Cancel every later occurrence",
            response_model=WindowObject,
        ),
    ),
)
"""The maintenance windows resource (permissions ``maintenance.*``)."""
