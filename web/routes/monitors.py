"""Monitor endpoints (docs/api.md, docs/checks.md): create, read, list, update, delete,
pause, resume (the checks and availability: :mod:`web.routes.history`).

Each mutation commits first, then tells the engine and waits for its acknowledgement,
then responds (README, "How it is built": writes), so a 2xx means both stored and in
effect.

Rules decided here (docs/api.md, "Conventions and decisions"): ``method`` and
``expected_status_code`` default to GET and 200 for http monitors and are null for the
other types (sending a non-null value for a non-http monitor is a 422); ``url`` must fit
the type (``engine.targets``) and pass the target policy (``engine.policy``: 422
``target_not_allowed``, checked at create and whenever a PATCH sends ``url``);
``timeout_seconds`` may not exceed ``interval_seconds``, checked on the values the
monitor ends up with.

The http fields (docs/checks.md, "Assertions and TLS expiry"):
``request_headers`` and ``assertions`` are ``{}`` and ``[]`` on http monitors (null sent
in a PATCH empties them), ``request_body`` a string or null; ``tls_expiry_days``
defaults to 14 for https urls and null for http ones, and a PATCH that moves ``url`` to
the other scheme without sending ``tls_expiry_days`` gives it the new scheme's default.
``tls_verify`` (default true; a PATCH may not set it to null) and ``tls_ca_bundle``
(default null) are kept when ``url`` changes scheme: they apply to every https
connection of a check, an http url's redirects to https included (docs/checks.md, "Private
certificate authorities"). All six are null on the other types (a non-null value is a
422 ``invalid_value``).

Regions: :mod:`web.routes.monitor_regions`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, get_args

from engine import PROBE_TYPES, InvalidTarget, TargetPolicy, http_fields_apply, parse_target
from store import MonitorRecord, PageRequest, dependencies, monitors, new_id

from ..api.common import list_object, merge_metadata
from ..api.http_checks import stored_assertions
from ..api.monitors import (
    MonitorCreate,
    MonitorList,
    MonitorObject,
    MonitorStatus,
    MonitorUpdate,
    monitor_object,
)
from ..http.errors import ApiError
from ..http.params import choice, parse_list_query, text
from ..http.pipeline import ApiResponse, PlannedRead, RequestContext, Route
from ..http.validation import validate
from .common import (
    PAGE_QUERY,
    delete_owned,
    get_owned,
    move_owned,
    not_found,
    now,
    owned_read,
    patch_changes,
    path_id,
)
from .escalation_policies import own_policy
from .monitor_regions import REGION_FIELDS, region_changes, region_settings
from .resource import Resource

_HTTP_ONLY = (
    "method",
    "expected_status_code",
    "request_headers",
    "request_body",
    "assertions",
    "tls_expiry_days",
    "tls_verify",
    "tls_ca_bundle",
)
_HTTP_NULLABLE = frozenset(
    {"request_headers", "request_body", "assertions", "tls_expiry_days", "tls_ca_bundle"}
)
"""http fields a PATCH may set to null (``request_headers`` and ``assertions`` are then
emptied; ``tls_verify`` may not be)."""
_NULLABLE = frozenset({"escalation_policy"})
"""Fields of every type a PATCH may set to null (docs/alerts.md: no policy of its own)."""


def check_target(type: str, url: str) -> None:
    """Raise 422 ``invalid_url`` unless ``url`` fits monitor ``type``."""
    try:
        parse_target(type, url)
    except InvalidTarget as exc:
        raise ApiError("invalid_url", str(exc), param="url") from None


async def check_target_policy(policy: TargetPolicy, type: str, url: str) -> None:
    """Raise 422 ``target_not_allowed`` when the target policy refuses ``url``
    (:mod:`engine.policy`: metadata addresses always, private ones with
    ``--deny-private-targets``; a host name may be resolved, for at most the policy's
    ``resolve_timeout_seconds``). A ``url`` that does not parse is left to
    :func:`check_target`."""
    try:
        target = parse_target(type, url)
    except InvalidTarget:
        return
    reason = await policy.check_target(target)
    if reason is not None:
        raise ApiError("target_not_allowed", f"url is not allowed: {reason}", param="url")


def check_timeout(interval_seconds: int, timeout_seconds: int) -> None:
    """Raise 422 ``timeout_exceeds_interval`` when a check could outlast its interval."""
    if timeout_seconds > interval_seconds:
        raise ApiError(
            "timeout_exceeds_interval",
            f"timeout_seconds ({timeout_seconds}) may not exceed interval_seconds "
            f"({interval_seconds})",
            param="timeout_seconds",
        )


def check_http_only(type: str, values: dict[str, Any]) -> None:
    """Raise 422 ``invalid_value`` when an http field (`_HTTP_ONLY`) is set on a monitor
    of a type they do not apply to (`engine.http_fields_apply`)."""
    if http_fields_apply(type):
        return
    for name in _HTTP_ONLY:
        if values.get(name) is not None:
            raise ApiError("invalid_value", f"{name} applies to http monitors only", param=name)


async def create_monitor(ctx: RequestContext) -> ApiResponse:
    """POST /monitors: 201 with the new monitor, status ``pending`` (docs/checks.md, "Up
    and down")."""
    body = ctx.json_body(MonitorCreate)
    check_http_only(body.type, body.model_dump())
    check_timeout(body.interval_seconds, body.timeout_seconds)
    check_target(body.type, body.url)
    await check_target_policy(ctx.deps.target_policy, body.type, body.url)
    await own_policy(ctx, body.escalation_policy)
    regions, region_quorum = region_settings(body.regions, body.region_quorum)
    created = now()
    is_http = http_fields_apply(body.type)
    values = {
        "id": new_id(RESOURCE.prefix),
        "account_id": ctx.account_id,
        "name": body.name,
        "url": body.url,
        "type": body.type,
        "status": "pending",
        "interval_seconds": body.interval_seconds,
        "timeout_seconds": body.timeout_seconds,
        "method": (body.method or "GET") if is_http else None,
        "expected_status_code": (body.expected_status_code or 200) if is_http else None,
        "failure_threshold": body.failure_threshold,
        "success_threshold": body.success_threshold,
        "auto_incidents": body.auto_incidents,
        "incident_severity": body.incident_severity,
        "request_headers": (body.request_headers or {}) if is_http else None,
        "request_body": body.request_body,
        "assertions": stored_assertions(body.assertions) if is_http else None,
        "tls_expiry_days": (
            body.tls_expiry_days
            if "tls_expiry_days" in body.model_fields_set
            else default_tls_expiry_days(body.url)
        )
        if is_http
        else None,
        "tls_verify": body.tls_verify is not False if is_http else None,
        "tls_ca_bundle": body.tls_ca_bundle,
        "escalation_policy": body.escalation_policy,
        "depends_on": list(dict.fromkeys(body.depends_on)),
        "regions": regions,
        "region_quorum": region_quorum,
        "created": created,
        "updated": created,
        "metadata": merge_metadata({}, body.metadata),
    }
    with _dependency_errors(body.depends_on):
        record = await ctx.deps.db.transaction(monitors.insert_monitor, values, ctx.cause)
    await ctx.deps.apply(record.id, record)
    return ApiResponse(201, monitor_object(record))


async def get_monitor(ctx: RequestContext) -> ApiResponse:
    """GET /monitors/:id."""
    return await get_owned(
        ctx, RESOURCE, monitors.get_monitor, monitor_object, monitors.get_monitor_with_token
    )


def _get_read(ctx: RequestContext) -> PlannedRead:
    """The read of ``GET /monitors/:id`` (its route's ``prefetch``).

    Raises:
        ApiError: 404 ``resource_missing`` for a path id that is no monitor's.
    """
    return owned_read(ctx, RESOURCE, monitors.get_monitor, monitors.get_monitor_with_token)


async def list_monitors(ctx: RequestContext) -> ApiResponse:
    """GET /monitors: a page, filtered by status, type and a name search."""
    page = await ctx.read(_list_read(ctx))
    return ApiResponse(200, list_object("/monitors", page.items, page.has_more, monitor_object))


def _list_read(ctx: RequestContext) -> PlannedRead:
    """The read of ``GET /monitors`` (its route's ``prefetch``).

    Raises:
        ApiError: 400 for a query parameter out of its range (:mod:`web.http.params`).
    """
    query = parse_list_query(
        ctx.query,
        prefix=RESOURCE.prefix,
        sorts=("created", "updated", "name"),
        filters={
            "status": choice("up", "down", "pending", "paused"),
            "type": choice(*PROBE_TYPES),
            "search": text(200),
        },
    )
    first = query.page.starting_after is None and query.page.ending_before is None
    return PlannedRead(
        monitors.list_monitors,
        (query.page,),
        query.filters,
        with_token=monitors.list_monitors_with_token if first else None,
    )


async def update_monitor(ctx: RequestContext) -> ApiResponse:
    """PATCH /monitors/:id: only the fields sent change; metadata merges; ``type`` may
    not change (422 ``parameter_immutable``)."""
    monitor_id = path_id(ctx, RESOURCE)
    data = ctx.json_object()
    if "type" in data:
        raise ApiError(
            "parameter_immutable",
            "type cannot change; create a new monitor instead",
            param="type",
        )
    body = validate(MonitorUpdate, data)
    await own_policy(ctx, body.escalation_policy)
    if body.url is not None:  # the policy may resolve names: not inside the transaction
        current = await ctx.deps.db.run(monitors.get_monitor, ctx.account_id, monitor_id)
        if current is not None:
            await check_target_policy(ctx.deps.target_policy, current.type, body.url)

    def apply(current: MonitorRecord) -> dict[str, Any]:
        is_http = http_fields_apply(current.type)
        changes = patch_changes(
            body,
            current,
            nullable=(_HTTP_NULLABLE if is_http else frozenset(_HTTP_ONLY)) | _NULLABLE,
            skip=REGION_FIELDS,
        )
        region_changes(body, current, changes)
        check_http_only(current.type, changes)
        if is_http:
            _http_changes(body, current, changes)
        check_timeout(
            changes.get("interval_seconds", current.interval_seconds),
            changes.get("timeout_seconds", current.timeout_seconds),
        )
        if "url" in changes:
            check_target(current.type, changes["url"])
        if "depends_on" in changes:
            changes["depends_on"] = list(dict.fromkeys(changes["depends_on"]))
            if changes["depends_on"] == current.depends_on:
                del changes["depends_on"]
        return changes

    with _dependency_errors(body.depends_on or []):
        record = await ctx.deps.db.transaction(
            monitors.update_monitor, ctx.account_id, monitor_id, apply, now(), ctx.cause
        )
    if record is None:
        raise not_found(RESOURCE, monitor_id)
    await ctx.deps.apply(record.id, record)
    return ApiResponse(200, monitor_object(record))


@contextmanager
def _dependency_errors(sent: list[str]) -> Iterator[None]:
    """Turn the store's refusals of a ``depends_on`` (``sent``: as the request sent it)
    into the API's 422s, ``param`` naming the offending item (``depends_on[2]``):
    ``unknown_monitor`` for an id that is no monitor of the account, ``dependency_cycle``
    for the parent through which the monitor would depend on itself (docs/incidents.md,
    "Dependencies")."""
    try:
        yield
    except dependencies.UnknownDependency as exc:
        raise ApiError(
            "unknown_monitor",
            f"no such monitor: {exc.monitor_id[:80]!r}",
            param=f"depends_on[{sent.index(exc.monitor_id)}]",
        ) from None
    except dependencies.DependencyCycle as exc:
        index = sent.index(exc.parent)
        raise ApiError(
            "dependency_cycle",
            f"depends_on[{index}] ({exc.parent}) would make the monitor depend on itself",
            param=f"depends_on[{index}]",
        ) from None


def default_tls_expiry_days(url: str) -> int | None:
    """``tls_expiry_days`` when none is sent: 14 for an https url, None for http
    (docs/checks.md, "Assertions and TLS expiry")."""
    return 14 if url[:6].lower() == "https:" else None


def _http_changes(body: MonitorUpdate, current: MonitorRecord, changes: dict[str, Any]) -> None:
    """Complete ``changes`` (from `patch_changes`) for the http fields of part 7: null
    empties ``request_headers`` and ``assertions``, assertions are stored as dicts, and a
    ``url`` moving to the other scheme brings that scheme's ``tls_expiry_days`` default
    unless the PATCH sends one (module docstring)."""
    stored: dict[str, Any] = {}
    if "request_headers" in changes:
        stored["request_headers"] = changes["request_headers"] or {}
    if "assertions" in changes:
        stored["assertions"] = stored_assertions(changes["assertions"])
    if "url" in changes and "tls_expiry_days" not in body.model_fields_set:
        old, new = default_tls_expiry_days(current.url), default_tls_expiry_days(changes["url"])
        if old != new:
            stored["tls_expiry_days"] = new
    for name, value in stored.items():
        if value == getattr(current, name):
            changes.pop(name, None)
        else:
            changes[name] = value


async def delete_monitor(ctx: RequestContext) -> ApiResponse:
    """DELETE /monitors/:id: 204; the monitor, its checks and history are gone for good."""
    monitor_id = await delete_owned(ctx, RESOURCE, monitors.delete_monitor)
    await ctx.deps.apply(monitor_id, None)
    return ApiResponse(204)


async def pause_monitor(ctx: RequestContext) -> ApiResponse:
    """POST /monitors/:id/pause: status ``paused``, checks stop; on a paused monitor a
    no-op 200 (docs/api.md, "Conventions and decisions")."""
    return await move_owned(ctx, RESOURCE, monitors.pause_monitor, monitor_object)


async def resume_monitor(ctx: RequestContext) -> ApiResponse:
    """POST /monitors/:id/resume: status ``pending``, checks resume; on a monitor that is
    not paused a no-op 200 (docs/api.md, "Conventions and decisions")."""
    return await move_owned(ctx, RESOURCE, monitors.resume_monitor, monitor_object)


RESOURCE = Resource(
    path="/monitors",
    noun="monitor",
    prefix="mon",
    permission="monitors",
    tag="Monitors",
    description=(
        "Monitors check a target (an http(s) URL, a TCP port, a DNS name or a host to ping) "
        "every `interval_seconds`; each check is kept, and a monitor moves between `up` and "
        "`down` after `failure_threshold` or `success_threshold` checks in a row."
    ),
    routes=(
        Route(
            name="list_monitors",
            method="GET",
            path="/monitors",
            handler=list_monitors,
            prefetch=_list_read,
            permission="monitors.read",
            summary="List monitors",
            response_model=MonitorList,
            cursor="mon",
            query=(
                *PAGE_QUERY,
                ("status", "string", "Filter: up, down, pending, paused."),
                ("type", "string", "Filter: http, tcp, dns, ping."),
                ("search", "string", "Case-insensitive substring of the name."),
                ("sort", "string", "created, updated or name; leading - for descending."),
            ),
            query_schema={
                "status": {"enum": list(get_args(MonitorStatus))},
                "type": {"enum": list(PROBE_TYPES)},
                "search": {"minLength": 1, "maxLength": 200},
                "sort": {"pattern": "^-?(created|updated|name)$"},
            },
        ),
        Route(
            name="create_monitor",
            method="POST",
            path="/monitors",
            handler=create_monitor,
            permission="monitors.create",
            summary="Create a monitor",
            success_status=201,
            request_model=MonitorCreate,
            response_model=MonitorObject,
            links=(
                "get_monitor",
                "update_monitor",
                "delete_monitor",
                "pause_monitor",
                "resume_monitor",
                "list_checks",
            ),
        ),
        Route(
            name="get_monitor",
            method="GET",
            path="/monitors/<id>",
            handler=get_monitor,
            prefetch=_get_read,
            permission="monitors.read",
            summary="Retrieve a monitor",
            response_model=MonitorObject,
        ),
        Route(
            name="update_monitor",
            method="PATCH",
            path="/monitors/<id>",
            handler=update_monitor,
            permission="monitors.update",
            summary="Update a monitor",
            request_model=MonitorUpdate,
            response_model=MonitorObject,
        ),
        Route(
            name="delete_monitor",
            method="DELETE",
            path="/monitors/<id>",
            handler=delete_monitor,
            permission="monitors.delete",
            summary="Delete a monitor",
            success_status=204,
        ),
        Route(
            name="pause_monitor",
            method="POST",
            path="/monitors/<id>/pause",
            handler=pause_monitor,
            permission="monitors.update",
            summary="Pause a monitor",
            response_model=MonitorObject,
        ),
        Route(
            name="resume_monitor",
            method="POST",
            path="/monitors/<id>/resume",
            handler=resume_monitor,
            permission="monitors.update",
            summary="Resume a monitor",
            response_model=MonitorObject,
        ),
    ),
)
"""The monitors resource (its history's endpoints: :mod:`web.routes.history`)."""

__all__ = ["RESOURCE", "PageRequest"]
