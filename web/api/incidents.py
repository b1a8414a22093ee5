"""The incident's request bodies and objects, its timeline's included (docs/incidents.md,
"Incidents" and "Timelines")."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from store import IncidentRecord, IncidentUpdateRecord

from .common import PATCH, REQUEST, Absent, Description, ListObject, Metadata, Name, Severity
from .shaping import From, shaper

IncidentStatus = Literal["investigating", "identified", "monitoring", "resolved"]
AffectedId = Annotated[str, Field(pattern=r"^(mon|hbt)_[a-z0-9]{1,64}$")]
"""An incident's affected monitor: a monitor or a heartbeat (docs/incidents.md, "Incidents": the
incident a heartbeat opens names its ``hbt_`` id, and a PATCH may send that list back)."""
AffectedMonitors = Annotated[
    list[AffectedId],
    Field(
        max_length=100,
        description="The affected monitors and heartbeats: the account's own, at most 100.",
    ),
]
Postmortem = Annotated[str, Field(max_length=50_000)]


class IncidentCreate(BaseModel):
    """The body of `POST /incidents`."""

    model_config = REQUEST

    title: Name
    description: Description | None = None
    severity: Severity = "major"
    status: IncidentStatus = "investigating"
    monitors: AffectedMonitors = Field(default_factory=list)
    metadata: Metadata = Field(default_factory=dict)


class IncidentUpdate(BaseModel):
    """The body of `PATCH /incidents/{id}`: only the fields to change. A move into
    `resolved` sets `resolved_at`; a move out of it clears `resolved_at` and
    `resolution_message`."""

    model_config = PATCH

    title: Name | Absent = None
    description: Description | None = None
    status: IncidentStatus | Absent = None
    severity: Severity | Absent = None
    monitors: AffectedMonitors | Absent = None
    postmortem: Postmortem | None = None
    metadata: Metadata | Absent = None


class IncidentUpdateCreate(BaseModel):
    """The body of `POST /incidents/{id}/updates`: a message for the timeline,
    and optionally the status the incident moves to."""

    model_config = REQUEST

    message: Annotated[str, Field(min_length=1, max_length=10_000)]
    status: IncidentStatus | None = None


class IncidentResolve(BaseModel):
    """The body of `POST /incidents/{id}/resolve`, which may be left out."""

    model_config = REQUEST

    resolution_message: Description | None = None


class IncidentObject(BaseModel):
    """An incident, opened through the API or by a monitor or heartbeat going down
    (`monitor`), which also resolves it when it comes back up."""

    id: str = Field(pattern=r"^inc_[a-z0-9]+$")
    object: Literal["incident"]
    title: str
    description: str | None
    status: IncidentStatus
    severity: Severity
    created: int
    updated: int
    resolved_at: int | None
    resolution_message: str | None
    monitor: Annotated[str | None, From("monitor_id")] = Field(
        description="The monitor that opened it, or null."
    )
    monitors: list[str]
    postmortem: str | None
    metadata: dict[str, str]


class IncidentUpdateObject(BaseModel):
    """An entry of an incident's timeline: the incident's status after it and an
    optional message."""

    id: str = Field(pattern=r"^inu_[a-z0-9]+$")
    object: Literal["incident_update"]
    incident: Annotated[str, From("incident_id")]
    status: IncidentStatus
    message: str | None
    created: int


incident_object = shaper(IncidentObject, IncidentRecord)
"""An incident as the API shows it."""

incident_update_object = shaper(IncidentUpdateObject, IncidentUpdateRecord)
"""An entry of an incident's timeline as the API shows it."""


class IncidentList(ListObject):
    """A page of incidents."""

    data: list[IncidentObject]


class IncidentUpdateList(ListObject):
    """A page of an incident's timeline, oldest first."""

    data: list[IncidentUpdateObject]
