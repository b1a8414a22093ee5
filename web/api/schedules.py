"""Request and response bodies of the schedule endpoints (docs/on-call.md, "Schedules
through the API"), in the style of :mod:`web.api.common` (strict requests, unknown fields
refused).

The models check the shape: ``name`` 1 to 100 characters; ``time_zone`` a string (an
IANA name: checked by :func:`store.rotation.parse_plan`, 422 ``invalid_time_zone``);
``layers`` 1 to 5, each ``{"name", "members": 1 to 50 mbr_ ids, "rotation": {"type":
"daily" | "weekly" | "custom", "length_seconds" (custom only, 3,600 to 2,592,000),
"handoff": a local date-time}, "restrictions": [{"days", "start", "end"}]}``. What a
shape cannot say (a handoff that parses, a restriction's end after its start, a length
given for custom rotations only) is :func:`store.rotation.parse_plan`'s, a 422 whose
``param`` is the field's path (``layers[1].rotation.handoff``); members that are not the
account's are the route's (422 ``unknown_member``, ``layers[0].members[2]``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from store import MemberRecord, schedule_overrides, schedules

from .common import PATCH, REQUEST, Absent, ListObject, Metadata
from .members import MemberObject, member_object
from .shaping import Computed, From, shaper

__all__ = [
    "LayerIn",
    "OnCall",
    "OnCallObject",
    "OverrideCreate",
    "OverrideList",
    "OverrideObject",
    "ScheduleCreate",
    "ScheduleList",
    "ScheduleObject",
    "ScheduleUpdate",
    "ShiftList",
    "ShiftRange",
    "as_stored",
    "on_call_object",
    "override_object",
    "schedule_object",
    "shift_list",
]

CALENDAR_CONTENT_TYPE = "text/calendar; charset=utf-8"
"""The calendar feed's media type (RFC 5545, 8.1)."""

MemberId = Annotated[str, Field(pattern=r"^mbr_[a-z0-9]{1,64}$")]
ScheduleName = Annotated[str, Field(min_length=1, max_length=100)]
TimeZoneName = Annotated[
    str, Field(min_length=1, max_length=64, description="An IANA time zone name.")
]
Day = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
ClockTime = Annotated[str, Field(pattern=r"^\d{2}:\d{2}$", description="Local time, HH:MM.")]
Epoch = Annotated[int, Field(ge=0, le=2**40, description="Epoch seconds.")]


class RotationIn(BaseModel):
    """How a layer's members take turns: each has a day, a week or `length_seconds`,
    handed off at the local wall time of `handoff` in the schedule's time zone."""

    model_config = ConfigDict(strict=True, extra="forbid")

    type: Literal["daily", "weekly", "custom"]
    length_seconds: int | None = Field(
        default=None, ge=3_600, le=2_592_000, description="custom only: 3,600 to 2,592,000."
    )
    handoff: str = Field(
        min_length=1, max_length=40, description="A local date-time: 2026-12-01T09:00."
    )


