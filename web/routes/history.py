"""A monitor's history (docs/history.md): ``GET /monitors/:id/checks`` with its filters,
and ``GET /monitors/:id/availability``.

Parameters are checked before any query: unknown names, repeated ones, malformed
integers, a ``status`` other than ``up``/``down``, a ``region`` that is no region's name,
``end`` not after ``start``, a range over 400 days and a ``granularity`` other than
``hour``/``day`` are 400s naming the parameter (docs/api.md, "Error codes": 400 or 422).
``region`` (docs/regions.md) keeps the checks of that region's nodes, and answers the
availability of that region's view instead of the monitor's quorum status.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from store import Connection, checks, history, monitors

from ..api.common import list_object
from ..api.history import AvailabilityObject, CheckList, availability_object, check_object
from ..http.errors import ApiError
from ..http.params import EPOCH, check_names, choice, parse_time_list, region_name, single
from ..http.pipeline import ApiResponse, RequestContext, Route
from .common import CREATED_QUERY, PAGE_QUERY, not_found, path_id
from .monitors import RESOURCE as MONITORS

__all__ = ["RESOURCE"]

DEFAULT_RANGE_SECONDS = 30 * 86_400
"""The range when neither ``start`` nor ``end`` is given: the last 30 days."""
MAX_RANGE_SECONDS = 400 * 86_400
_STATUS = choice("up", "down")
_GRANULARITY = choice("hour", "day")


def _epoch(ctx: RequestContext, name: str) -> int | None:
    raw = single(ctx.query, name)
    return None if raw is None else EPOCH(name, raw)


async def _checks_page(
    connection: Connection,
    account_id: str,
    monitor_id: str,
    limit: int,
    after: str | None,
    before: str | None,
    filters: checks.CheckFilter,
) -> tuple[list[Any], bool] | None:
    if await monitors.get_monitor(connection, account_id, monitor_id) is None:
        return None
    return await checks.list_checks(
        connection,
        monitor_id,
        limit=limit,
        starting_after=after,
        ending_before=before,
        filters=filters,
    )


async def list_checks(ctx: RequestContext) -> ApiResponse:
    """GET /monitors/:id/checks: the monitor's checks, newest first (docs/checks.md, "The
    checks of a monitor"), filtered by ``status`` and ``created[gt|gte|lt|lte]``
    (docs/history.md, "Raw checks")."""
    monitor_id = path_id(ctx, RESOURCE)
    query = parse_time_list(ctx.query, prefix="chk", filters=("status", "region"))
    raw_status, raw_region = query.filters.get("status"), query.filters.get("region")
    filters = checks.CheckFilter(
        status=None if raw_status is None else _STATUS("status", raw_status),
        region=None if raw_region is None else region_name("region", raw_region),
        created_gt=query.created_gt,
        created_gte=query.created_gte,
        created_lt=query.created_lt,
        created_lte=query.created_lte,
    )
    limit, after, before = query.limit, query.starting_after, query.ending_before
    found = await ctx.deps.db.run(
        _checks_page, ctx.account_id, monitor_id, limit, after, before, filters
    )
    if found is None:
        raise not_found(RESOURCE, monitor_id)
    items, has_more = found
    return ApiResponse(
        200, list_object(f"/monitors/{monitor_id}/checks", items, has_more, check_object)
    )


async def _availability(
    connection: Connection,
    account_id: str,
    monitor_id: str,
    windows: list[history.Window],
    cutoffs: dict[str, int],
    region: str | None,
) -> tuple[history.Availability, list[history.Availability]] | None:
    if await monitors.get_monitor(connection, account_id, monitor_id) is None:
        return None
    return await history.availability(connection, monitor_id, windows, **cutoffs, region=region)


async def get_availability(ctx: RequestContext) -> ApiResponse:
    """GET /monitors/:id/availability (docs/history.md, "Availability"): uptime, status seconds
    (maintenance time apart: ``maintenance_seconds``), checks and response times over
    ``[start, end)`` (default the last 30 days, at most 400), with an hourly or daily
    ``series`` when ``granularity`` is given."""
    monitor_id = path_id(ctx, RESOURCE)
    check_names(ctx.query, ("start", "end", "granularity", "region"))
    raw_region = single(ctx.query, "region")
    region = None if raw_region is None else region_name("region", raw_region)
    now = int(ctx.deps.clock())
    start, end = _epoch(ctx, "start"), _epoch(ctx, "end")
    if end is None:
        end = now
    if start is None:
        start = end - DEFAULT_RANGE_SECONDS
    if end <= start:
        raise ApiError("invalid_parameter", "end must be after start", param="end")
    if end - start > MAX_RANGE_SECONDS:
        raise ApiError("invalid_parameter", "the range is at most 400 days", param="end")
    raw = single(ctx.query, "granularity")
    granularity = None if raw is None else _GRANULARITY("granularity", raw)
    windows = (
        [history.Window(start, end)]
        if granularity is None
        else history.series_windows(start, end, granularity)
    )
    retention = ctx.deps.history
    cutoffs = {
        "now": now,
        "rollup_cutoff": now - int(retention.rollup_retention_days * 86_400),
        "check_cutoff": now - int(retention.check_retention_days * 86_400),
    }
    found = await ctx.deps.db.run(
        _availability, ctx.account_id, monitor_id, windows, cutoffs, region
    )
    if found is None:
        raise not_found(RESOURCE, monitor_id)
    whole, parts = found
    series = None if granularity is None else parts
    return ApiResponse(200, availability_object(whole, monitor_id=monitor_id, parts=series))


RESOURCE = replace(
    MONITORS,
    routes=(
        Route(
            name="list_checks",
            method="GET",
            path="/monitors/<id>/checks",
            handler=list_checks,
            permission="monitors.read",
            summary="List a monitor's checks, newest first",
            response_model=CheckList,
            cursor="chk",
            query=(
                *PAGE_QUERY,
                ("status", "string", "Filter: up or down."),
                ("region", "string", "Filter: the checks of one region's nodes."),
                *CREATED_QUERY,
            ),
        ),
        Route(
            name="get_availability",
            method="GET",
            path="/monitors/<id>/availability",
            handler=get_availability,
            permission="monitors.read",
            summary="A monitor's availability and response times over a range",
            response_model=AvailabilityObject,
            query=(
                ("start", "integer", "Epoch seconds; default end - 30 days."),
                (
                    "end",
                    "integer",
                    "Epoch seconds, after start, at most 400 days later; default now.",
                ),
                ("granularity", "string", "hour or day: adds a series."),
                ("region", "string", "One region's view instead of the quorum status."),
            ),
            query_schema={"granularity": {"enum": ["hour", "day"]}},
        ),
    ),
)
"""The history endpoints: part of the monitors resource."""
