"""Request and response bodies of the notification channel endpoints (docs/alerts.md,
"Notification channels"), in the style of :mod:`web.api.common` (strict requests,
unknown fields refused).

Rules (docs/alerts.md): ``name`` 1 to 100 characters; ``type`` one of
:data:`engine.CHANNEL_TYPES` (it cannot change: a PATCH refuses it); ``config`` an object
of the type's keys, validated by :func:`engine.validate_config` (checked by the route: 422
``invalid_channel_config``, ``param`` ``config.<key>``; ``smtp_not_configured`` for an
email channel where the server has no relay). Secrets are write-only: every response
shows ``config`` through :func:`engine.mask_config` (``"…abcd"``). A PATCH's ``config``
replaces the keys it sends and keeps the others, so a secret need not be sent again.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from engine import CHANNEL_TYPES, Attempt, mask_config
from store import NotificationChannelRecord

from .common import PATCH, REQUEST, Absent, ListObject, Metadata
from .shaping import Computed, shaper

__all__ = [
    "AttemptObject",
    "ChannelCreate",
    "ChannelList",
    "ChannelObject",
    "ChannelUpdate",
    "attempt_object",
    "channel_object",
]

ChannelType = Literal[
    "email", "slack", "discord", "teams", "telegram", "pagerduty", "opsgenie", "ntfy", "webhook"
]
assert set(ChannelType.__args__) == set(CHANNEL_TYPES)  # type: ignore[attr-defined]
ChannelName = Annotated[str, Field(min_length=1, max_length=100)]
Config = Annotated[
    dict[str, Any],
    Field(
        description=(
            "The type's settings (docs/alerts.md): email address; slack, discord, teams "
            "webhook_url; telegram bot_token, chat_id; pagerduty routing_key; opsgenie "
            "api_key, region; ntfy topic_url, access_token; webhook url."
        ),
        json_schema_extra={"maxProperties": 20},
    ),
]


class ChannelCreate(BaseModel):
    """The body of `POST /notification-channels`."""

    model_config = REQUEST

    name: ChannelName
    type: ChannelType
    config: Config
    enabled: bool = True
    send_resolved: bool = True
    metadata: Metadata = Field(default_factory=dict)


class ChannelUpdate(BaseModel):
    """The body of `PATCH /notification-channels/{id}`: only the fields to change;
    `config` replaces the keys it sends and keeps the others (secrets need not be sent
    again); `metadata` is merged key by key. `type` cannot change."""

    model_config = PATCH

    name: ChannelName | Absent = None
    config: Config | Absent = None
    enabled: bool | Absent = None
    send_resolved: bool | Absent = None
    metadata: Metadata | Absent = None


def _masked(record: NotificationChannelRecord) -> dict[str, Any]:
    return mask_config(record.type, record.config)


class ChannelObject(BaseModel):
    """A notification channel: where messages go. Secrets in `config` read back masked
    (`"…abcd"`)."""

    id: str = Field(pattern=r"^nch_[a-z0-9]+$")
    object: Literal["notification_channel"]
    name: str
    type: ChannelType
    config: Annotated[dict[str, Any], Computed(_masked)]
    enabled: bool
    send_resolved: bool
    created: int
    updated: int
    metadata: dict[str, str]


channel_object = shaper(ChannelObject, NotificationChannelRecord)
"""A channel as the API shows it: ``config`` masked."""


class ChannelList(ListObject):
    """A page of notification channels."""

    data: list[ChannelObject]


class AttemptObject(BaseModel):
    """The outcome of a test message, sent at once: `status`, the provider's HTTP status
    (null when none came), the error (null on success), the duration (milliseconds)."""

    object: Literal["notification_attempt"]
    status: Literal["succeeded", "failed"]
    response_status: int | None
    error: str | None
    duration_ms: float


attempt_object = shaper(AttemptObject, Attempt)
"""A test message's attempt as the API shows it."""