class RestrictionIn(BaseModel):
    """When a layer has someone on call: these days, from `start` to `end` (local)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    days: list[Day] = Field(min_length=1, max_length=7)
    start: ClockTime
    end: ClockTime


class LayerIn(BaseModel):
    """A layer: members in rotation order; a later layer wins where it has someone."""

    model_config = ConfigDict(strict=True, extra="forbid")

    name: ScheduleName
    members: list[MemberId] = Field(min_length=1, max_length=50)
    rotation: RotationIn
    restrictions: list[RestrictionIn] = Field(default_factory=list, max_length=20)


Layers = Annotated[list[LayerIn], Field(min_length=1, max_length=5, description="1 to 5.")]


def as_stored(layers: list[LayerIn]) -> list[dict[str, Any]]:
    """The layers as :func:`store.rotation.parse_plan` takes them (the API's JSON; a
    rotation's ``length_seconds`` left out when not given)."""
    return [layer.model_dump(exclude_none=True) for layer in layers]


class ScheduleCreate(BaseModel):
    """The body of `POST /schedules`."""

    model_config = REQUEST

    name: ScheduleName
    time_zone: TimeZoneName
    layers: Layers
    metadata: Metadata = Field(default_factory=dict)


class ScheduleUpdate(BaseModel):
    """The body of `PATCH /schedules/{id}`: only the fields to change; `layers` replaces
    the list; `metadata` is merged key by key."""

    model_config = PATCH

    name: ScheduleName | Absent = None
    time_zone: TimeZoneName | Absent = None
    layers: Layers | Absent = None
    metadata: Metadata | Absent = None


class RotationObject(BaseModel):
    """A layer's rotation."""

    type: str
    length_seconds: int | None = None
    handoff: str


class RestrictionObject(BaseModel):
    """A layer's restriction."""

    days: list[str]
    start: str
    end: str


class LayerObject(BaseModel):
    """A layer of a schedule."""

    name: str
    members: list[str]
    rotation: RotationObject
    restrictions: list[RestrictionObject]


class ScheduleObject(BaseModel):
    """An on-call schedule: layers of rotations in a time zone. `calendar_key` is the
    secret of its calendar feed (`GET /schedules/{id}/calendar.ics?key=`); events show
    it as null."""

    id: str = Field(pattern=r"^sch_[a-z0-9]+$")
    object: Literal["schedule"]
    name: str
    time_zone: str
    layers: list[LayerObject]
    calendar_key: str | None
    created: int
    updated: int
    metadata: dict[str, str]


schedule_object = shaper(ScheduleObject, schedules.ScheduleRecord)
"""A schedule as the API shows it."""


class ScheduleList(ListObject):
    """A page of schedules."""

    data: list[ScheduleObject]


class OverrideCreate(BaseModel):
    """The body of `POST /schedules/{id}/overrides`: `member` is on call from `start`
    to `end` (epoch seconds), whatever the layers say."""

    model_config = REQUEST

    member: MemberId
    start: Epoch
    end: Epoch


class OverrideObject(BaseModel):
    """An override of a schedule."""

    id: str = Field(pattern=r"^ovr_[a-z0-9]+$")
    object: Literal["schedule_override"]
    schedule: Annotated[str, From("schedule_id")]
    member: Annotated[str, From("member_id")]
    start: Annotated[int, From("starts_at")]
    end: Annotated[int, From("ends_at")]
    created: int


override_object = shaper(OverrideObject, schedule_overrides.OverrideRecord)
"""An override as the API shows it."""


class OverrideList(ListObject):
    """A page of overrides, by start."""

    data: list[OverrideObject]


@dataclass(frozen=True, slots=True)
class OnCall:
    """Who a schedule has on call at ``at`` (epoch seconds) and ``until`` when (the
    record :data:`on_call_object` shapes)."""

    schedule: str
    at: int
    members: list[MemberRecord]
    until: int | None


@dataclass(frozen=True, slots=True)
class ShiftRange:
    """The shifts of a schedule over ``[start, end)`` (epoch seconds; the record
    :data:`shift_list` shapes)."""

    schedule: str
    start: int
    end: int
    shifts: list[schedules.Shift]


def _members(record: OnCall) -> list[dict[str, Any]]:
    return [member_object(m) for m in record.members]


def _shifts(record: ShiftRange) -> list[dict[str, Any]]:
    return [
        {
            "member": s.member,
            "start": s.start,
            "end": s.end,
            "layer": s.layer,
            "override": s.override,
        }
        for s in record.shifts
    ]


class OnCallObject(BaseModel):
    """Who a schedule has on call at `at`, and `until` when that holds (null: for as
    far as the schedule is computed, 90 days)."""

    object: Literal["on_call"]
    schedule: str
    at: int
    members: Annotated[list[MemberObject], Computed(_members)]
    until: int | None


on_call_object = shaper(OnCallObject, OnCall)
"""Who is on call, as the API shows it."""


class ShiftObject(BaseModel):
    """One stretch of the final timeline: `member` is on call from `start` to `end`
    (epoch seconds) through `layer` (the layer's index in `layers`, 0 first) or
    `override` (an ovr_ id); the other is null."""

    member: str
    start: int
    end: int
    layer: int | None
    override: str | None


class ShiftList(BaseModel):
    """The shifts of a range, in time order: overrides applied, no gaps or overlaps of
    one member with themself."""

    object: Literal["list"]
    schedule: str
    start: int
    end: int
    data: Annotated[list[ShiftObject], Computed(_shifts)]


shift_list = shaper(ShiftList, ShiftRange)
"""The shifts of a range, as the API shows them."""
