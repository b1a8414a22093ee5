"""Request and response bodies of the webhook endpoints (extensions part 2), in the style
of :mod:`web.api.common` (strict requests, unknown fields refused).

Rules decided here (README "Webhooks"): ``url`` is an absolute http or https URL of at
most 2,048 characters; ``enabled_events`` is a non-empty list (at most 100 entries) of
event types of extensions part 1, family prefixes (``monitor.*``, ``incident.*``,
``heartbeat.*``) or ``"*"``; duplicates are dropped keeping the first, and a list holding
``"*"`` is stored as ``["*"]``; ``description`` at most 10,000 characters or null.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, Field
from pydantic_core import PydanticCustomError

from .common import PATCH, REQUEST, Absent, Description, ListObject, Metadata, Url
from .events import EVENT_FAMILIES, EVENT_TYPES

__all__ = [
    "WebhookDeliveryList",
    "WebhookDeliveryObject",
    "WebhookEndpointCreate",
    "WebhookEndpointList",
    "WebhookEndpointObject",
    "WebhookEndpointUpdate",
]

MAX_ENABLED_EVENTS = 100

EndpointStatus = Literal["enabled", "disabled"]
DeliveryStatus = Literal["pending", "succeeded", "failed"]


def _check_enabled_events(value: list[str]) -> list[str]:
    """Part 2: event types, ``family.*`` prefixes or ``*``; deduplicated, ``*`` alone."""
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
    """A webhook endpoint: where the events of `enabled_events` are delivered.
    `secret`, which signs the deliveries, is shown only in the responses that create the
    endpoint or rotate its secret."""

    id: str = Field(pattern=r"^we_[a-z0-9]+$")
    object: Literal["webhook_endpoint"]
    url: str
    enabled_events: list[str]
    description: str | None
    status: EndpointStatus
    secret: str | None = Field(
        default=None,
        pattern=r"^whsec_[A-Za-z0-9_-]+$",
        description="Only in the create and rotate-secret responses.",
    )
    created: int
    updated: int
    metadata: dict[str, str]


class WebhookAttempt(BaseModel):
    """A delivery's latest attempt: when (epoch seconds), the receiver's status (null
    when none came), the error code (null on success) and its duration (milliseconds)."""

    at: int
    response_status: int | None
    error: str | None
    duration_ms: float


class WebhookDeliveryObject(BaseModel):
    """A delivery of one event to one endpoint, with its latest attempt."""

    id: str = Field(pattern=r"^whd_[a-z0-9]+$")
    object: Literal["webhook_delivery"]
    event: str
    endpoint: str
    status: DeliveryStatus
    attempts: int
    last_attempt: WebhookAttempt | None
    next_attempt_at: int | None = Field(description="Epoch seconds, or null when settled.")
    created: int


class WebhookEndpointList(ListObject):
    """A page of webhook endpoints, newest first."""

    data: list[WebhookEndpointObject]


class WebhookDeliveryList(ListObject):
    """A page of an endpoint's deliveries, newest first."""

    data: list[WebhookDeliveryObject]
