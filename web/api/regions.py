"""The region's object (docs/several-nodes.md, Regions): a region the service's nodes run
in, with its live nodes. Read-only: a region exists once a node of it registered (``uptrio
serve --region``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from store.regions import RegionRecord

from .common import ListObject
from .shaping import shaper


class RegionNodeObject(BaseModel):
    """A live node of a region: one `uptrio serve` renewing its leases."""

    name: str = Field(description="The node's name (`--node-name`).")
    started: int = Field(description="When the node started, epoch seconds.")
    renewed_at: int = Field(description="Its latest lease renewal, epoch seconds.")


class RegionObject(BaseModel):
    """A region: where its nodes probe from. Monitors listing it in `regions` are probed
    by exactly one of its live nodes on every interval; with no live node, the region
    probes nothing (its view is unknown)."""

    object: Literal["region"]
    name: str = Field(pattern=r"^[a-z0-9-]{1,32}$", description="The region (`--region`).")
    nodes: list[RegionNodeObject] = Field(description="Its live nodes, by name; may be empty.")


class RegionList(ListObject):
    """Every region, by name (never more than one page)."""

    data: list[RegionObject]


region_object = shaper(RegionObject, RegionRecord)
"""A :class:`store.regions.RegionRecord` as the API's region object."""
