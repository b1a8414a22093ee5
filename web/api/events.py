"""The event object (extensions part 1)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from .common import ListObject

EVENT_TYPES = (
    "monitor.created",
    "monitor.updated",
    "monitor.deleted",
    "monitor.paused",
    "monitor.resumed",
    "monitor.down",
    "monitor.up",
    "incident.created",
    "incident.updated",
    "incident.resolved",
    "incident.deleted",
    "incident.update_posted",
    "heartbeat.created",
    "heartbeat.updated",
    "heartbeat.deleted",
    "heartbeat.paused",
    "heartbeat.resumed",
    "heartbeat.down",
    "heartbeat.up",
)
"""Every event type (extensions part 1, heartbeats of part 7 included)."""

EVENT_FAMILIES = tuple(sorted({t.split(".")[0] + ".*" for t in EVENT_TYPES}))
"""The prefixes an endpoint may subscribe to: ``heartbeat.*``, ``incident.*``,
``monitor.*``."""


class EventData(BaseModel):
    """The resource as the API showed it right after the change, and the changed
    fields' old values (null when nothing was changed, as on create)."""

    object: dict[str, Any]
    previous_attributes: dict[str, Any] | None


class EventRequest(BaseModel):
    """The API request that caused an event; `id` is null when Uptrio caused it
    itself (a check moving a monitor, for example)."""

    id: str | None
    idempotency_key: str | None


class EventObject(BaseModel):
    """An event: a change to a monitor, an incident or a heartbeat, with the object as
    the API showed it right after."""

    id: str = Field(pattern=r"^evt_[a-z0-9]+$")
    object: Literal["event"]
    type: str
    created: int
    data: EventData
    request: EventRequest


class EventList(ListObject):
    """A page of events, newest first."""

    data: list[EventObject]
