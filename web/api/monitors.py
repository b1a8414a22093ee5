"""The monitor's request bodies and object (docs/checks.md; docs/api.md, "Conventions and
decisions").

Limits (docs/api.md, "Conventions and decisions"): interval_seconds 1-86,400;
timeout_seconds 1-60 and not above interval_seconds; failure_threshold and
success_threshold 1-10. The http fields are :mod:`web.api.http_checks`'.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, Field

from engine import PROBE_TYPES
from store import MonitorRecord, dependencies

from .common import (
    PATCH,
    REQUEST,
    Absent,
    EscalationPolicyId,
    ListObject,
    Metadata,
    MonitorId,
    Name,
    Severity,
    Url,
)
from .http_checks import (
    AssertionObject,
    Assertions,
    RequestBody,
    RequestHeaders,
    TlsCaBundle,
    TlsExpiryDays,
    TlsVerify,
)
from .shaping import shaper

if TYPE_CHECKING:
    MonitorType = str
else:
    MonitorType = Literal[tuple(PROBE_TYPES)]
"""A monitor's ``type``: a name in `engine.PROBE_TYPES`, the one list of the probe types
(a Literal of them, so a wrong value is the 422 every enum field gives, and the OpenAPI
document lists them)."""
MonitorStatus = Literal["up", "down", "pending", "paused"]
HttpMethod = Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

Interval = Annotated[int, Field(ge=1, le=86_400, description="Seconds between checks.")]
Timeout = Annotated[int, Field(ge=1, le=60, description="Seconds a check may take.")]
StatusCode = Annotated[int, Field(ge=100, le=599)]
Threshold = Annotated[int, Field(ge=1, le=10)]
DependsOn = Annotated[
    list[MonitorId],
    Field(
        max_length=dependencies.MAX_DEPENDENCIES,
        description="The monitors it depends on (mon_ ids of the account, at most 10, no "
        "cycle): while one of them is down, its own move into down opens no incident and "
        "raises no alert (docs/incidents.md, Dependencies).",
    ),
]


RegionName = Annotated[str, Field(pattern=r"^[a-z0-9-]{1,32}$", description="A region's name.")]
Regions = Annotated[
    list[RegionName],
    Field(
        min_length=1,
        max_length=10,
        description="The regions that probe it, each on every interval (1 to 10 names, "
        "unique); null: probed by one node of any region (docs/regions.md).",
    ),
]
RegionQuorum = Annotated[
    int,
    Field(
        ge=1,
        le=10,
        description="How many of regions must see it down for it to be down (1 to the "
        "number of regions; default a majority, floor(n/2)+1; null without regions).",
    ),
]
RegionView = Literal["up", "down", "pending", "unknown"]


class SuppressedBy(BaseModel):
    """What holds back the incident and alert of a monitor's or a heartbeat's current
    down episode (docs/maintenance.md, Alerts held back; docs/incidents.md, Dependencies)."""

    type: Literal["maintenance", "dependency"]
    id: str = Field(
        description="The maintenance window it went down in (mnt_), or the monitor it "
        "depends on that was down (mon_)."
    )


class MonitorCreate(BaseModel):
    """The body of `POST /monitors`: `name`, `url` and `type` are required, the
    other fields have the defaults shown. The http fields are left out or null on tcp, dns
    and ping monitors."""

    model_config = REQUEST

    name: Name
    url: Url
    type: MonitorType
    interval_seconds: Interval = 60
    timeout_seconds: Timeout = 30
    method: HttpMethod | None = Field(default=None, description="http only; default GET.")
    expected_status_code: StatusCode | None = Field(
        default=None, description="http only; default 200."
    )
    failure_threshold: Threshold = Field(
        default=2, description="Consecutive failed checks that make the monitor down."
    )
    success_threshold: Threshold = Field(
        default=1, description="Consecutive good checks that make the monitor up."
    )
    auto_incidents: bool = Field(
        default=True, description="Open an incident when the monitor goes down."
    )
    incident_severity: Severity = Field(
        default="major", description="Severity of the incidents the monitor opens."
    )
    request_headers: RequestHeaders | None = None
    request_body: RequestBody | None = None
    assertions: Assertions | None = None
    tls_expiry_days: TlsExpiryDays | None = None
    tls_verify: TlsVerify | None = None
    tls_ca_bundle: TlsCaBundle | None = None
    escalation_policy: EscalationPolicyId | None = None
    depends_on: DependsOn = Field(default_factory=list)
    regions: Regions | None = None
    region_quorum: RegionQuorum | None = None
    metadata: Metadata = Field(default_factory=dict)


class MonitorUpdate(BaseModel):
    """The body of `PATCH /monitors/{id}`: only the fields to change. `type` cannot
    change; `metadata` is merged key by key; `request_headers`, `request_body`,
    `assertions`, `tls_expiry_days` and `tls_ca_bundle` may be set to null."""

    model_config = PATCH

    name: Name | Absent = None
    url: Url | Absent = None
    interval_seconds: Interval | Absent = None
    timeout_seconds: Timeout | Absent = None
    method: HttpMethod | Absent = None
    expected_status_code: StatusCode | Absent = None
    failure_threshold: Threshold | Absent = None
    success_threshold: Threshold | Absent = None
    auto_incidents: bool | Absent = None
    incident_severity: Severity | Absent = None
    request_headers: RequestHeaders | None = None
    request_body: RequestBody | None = None
    assertions: Assertions | None = None
    tls_expiry_days: TlsExpiryDays | None = None
    tls_verify: TlsVerify | Absent = None
    tls_ca_bundle: TlsCaBundle | None = None
    escalation_policy: EscalationPolicyId | None = None
    depends_on: DependsOn | Absent = None
    regions: Regions | None = None
    region_quorum: RegionQuorum | None = None
    metadata: Metadata | Absent = None


class MonitorObject(BaseModel):
    """A monitor. `method`, `expected_status_code` and the http fields
    (`request_headers` to `tls_ca_bundle`) are null on tcp, dns and ping monitors."""

    id: str = Field(pattern=r"^mon_[a-z0-9]+$")
    object: Literal["monitor"]
    name: str
    url: str
    type: MonitorType
    status: MonitorStatus
    interval_seconds: int
    timeout_seconds: int
    method: str | None
    expected_status_code: int | None
    failure_threshold: int
    success_threshold: int
    auto_incidents: bool
    incident_severity: Severity
    request_headers: dict[str, str] | None
    request_body: str | None
    assertions: list[AssertionObject] | None
    tls_expiry_days: int | None
    tls_verify: bool | None
    tls_ca_bundle: str | None
    escalation_policy: str | None
    depends_on: list[str]
    regions: list[str] | None
    region_quorum: int | None
    region_status: dict[str, RegionView] | None = Field(
        description="Each region's view: up, down, pending, or unknown (no check from "
        "that region for more than two intervals and 10 s: no live node there); null "
        "without regions (docs/regions.md)."
    )
    suppressed_by: SuppressedBy | None = Field(
        description="While it is down without an incident or alert because it went down "
        "in a maintenance window with suppress_alerts, or while a monitor it depends on "
        "was down: that window or monitor (the window first); else null."
    )
    in_maintenance: bool = Field(
        description="Whether an occurrence of a maintenance window covers it now."
    )
    last_checked_at: int | None = Field(description="Epoch seconds of the latest check.")
    badge_key: str | None = Field(
        description="The secret of its public badges (`/badges/{badge_key}/status.svg`, "
        "`uptime.svg`, `response-time.svg`; docs/badges.md), or null: badges off. Set or "
        "rotated by `POST /monitors/{id}/badge-key`; events show it as null."
    )
    created: int
    updated: int
    metadata: dict[str, str]


monitor_object = shaper(MonitorObject, MonitorRecord)
"""A monitor as the API shows it (``assertions`` in their documented key order: jsonb
keeps its own)."""


class MonitorList(ListObject):
    """A page of monitors."""

    data: list[MonitorObject]
