"""The alert's objects and its notifications' (docs/alerts.md, "Alerts" and "The outbox
and retries"). Alerts are raised and walked by the engine; the API reads them,
acknowledges and resolves them, and takes no body beyond an empty one."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from store import AlertRecord, AttemptRecord, NotificationRecord

from .common import ListObject, Severity
from .shaping import Computed, From, shaper

AlertStatus = Literal["triggered", "acknowledged", "resolved"]
NotificationKind = Literal["trigger", "escalation", "reminder", "acknowledged", "resolved", "test"]
NotificationStatus = Literal["pending", "succeeded", "failed", "cancelled"]


class AlertActor(BaseModel):
    """Who acknowledged an alert: a member (through the acknowledge link a member was
    sent, `mbr_` id), or a token: an API token (`POST /alerts/{id}/acknowledge`, `tok_`
    id) or the acknowledge link a channel target was sent (the channel's `nch_` id)."""

    type: Literal["member", "token"]
    id: str = Field(pattern=r"^(mbr|nch|tok)_[A-Za-z0-9]+$")


class AlertObject(BaseModel):
    """An alert: one page-worthy episode of a monitor or heartbeat, raised when it goes
    down with an escalation policy, walked through the policy's steps until someone
    acknowledges it, and resolved when it comes back up (or by hand)."""

    id: str = Field(pattern=r"^alt_[a-z0-9]+$")
    object: Literal["alert"]
    monitor: Annotated[str, From("resource_id")] = Field(
        pattern=r"^(mon|hbt)_[a-z0-9]+$", description="The monitor or heartbeat that is down."
    )
    incident: Annotated[str | None, From("incident_id")] = Field(
        description="The incident the same down opened, or null."
    )
    status: AlertStatus
    severity: Severity = Field(description="The monitor's or heartbeat's incident_severity.")
    summary: str = Field(description='"<name> is down: <error message>".')
    escalation_policy: str | None = Field(description="The policy walked (esc_ id), or null.")
    escalation_step: int = Field(
        description="Index of the last step notified (0 is the first; -1: none yet)."
    )
    triggered_at: int
    acknowledged_at: int | None
    acknowledged_by: AlertActor | None
    resolved_at: int | None
    created: int
    updated: int
    metadata: dict[str, str]


class NotificationAttemptObject(BaseModel):
    """One attempt to send a notification: when (epoch seconds), its outcome, the
    provider's HTTP status (null without one, as for email), the error (null on success)
    and its duration (milliseconds)."""

    object: Literal["notification_attempt"]
    at: Annotated[int, From("attempted_at")]
    status: Literal["succeeded", "failed"]
    response_status: int | None
    error: str | None
    duration_ms: float


notification_attempt_object = shaper(NotificationAttemptObject, AttemptRecord)
"""An attempt as the API shows it."""


def _last_attempt(record: NotificationRecord) -> dict[str, object] | None:
    attempts = record.attempts_list
    return notification_attempt_object(attempts[-1]) if attempts else None


def _history(record: NotificationRecord) -> list[dict[str, object]]:
    return [notification_attempt_object(a) for a in record.attempts_list]


class NotificationObject(BaseModel):
    """One message of an alert to one channel, from the outbox: sent once by whichever
    node claims it, retried with back-off for at most an hour, every attempt recorded."""

    id: str = Field(pattern=r"^ntf_[a-z0-9]+$")
    object: Literal["notification"]
    alert: Annotated[str | None, From("alert_id")]
    channel: Annotated[str, From("channel_id")]
    member: Annotated[str | None, From("member_id")] = Field(
        description="The member told through the channel, or null for a channel target."
    )
    kind: NotificationKind
    step: int | None = Field(description="The escalation step it belongs to, or null.")
    status: NotificationStatus = Field(
        description="pending until sent; cancelled when the alert was acknowledged or "
        "resolved before it went out."
    )
    attempts: int = Field(description="How many attempts were made.")
    last_attempt: Annotated[NotificationAttemptObject | None, Computed(_last_attempt)]
    attempt_history: Annotated[list[NotificationAttemptObject], Computed(_history)] = Field(
        description="Every attempt, oldest first."
    )
    next_attempt_at: Annotated[int | None, From("next_attempt_at", convert=math.ceil)] = Field(
        description="When the next attempt is due (epoch seconds, rounded up), or null when "
        "settled."
    )
    created: int


alert_object = shaper(AlertObject, AlertRecord)
"""An alert as the API shows it."""

notification_object = shaper(NotificationObject, NotificationRecord)
"""A notification with its attempts as the API shows it."""


class AlertList(ListObject):
    """A page of alerts, newest first."""

    data: list[AlertObject]


class NotificationList(ListObject):
    """Every notification of an alert, oldest first, each with its attempts."""

    data: list[NotificationObject]
