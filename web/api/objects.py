"""Store records shaped as API objects (spec 2; DESIGN: check object, list wrapper).

Plain dicts, built directly: this is the hot path of every read. Their shapes are the
response models of :mod:`web.api`, which the tests validate them against.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, TypeVar

from store import (
    CheckRecord,
    EventRecord,
    HeartbeatRecord,
    IncidentRecord,
    IncidentUpdateRecord,
    MonitorRecord,
    PingRecord,
    StatusPageRecord,
    WebhookDeliveryRecord,
    WebhookEndpointRecord,
)

R = TypeVar("R")


def monitor_object(r: MonitorRecord) -> dict[str, Any]:
    """A monitor as the API shows it (spec 2.1)."""
    return {
        "id": r.id,
        "object": "monitor",
        "name": r.name,
        "url": r.url,
        "type": r.type,
        "status": r.status,
        "interval_seconds": r.interval_seconds,
        "timeout_seconds": r.timeout_seconds,
        "method": r.method,
        "expected_status_code": r.expected_status_code,
        "failure_threshold": r.failure_threshold,
        "success_threshold": r.success_threshold,
        "auto_incidents": r.auto_incidents,
        "incident_severity": r.incident_severity,
        "request_headers": r.request_headers,
        "request_body": r.request_body,
        "assertions": None if r.assertions is None else [_assertion(a) for a in r.assertions],
        "tls_expiry_days": r.tls_expiry_days,
        "tls_verify": r.tls_verify,
        "tls_ca_bundle": r.tls_ca_bundle,
        "last_checked_at": r.last_checked_at,
        "created": r.created,
        "updated": r.updated,
        "metadata": r.metadata,
    }


def heartbeat_object(r: HeartbeatRecord, ping_base: str) -> dict[str, Any]:
    """A heartbeat as the API shows it (extensions part 7); ``ping_url`` is
    ``<ping_base>/ping/<key>`` (``ping_base``: ``--public-url``, else the base URL the
    request came to; README, Heartbeats)."""
    return {
        "id": r.id,
        "object": "heartbeat",
        "name": r.name,
        "period_seconds": r.period_seconds,
        "grace_seconds": r.grace_seconds,
        "status": r.status,
        "ping_url": f"{ping_base}/ping/{r.ping_key}",
        "last_ping_at": r.last_ping_at,
        "auto_incidents": r.auto_incidents,
        "incident_severity": r.incident_severity,
        "created": r.created,
        "updated": r.updated,
        "metadata": r.metadata,
    }


def ping_object(r: PingRecord) -> dict[str, Any]:
    """A ping as ``GET /heartbeats/:id/pings`` shows it (extensions part 7)."""
    return {
        "id": r.id,
        "object": "ping",
        "heartbeat": r.heartbeat_id,
        "kind": r.kind,
        "created": r.created,
        "duration_ms": r.duration_ms,
        "source_ip": r.source_ip,
    }


def _assertion(stored: dict[str, Any]) -> dict[str, Any]:
    """An assertion in its documented key order (jsonb stores keys in its own order)."""
    return {
        "source": stored["source"],
        "property": stored.get("property"),
        "comparison": stored["comparison"],
        "target": stored.get("target"),
    }


def incident_object(r: IncidentRecord) -> dict[str, Any]:
    """An incident as the API shows it (spec 2.2, DESIGN's resolution_message)."""
    return {
        "id": r.id,
        "object": "incident",
        "title": r.title,
        "description": r.description,
        "status": r.status,
        "severity": r.severity,
        "created": r.created,
        "updated": r.updated,
        "resolved_at": r.resolved_at,
        "resolution_message": r.resolution_message,
        "monitor": r.monitor_id,
        "monitors": r.monitors,
        "postmortem": r.postmortem,
        "metadata": r.metadata,
    }


def incident_update_object(r: IncidentUpdateRecord) -> dict[str, Any]:
    """An entry of an incident's timeline (extensions part 3)."""
    return {
        "id": r.id,
        "object": "incident_update",
        "incident": r.incident_id,
        "status": r.status,
        "message": r.message,
        "created": r.created,
    }


_SHAPES: dict[str, tuple[type[Any], Callable[[Any], dict[str, Any]]]] = {
    "monitor": (MonitorRecord, monitor_object),
    "incident": (IncidentRecord, incident_object),
    "incident_update": (IncidentUpdateRecord, incident_update_object),
}
_NOT_PREVIOUS = frozenset({"updated"})


def event_object(r: EventRecord, ping_base: str = "") -> dict[str, Any]:
    """An event as ``GET /events/:id`` shows it and a webhook delivers it (extensions
    part 1): the stored record snapshot shaped as its resource's API object, and
    ``previous_attributes``: the object's fields whose value the change moved (shaped the
    same way, ``updated`` left out), or null. ``ping_base`` makes a heartbeat's
    ``ping_url`` (:func:`heartbeat_object`)."""
    kind = "incident_update" if r.type == "incident.update_posted" else r.type.split(".")[0]
    if kind == "heartbeat":
        record_type: type[Any] = HeartbeatRecord
        shape: Callable[[Any], dict[str, Any]] = partial(heartbeat_object, ping_base=ping_base)
    else:
        record_type, shape = _SHAPES[kind]
    record = record_type.from_snapshot(r.object)
    after = shape(record)
    previous_attributes = None
    if r.previous is not None:
        known = {k: v for k, v in r.previous.items() if k in record_type.__dataclass_fields__}
        before = shape(record_type.from_snapshot({**r.object, **known}))
        previous_attributes = {
            k: before[k] for k in after if k not in _NOT_PREVIOUS and before[k] != after[k]
        }
    return {
        "id": r.id,
        "object": "event",
        "type": r.type,
        "created": r.created,
        "data": {"object": after, "previous_attributes": previous_attributes},
        "request": {"id": r.request_id, "idempotency_key": r.idempotency_key},
    }


def check_object(r: CheckRecord) -> dict[str, Any]:
    """A check as the API shows it (DESIGN: check object)."""
    error = None
    if r.error_code is not None:
        error = {"code": r.error_code, "message": r.error_message or ""}
    return {
        "id": r.id,
        "object": "check",
        "monitor": r.monitor_id,
        "status": r.status,
        "response_time_ms": r.response_time_ms,
        "status_code": r.status_code,
        "error": error,
        "tls_expires_at": r.tls_expires_at,
        "created": r.created,
    }


def webhook_endpoint_object(
    r: WebhookEndpointRecord, *, with_secret: bool = False
) -> dict[str, Any]:
    """A webhook endpoint (extensions part 2); ``secret`` only ``with_secret`` (the
    create and rotate-secret responses)."""
    shaped = {
        "id": r.id,
        "object": "webhook_endpoint",
        "url": r.url,
        "enabled_events": r.enabled_events,
        "description": r.description,
        "status": r.status,
        "created": r.created,
        "updated": r.updated,
        "metadata": r.metadata,
    }
    if with_secret:
        shaped["secret"] = r.secret
    return shaped


def webhook_delivery_object(r: WebhookDeliveryRecord) -> dict[str, Any]:
    """A delivery (extensions part 2): ``last_attempt`` ``{"at", "response_status",
    "error", "duration_ms"}`` or null; ``next_attempt_at`` integer epoch seconds (rounded
    up: not before it) or null."""
    last_attempt = None
    if r.last_attempt_at is not None:
        last_attempt = {
            "at": r.last_attempt_at,
            "response_status": r.last_response_status,
            "error": r.last_error,
            "duration_ms": r.last_duration_ms or 0.0,
        }
    next_at = r.next_attempt_at
    return {
        "id": r.id,
        "object": "webhook_delivery",
        "event": r.event_id,
        "endpoint": r.endpoint_id,
        "status": r.status,
        "attempts": r.attempts,
        "last_attempt": last_attempt,
        "next_attempt_at": None if next_at is None else math.ceil(next_at),
        "created": r.created,
    }


def status_page_object(r: StatusPageRecord) -> dict[str, Any]:
    """A status page (extensions part 5); each component ``{"monitor", "name", "group"}``."""
    return {
        "id": r.id,
        "object": "status_page",
        "name": r.name,
        "slug": r.slug,
        "description": r.description,
        "components": [
            {"monitor": c["monitor"], "name": c["name"], "group": c.get("group")}
            for c in r.components
        ],
        "created": r.created,
        "updated": r.updated,
        "metadata": r.metadata,
    }


def list_object(
    url: str, items: Iterable[R], has_more: bool, shape: Callable[[R], dict[str, Any]]
) -> dict[str, Any]:
    """The list wrapper of DESIGN: ``{"object": "list", "data", "has_more", "url"}``."""
    return {"object": "list", "data": [shape(i) for i in items], "has_more": has_more, "url": url}


def render_event(record: EventRecord, ping_base: str = "") -> bytes:
    """A webhook delivery's body: the event as ``GET /events/:id`` shows it, as JSON
    (UTF-8), extensions part 2; ``ping_base`` makes a heartbeat's ``ping_url``
    (``--public-url``, else the address the service listens on)."""
    return json.dumps(event_object(record, ping_base)).encode()
