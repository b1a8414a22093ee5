"""Request and response bodies of the maintenance window endpoints (docs/maintenance.md), in
the style of :mod:`web.api.common` (strict requests, unknown fields refused).

Rules (docs/maintenance.md): ``title`` 1 to 200 characters; ``description`` at most
10,000 or null; ``monitors`` 1 to 1,000 ``mon_`` or ``hbt_`` ids (the account's own:
checked by the route, 422 ``unknown_monitor`` naming ``monitors[i]``); a one-off window
has ``starts_at`` and ``ends_at`` (epoch seconds), a recurring one ``recurrence``
(``{"rrule", "time_zone", "start", "duration_seconds"}``), checked by
:func:`store.recurrence.schedule_of` (422 naming the field); ``suppress_alerts`` and
``exclude_from_availability`` default true, ``pause_checks`` false. ``status`` and
``next_window`` are computed at an instant (``at``, epoch seconds: the request's, or an
event's ``created``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from store import windows

from .common import PATCH, REQUEST, Absent, Description, ListObject, Metadata, Name
from .shaping import Computed, shaper

__all__ = [
    "MAX_RESOURCES",
    "RecurrenceIn",
    "WindowCreate",
    "WindowList",
    "WindowObject",
    "WindowUpdate",
    "window_object",
]

MAX_RESOURCES = 1_000
"""The most monitors and heartbeats one window covers."""

ResourceId = Annotated[str, Field(pattern=r"^(mon|hbt)_[a-z0-9]{1,64}$")]
Resources = Annotated[
    list[ResourceId],
    Field(
        min_length=1,
        max_length=MAX_RESOURCES,
        description="1 to 1,000 monitors (mon_) and heartbeats (hbt_) of the account; an id "
        "given twice counts once.",
    ),
]
Epoch = Annotated[int, Field(ge=0, le=2**53, description="Epoch seconds.")]


class RecurrenceIn(BaseModel):
    """A recurring window: an RFC 5545 RRULE expanded on the wall clock of `time_zone`
    from `start` (a local date-time, no offset); each occurrence lasts
    `duration_seconds` (1 to 2,678,400)."""

    model_config = REQUEST

    rrule: str = Field(min_length=1, max_length=1_000, description="e.g. FREQ=WEEKLY;BYDAY=SU")
    time_zone: str = Field(min_length=1, max_length=100, description="An IANA zone name.")
    start: str = Field(min_length=1, max_length=40, description="e.g. 2026-01-04T02:30:00")
    duration_seconds: int = Field(description="1 to 2,678,400 (31 days).")


class WindowCreate(BaseModel):
    """The body of `POST /maintenance-windows`: `starts_at` and `ends_at`, or
    `recurrence`."""

    model_config = REQUEST

    title: Name
    description: Description | None = None
    monitors: Resources
    starts_at: Epoch | None = None
    ends_at: Epoch | None = None
    recurrence: RecurrenceIn | None = None
    suppress_alerts: bool = True
    exclude_from_availability: bool = True
    pause_checks: bool = False
    metadata: Metadata = Field(default_factory=dict)


class WindowUpdate(BaseModel):
    """The body of `PATCH /maintenance-windows/{id}`: only the fields to change;
    `monitors` replaces the list; `starts_at`/`ends_at` make the window one-off (its
    recurrence dropped), `recurrence` makes it recurring; `metadata` is merged key by
    key. A new schedule replaces the occurrences that end after the change."""

    model_config = PATCH

    title: Name | Absent = None
    description: Description | None = None
    monitors: Resources | Absent = None
    starts_at: Epoch | Absent = None
    ends_at: Epoch | Absent = None
    recurrence: RecurrenceIn | None = None
    suppress_alerts: bool | Absent = None
    exclude_from_availability: bool | Absent = None
    pause_checks: bool | Absent = None
    metadata: Metadata | Absent = None


class RecurrenceObject(BaseModel):
    """A window's recurrence as stored."""

    rrule: str
    time_zone: str
    start: str
    duration_seconds: int


class OccurrenceObject(BaseModel):
    """One occurrence: `[starts_at, ends_at)`, epoch seconds."""

    starts_at: int
    ends_at: int


def _status(record: windows.WindowRecord, at: int) -> str:
    return record.status(at)


def _next_window(record: windows.WindowRecord, at: int) -> dict[str, int] | None:
    upcoming = record.next_window(at)
    if upcoming is None:
        return None
    return {"starts_at": upcoming.starts_at, "ends_at": upcoming.ends_at}


class WindowObject(BaseModel):
    """A maintenance window: while one of its occurrences is open, the monitors and
    heartbeats it covers raise no incident or alert (`suppress_alerts`), count apart in
    availability (`exclude_from_availability`) and may pause (`pause_checks`). Its
    title, description and times are public on the status pages that show its
    monitors."""

    id: str = Field(pattern=r"^mnt_[a-z0-9]+$")
    object: Literal["maintenance_window"]
    title: str
    description: str | None
    monitors: list[str]
    starts_at: int | None
    ends_at: int | None
    recurrence: RecurrenceObject | None
    suppress_alerts: bool
    exclude_from_availability: bool
    pause_checks: bool
    status: Annotated[
        Literal["scheduled", "in_progress", "completed", "canceled"],
        Computed(_status, uses=("at",)),
    ]
    next_window: Annotated[OccurrenceObject | None, Computed(_next_window, uses=("at",))]
    created: int
    updated: int
    metadata: dict[str, str]


window_object = shaper(WindowObject, windows.WindowRecord)
"""A window as the API shows it: ``window_object(record, at=epoch_seconds)``."""


class WindowList(ListObject):
    """A page of maintenance windows."""

    data: list[WindowObject]


def as_stored(recurrence: RecurrenceIn | None) -> dict[str, Any] | None:
    """A request's recurrence as :func:`store.recurrence.schedule_of` takes it."""
    return None if recurrence is None else recurrence.model_dump()
