"""Request and response bodies of the status page endpoints (docs/status-pages.md, "API"),
in the style of :mod:`web.api.common` (strict requests, unknown fields refused).

Rules (docs/status-pages.md, "API"): ``slug`` is 3 to 60 characters of ``a-z``,
``0-9`` and ``-``, neither starting nor ending with a hyphen (422 ``invalid_slug``);
``name`` 1 to 200 characters; ``description`` at most 10,000 or null; ``components`` at
most 100, each ``{"monitor": "mon_...", "name": 1-200 characters, "group": at most 200
characters or null}`` (the monitor must be the account's own: 422 ``unknown_monitor``,
checked by the route). A monitor may appear in several components.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from store import StatusPageRecord

from .common import PATCH, REQUEST, Absent, Description, ListObject, Metadata, MonitorId, Name
from .shaping import shaper

__all__ = [
    "MAX_COMPONENTS",
    "SLUG_PATTERN",
    "ComponentIn",
    "StatusPageCreate",
    "StatusPageList",
    "StatusPageObject",
    "StatusPageUpdate",
    "status_page_object",
    "valid_slug",
]

MAX_COMPONENTS = 100
SLUG_PATTERN = r"^[a-z0-9][a-z0-9-]{1,58}[a-z0-9]$"
"""3 to 60 of ``a-z 0-9 -``, no leading or trailing hyphen (migration 0005 checks the same)."""
_SLUG = re.compile(SLUG_PATTERN)


def valid_slug(value: str) -> bool:
    """Whether ``value`` is a well-formed slug (:data:`SLUG_PATTERN`)."""
    return _SLUG.fullmatch(value) is not None


def _check_slug(value: str) -> str:
    if not valid_slug(value):
        raise PydanticCustomError(
            "invalid_slug",
            "slug must be 3 to 60 characters of a-z, 0-9 and -, neither starting nor ending with -",
        )
    return value


Slug = Annotated[
    str,
    AfterValidator(_check_slug),
    Field(
        description="Public address /status/<slug>; unique over the service.",
        json_schema_extra={"pattern": SLUG_PATTERN, "minLength": 3, "maxLength": 60},
    ),
]
GroupName = Annotated[str, Field(min_length=1, max_length=200)]


class ComponentIn(BaseModel):
    """One component: a monitor of the account shown under a public display name,
    optionally in a group."""

    model_config = ConfigDict(strict=True, extra="forbid")

    monitor: MonitorId
    name: Name
    group: GroupName | None = None


Components = Annotated[
    list[ComponentIn],
    Field(max_length=MAX_COMPONENTS, description="At most 100; shown in this order."),
]


class StatusPageCreate(BaseModel):
    """The body of `POST /status-pages`."""

    model_config = REQUEST

    name: Name
    slug: Slug
    description: Description | None = None
    components: Components = Field(default_factory=list)
    metadata: Metadata = Field(default_factory=dict)


class StatusPageUpdate(BaseModel):
    """The body of `PATCH /status-pages/{id}`: only the fields to change;
    `components` replaces the whole list; `metadata` is merged key by key; `description`
    may be null."""

    model_config = PATCH

    name: Name | Absent = None
    slug: Slug | Absent = None
    description: Description | None = None
    components: Components | Absent = None
    metadata: Metadata | Absent = None


class ComponentObject(BaseModel):
    """A component as the API shows it."""

    monitor: str
    name: str
    group: str | None


class StatusPageObject(BaseModel):
    """A status page, public at `/status/<slug>`."""

    id: str = Field(pattern=r"^stp_[a-z0-9]+$")
    object: Literal["status_page"]
    name: str
    slug: str
    description: str | None
    components: list[ComponentObject]
    created: int
    updated: int
    metadata: dict[str, str]


status_page_object = shaper(StatusPageObject, StatusPageRecord)
"""A status page as the API shows it (each component ``{"monitor", "name", "group"}``)."""


class StatusPageList(ListObject):
    """A page of status pages."""

    data: list[StatusPageObject]
