"""Request and response bodies of the heartbeat endpoints (docs/heartbeats.md, "API"),
in the style of :mod:`web.api.common` (strict requests, unknown fields refused).

Rules (docs/heartbeats.md, "API"): ``name`` 1 to 200 characters; ``period_seconds`` 30 to
2,592,000 (30 days), required; ``grace_seconds`` 0 to 86,400, default 60;
``auto_incidents`` default true; ``incident_severity`` default ``major``; metadata as
everywhere (docs/api.md, "Conventions and decisions"). ``status``, ``ping_url`` and
``last_ping_at`` are read-only.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from store import HeartbeatRecord, PingRecord

from .common import PATCH, REQUEST, Absent, EscalationPolicyId, ListObject, Metadata, Name, Severity
from .monitors import SuppressedBy
from .shaping import Computed, From, shaper

__all__ = [
    "HeartbeatCreate",
    "HeartbeatList",
    "HeartbeatObject",
    "HeartbeatUpdate",
    "PingList",
    "PingObject",
    "heartbeat_object",
    "ping_object",
]

Period = Annotated[
    int,
    Field(ge=30, le=2_592_000, description="Seconds between two pings the job promises."),
]
Grace = Annotated[
    int,
    Field(ge=0, le=86_400, description="Seconds of lateness tolerated after a period."),
]
HeartbeatStatus = Literal["pending", "up", "down", "paused"]
PingKind = Literal["success", "fail", "start"]


class HeartbeatCreate(BaseModel):
    """The body of `POST /heartbeats`."""

    model_config = REQUEST

    name: Name
    period_seconds: Period
    grace_seconds: Grace = 60
    auto_incidents: bool = Field(
        default=True, description="Open an incident when the heartbeat goes down."
    )
    incident_severity: Severity = Field(
        default="major", description="Severity of the incidents the heartbeat opens."
    )
    escalation_policy: EscalationPolicyId | None = None
    metadata: Metadata = Field(default_factory=dict)


class HeartbeatUpdate(BaseModel):
    """The body of `PATCH /heartbeats/{id}`: only the fields to change; `metadata`
    is merged key by key."""

    model_config = PATCH

    name: Name | Absent = None
    period_seconds: Period | Absent = None
    grace_seconds: Grace | Absent = None
    auto_incidents: bool | Absent = None
    incident_severity: Severity | Absent = None
    escalation_policy: EscalationPolicyId | None = None
    metadata: Metadata | Absent = None


def _ping_url(record: HeartbeatRecord, ping_base: str) -> str:
    """``<ping_base>/ping/<key>`` (``ping_base``: ``--public-url``, else the base URL the
    request came to; docs/heartbeats.md, "The ping URL")."""
    return f"{ping_base}/ping/{record.ping_key}"


class HeartbeatObject(BaseModel):
    """A heartbeat: a job that requests its `ping_url` at least every
    `period_seconds`; with no ping for `period_seconds + grace_seconds` it is down."""

    id: str = Field(pattern=r"^hbt_[a-z0-9]+$")
    object: Literal["heartbeat"]
    name: str
    period_seconds: int
    grace_seconds: int
    status: HeartbeatStatus
    ping_url: Annotated[str, Computed(_ping_url, uses=("ping_base",))] = Field(
        pattern=r"/ping/[0-9a-f]{32}$",
        description="GET, HEAD or POST it (no token): a success; /fail, /start after it.",
    )
    last_ping_at: int | None = Field(description="Epoch seconds of the latest ping.")
    auto_incidents: bool
    incident_severity: Severity
    escalation_policy: str | None
    suppressed_by: SuppressedBy | None = Field(
        description="While it is down without an incident or alert because it went down "
        "in a maintenance window with suppress_alerts: that window; else null."
    )
    in_maintenance: bool = Field(
        description="Whether an occurrence of a maintenance window covers it now."
    )
    created: int
    updated: int
    metadata: dict[str, str]


class PingObject(BaseModel):
    """One ping of a heartbeat: `success`, `fail` or `start`."""

    id: str = Field(pattern=r"^png_[a-z0-9]+$")
    object: Literal["ping"]
    heartbeat: Annotated[str, From("heartbeat_id")]
    kind: PingKind
    created: int
    duration_ms: float | None = Field(
        description="Milliseconds since the start ping before it, or null."
    )
    source_ip: str | None


heartbeat_object = shaper(HeartbeatObject, HeartbeatRecord)
"""A heartbeat as the API shows it: ``heartbeat_object(record, ping_base=...)``."""

ping_object = shaper(PingObject, PingRecord)
"""A ping as ``GET /heartbeats/:id/pings`` shows it."""


class HeartbeatList(ListObject):
    """A page of heartbeats."""

    data: list[HeartbeatObject]


class PingList(ListObject):
    """A page of a heartbeat's pings, newest first."""

    data: list[PingObject]
