"""Request and response bodies of the webhook endpoints (docs/webhooks.md, "Endpoints and
deliveries"), in the style of :mod:`web.api.common` (strict requests, unknown fields
refused).

Rules (docs/webhooks.md, "Endpoints and deliveries"): ``url`` is an absolute http or https URL of at
most 2,048 characters; ``enabled_events`` is a non-empty list (at most 100 entries) of
event types (docs/incidents.md, "Events"), family prefixes (``monitor.*``, ``incident.*``,
``heartbeat.*``) or ``"*"``; duplicates are dropped keeping the first, and a list holding
``"*"`` is stored as ``["*"]``; ``description`` at most 10,000 characters or null.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, Field
from pydantic_core import PydanticCustomError

from store import WebhookDeliveryRecord, WebhookEndpointRecord

from .common import PATCH, REQUEST, Absent, Description, ListObject, Metadata, Url
from .events import EVENT_FAMILIES, EVENT_TYPES
from .shaping import From, Nested, shaper

__all__ = [
    "WebhookDeliveryList",
    "WebhookDeliveryObject",
    "WebhookEndpointCreate",
    "WebhookEndpointList",
    "WebhookEndpointObject",
    "WebhookEndpointUpdate",
    "WebhookEndpointWithSecret",
    "webhook_delivery_object",
    "webhook_endpoint_object",
    "webhook_endpoint_with_secret",
]

MAX_ENABLED_EVENTS = 100

EndpointStatus = Literal["enabled", "disabled"]
DeliveryStatus = Literal["pending", "succeeded", "failed"]


def _check_enabled_events(value: list[str]) -> list[str]:
    """Event types, ``family.*`` prefixes or ``*``; deduplicated, ``*`` alone."""
    if not value:
        raise PydanticCustomError("value_too_short", "enabled_events may not be empty")
    if len(value) > MAX_ENABLED_EVENTS:
        raise PydanticCustomError(
            "value_too_long", f"enabled_events may hold at most {MAX_ENABLED_EVENTS} entries"
        )
    for pattern in value:
        if pattern != "*" and pattern not in EVENT_TYPES and pattern not in EVENT_FAMILIES:
            raise PydanticCustomError(
                "unknown_event_type",
                f"enabled_events: {pattern[:100]!r} is no event type, family prefix "
                f"({', '.join(EVENT_FAMILIES)}) or *",
            )
    if "*" in value:
        return ["*"]
    return list(dict.fromkeys(value))


EnabledEvents = Annotated[
    list[str],
    AfterValidator(_check_enabled_events),
    Field(
        description='Event types, family prefixes (monitor.*) or ["*"]; 1 to 100.',
        json_schema_extra={
            "minItems": 1,
            "maxItems": MAX_ENABLED_EVENTS,
            "items": {"type": "string", "enum": ["*", *EVENT_FAMILIES, *EVENT_TYPES]},
        },
    ),
]


class WebhookEndpointCreate(BaseModel):
    """The body of `POST /webhook-endpoints`."""

    model_config = REQUEST

    url: Url
    enabled_events: EnabledEvents
    description: Description | None = None
    metadata: Metadata = Field(default_factory=dict)


class WebhookEndpointUpdate(BaseModel):
    """The body of `PATCH /webhook-endpoints/{id}`: only the fields to change;
    `metadata` is merged key by key; `description` may be set to null; `status`
    `disabled` stops deliveries."""

    model_config = PATCH

    url: Url | Absent = None
    enabled_events: EnabledEvents | Absent = None
    description: Description | None = None
    status: EndpointStatus | Absent = None
    metadata: Metadata | Absent = None


class WebhookEndpointObject(BaseModel):
    """A webhook endpoint: where the events of `enabled_events` are delivered. Its
    `secret`, which signs the deliveries, is shown only in the responses that create the
    endpoint or rotate its secret."""

    id: str = Field(pattern=r"^we_[a-z0-9]+$")
    object: Literal["webhook_endpoint"]
    url: str
    enabled_events: list[str]
    description: str | None
    status: EndpointStatus
    created: int
    updated: int
    metadata: dict[str, str]


class WebhookEndpointWithSecret(WebhookEndpointObject):
    """A webhook endpoint with its `secret`, which signs the deliveries: the response
    that creates the endpoint or rotates its secret (the only ones showing it)."""

    secret: str = Field(pattern=r"^whsec_[A-Za-z0-9_-]+$")


class WebhookAttempt(BaseModel):
    """A delivery's latest attempt: when (epoch seconds), the receiver's status (null
    when none came), the error code (null on success) and its duration (milliseconds)."""

    at: Annotated[int, From("last_attempt_at")]
    response_status: Annotated[int | None, From("last_response_status")]
    error: Annotated[str | None, From("last_error")]
    duration_ms: Annotated[float, From("last_duration_ms", null_as=0.0)]


class WebhookDeliveryObject(BaseModel):
    """A delivery of one event to one endpoint, with its latest attempt."""

    id: str = Field(pattern=r"^whd_[a-z0-9]+$")
    object: Literal["webhook_delivery"]
    event: Annotated[str, From("event_id")]
    endpoint: Annotated[str, From("endpoint_id")]
    status: DeliveryStatus
    attempts: int
    last_attempt: Annotated[WebhookAttempt | None, Nested(when="last_attempt_at")]
    next_attempt_at: Annotated[int | None, From("next_attempt_at", convert=math.ceil)] = Field(
        description="Epoch seconds (rounded up: not before it), or null when settled."
    )
    created: int


webhook_endpoint_object = shaper(WebhookEndpointObject, WebhookEndpointRecord)
"""A webhook endpoint as the API shows it, without its secret."""

webhook_endpoint_with_secret = shaper(WebhookEndpointWithSecret, WebhookEndpointRecord)
"""A webhook endpoint with its ``secret`` last: the create and rotate-secret responses."""

webhook_delivery_object = shaper(WebhookDeliveryObject, WebhookDeliveryRecord)
"""A delivery: ``last_attempt`` null before the first attempt; ``next_attempt_at``
whole epoch seconds (rounded up) or null."""


class WebhookEndpointList(ListObject):
    """A page of webhook endpoints, newest first."""

    data: list[WebhookEndpointObject]


class WebhookDeliveryList(ListObject):
    """A page of an endpoint's deliveries, newest first."""

    data: list[WebhookDeliveryObject]
