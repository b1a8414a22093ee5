"""Region endpoints (docs/several-nodes.md, Regions): ``GET /regions`` lists the regions the
service's nodes run in, with their live nodes. Regions are the service's, not an account's
(every account sees the same list), so there is no create, update, delete or single-object
read; reading them takes ``monitors.read`` (they are what a monitor's ``regions`` name)."""

from __future__ import annotations

from store import regions

from ..api.common import list_object
from ..api.regions import RegionList, region_object
from ..http.pipeline import ApiResponse, RequestContext, Route
from .resource import Resource


async def list_regions(ctx: RequestContext) -> ApiResponse:
    """GET /regions: every region, by name, in one page (``has_more`` false)."""
    found = await ctx.deps.db.run(regions.list_regions)
    return ApiResponse(200, list_object("/regions", found, False, region_object))


RESOURCE = Resource(
    path="/regions",
    noun="region",
    prefix="",  # a region is known by its name: no id
    permission=None,
    tag="Regions",
    description=(
        "Regions: where the service's nodes probe from (`uptrio serve --region`), each with "
        "its live nodes."
    ),
    routes=(
        Route(
            name="list_regions",
            method="GET",
            path="/regions",
            handler=list_regions,
            permission="monitors.read",
            summary="List the regions and their live nodes",
            response_model=RegionList,
        ),
    ),
)
"""The regions resource."""
