"""Request and response bodies of the members endpoints (docs/alerts.md, "Members"), in
the style of :mod:`web.api.common` (strict requests, unknown fields refused).

Rules (docs/alerts.md): ``name`` 1 to 100 characters; ``email`` an address
``email-validator`` accepts (syntax only, no DNS look-up; stored normalized: the domain
lower-cased) or null; ``time_zone`` an IANA name :mod:`zoneinfo` knows (default ``UTC``);
``contact_channels`` at most 10 ``nch_`` ids, in the order they are tried, without
duplicates (each must be a channel of the account: 422 ``unknown_channel``, checked by
the route).
"""

from __future__ import annotations

import zoneinfo
from typing import Annotated, Literal

from email_validator import EmailNotValidError, validate_email
from pydantic import AfterValidator, BaseModel, Field
from pydantic_core import PydanticCustomError

from store import MemberRecord

from .common import PATCH, REQUEST, Absent, ListObject, Metadata
from .shaping import shaper

__all__ = [
    "MAX_CONTACT_CHANNELS",
    "ChannelId",
    "MemberCreate",
    "MemberList",
    "MemberObject",
    "MemberUpdate",
    "TimeZone",
    "member_object",
]

MAX_CONTACT_CHANNELS = 10

ChannelId = Annotated[str, Field(pattern=r"^nch_[a-z0-9]{1,64}$")]
MemberName = Annotated[str, Field(min_length=1, max_length=100)]


def _check_email(value: str) -> str:
    try:
        return validate_email(value, check_deliverability=False).normalized
    except EmailNotValidError as exc:
        raise PydanticCustomError("invalid_email", f"email is not an address: {exc}") from None


def _check_time_zone(value: str) -> str:
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):  # "Europe": a directory
        raise PydanticCustomError(
            "invalid_time_zone",
            f"time_zone: {value[:80]!r} is no IANA time zone (such as Europe/Paris or UTC)",
        ) from None
    return value


def _check_channels(value: list[str]) -> list[str]:
    if len(set(value)) != len(value):
        raise PydanticCustomError("invalid_value", "contact_channels names a channel twice")
    return value


Email = Annotated[
    str,
    Field(max_length=254, description="An email address (normalized), or null."),
    AfterValidator(_check_email),
]
TimeZone = Annotated[
    str,
    Field(min_length=1, max_length=64, description="An IANA time zone name."),
    AfterValidator(_check_time_zone),
]
ContactChannels = Annotated[
    list[ChannelId],
    Field(
        max_length=MAX_CONTACT_CHANNELS,
        description="Notification channels (nch_ ids), in the order they are tried; at most 10.",
    ),
    AfterValidator(_check_channels),
]


class MemberCreate(BaseModel):
    """The body of `POST /members`."""

    model_config = REQUEST

    name: MemberName
    email: Email | None = None
    time_zone: TimeZone = "UTC"
    contact_channels: ContactChannels = Field(default_factory=list)
    metadata: Metadata = Field(default_factory=dict)


class MemberUpdate(BaseModel):
    """The body of `PATCH /members/{id}`: only the fields to change; `contact_channels`
    replaces the list; `metadata` is merged key by key; `email` may be null."""

    model_config = PATCH

    name: MemberName | Absent = None
    email: Email | None = None
    time_zone: TimeZone | Absent = None
    contact_channels: ContactChannels | Absent = None
    metadata: Metadata | Absent = None


class MemberObject(BaseModel):
    """A member: someone who can be paged, on their contact channels in order."""

    id: str = Field(pattern=r"^mbr_[a-z0-9]+$")
    object: Literal["member"]
    name: str
    email: str | None
    time_zone: str
    contact_channels: list[str]
    created: int
    updated: int
    metadata: dict[str, str]


member_object = shaper(MemberObject, MemberRecord)
"""A member as the API shows it."""


class MemberList(ListObject):
    """A page of members."""

    data: list[MemberObject]
