"""The event object (docs/incidents.md, "Events"; docs/webhooks.md, "The request": a
webhook delivers the event as ``GET /events/:id`` shows it).

``data.object`` is the event's stored snapshot of the resource shaped as that resource's
API object (its derived shaper), and ``data.previous_attributes`` the object's fields
whose value the change moved, shaped the same way (``updated`` left out), or null.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from store import (
    AlertRecord,
    EventRecord,
    HeartbeatRecord,
    IncidentRecord,
    IncidentUpdateRecord,
    MonitorRecord,
    schedule_overrides,
    schedules,
    windows,
)

from .alerts import alert_object
from .common import ListObject
from .heartbeats import heartbeat_object
from .incidents import incident_object, incident_update_object
from .maintenance_windows import window_object
from .monitors import monitor_object
from .schedules import override_object, schedule_object
from .shaping import Computed, From, Nested, shaper

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
    "alert.triggered",
    "alert.acknowledged",
    "alert.escalated",
    "alert.resolved",
    "maintenance.created",
    "maintenance.updated",
    "maintenance.started",
    "maintenance.ended",
    "maintenance.canceled",
    "maintenance.deleted",
    "schedule.created",
    "schedule.updated",
    "schedule.deleted",
    "schedule.override_created",
    "schedule.override_deleted",
)
"""Every event type (docs/incidents.md, "Events"; the heartbeats' of docs/heartbeats.md,
"Incidents and events", the alerts' of docs/alerts.md, "Events", and the maintenance
windows' of docs/maintenance.md, "Events", and the schedules' of docs/on-call.md, "Events",
included)."""

EVENT_FAMILIES = tuple(sorted({t.split(".")[0] + ".*" for t in EVENT_TYPES}))
"""The prefixes an endpoint may subscribe to: ``heartbeat.*``, ``incident.*``,
``monitor.*``, ``alert.*``, ``maintenance.*``, ``schedule.*``."""


class EventData(BaseModel):
    """The resource as the API showed it right after the change, and the changed
    fields' old values (null when nothing was changed, as on create)."""

    object: dict[str, Any]
    previous_attributes: dict[str, Any] | None


class EventRequest(BaseModel):
    """The API request that caused an event; `id` is null when Uptrio caused it
    itself (a check moving a monitor, for example)."""

    id: Annotated[str | None, From("request_id")]
    idempotency_key: str | None


_SHAPES: dict[str, tuple[type[Any], Callable[..., dict[str, Any]]]] = {
    "monitor": (MonitorRecord, monitor_object),
    "incident": (IncidentRecord, incident_object),
    "incident_update": (IncidentUpdateRecord, incident_update_object),
    "heartbeat": (HeartbeatRecord, heartbeat_object),
    "alert": (AlertRecord, alert_object),
    "maintenance": (windows.WindowRecord, window_object),
    "schedule": (schedules.ScheduleRecord, schedule_object),
    "schedule_override": (schedule_overrides.OverrideRecord, override_object),
}
"""Each kind of event resource: its record class and its shaper."""
_OTHER_OBJECTS = {
    "incident.update_posted": "incident_update",
    "schedule.override_created": "schedule_override",
    "schedule.override_deleted": "schedule_override",
}
"""Event types whose object is not their family's resource: an incident's update, a
schedule's override."""
_NOT_PREVIOUS = frozenset({"updated"})


def _event_data(r: EventRecord, ping_base: str) -> dict[str, Any]:
    """``{"object", "previous_attributes"}`` of an event (:class:`EventData`);
    ``ping_base`` makes a heartbeat's ``ping_url``; a maintenance window's ``status`` and
    ``next_window`` are those at the event's ``created``."""
    kind = _OTHER_OBJECTS.get(r.type) or r.type.split(".")[0]
    record_type, shape = _SHAPES[kind]
    context: dict[str, Any] = {}
    if kind == "heartbeat":
        context["ping_base"] = ping_base
    elif kind == "maintenance":
        context["at"] = r.created
    after = shape(record_type.from_snapshot(r.object), **context)
    previous_attributes = None
    if r.previous is not None:
        known = {k: v for k, v in r.previous.items() if k in record_type.__dataclass_fields__}
        before = shape(record_type.from_snapshot({**r.object, **known}), **context)
        previous_attributes = {
            k: before[k] for k in after if k not in _NOT_PREVIOUS and before[k] != after[k]
        }
    return {"object": after, "previous_attributes": previous_attributes}


class EventObject(BaseModel):
    """An event: a change to a monitor, an incident or a heartbeat, with the object as
    the API showed it right after."""

    id: str = Field(pattern=r"^evt_[a-z0-9]+$")
    object: Literal["event"]
    type: str
    created: int
    data: Annotated[EventData, Computed(_event_data, uses=("ping_base",))]
    request: Annotated[EventRequest, Nested()]


event_object = shaper(EventObject, EventRecord)
"""An event as ``GET /events/:id`` shows it and a webhook delivers it:
``event_object(record, ping_base=...)`` (``ping_base`` makes a heartbeat's ``ping_url``)."""


def render_event(record: EventRecord, ping_base: str = "") -> bytes:
    """A webhook delivery's body: the event as ``GET /events/:id`` shows it, as JSON
    (UTF-8; docs/webhooks.md, "The request"); ``ping_base`` makes a heartbeat's
    ``ping_url`` (``--public-url``, else the address the service listens on)."""
    return json.dumps(event_object(record, ping_base=ping_base)).encode()


class EventList(ListObject):
    """A page of events, newest first."""

    data: list[EventObject]
