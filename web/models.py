"""Request and response bodies as pydantic models (spec 2 and 4; DESIGN: lengths and bounds).

Request models are strict (no coercion: ``"60"`` is not an integer, ``60.0`` is not an
integer, ``true`` is not a number) and forbid unknown fields, which also refuses mass
assignment of ``id``, ``object``, ``status``, ``created`` or ``account``. Response models
describe the objects for the OpenAPI document; responses themselves are built by
:mod:`web.objects` and checked against these models in the tests.

Limits (DESIGN): name and title 1-200 characters; description at most 10,000; url 1-2,048;
interval_seconds 1-86,400; timeout_seconds 1-60 and not above interval_seconds;
failure_threshold and success_threshold 1-10 (README, "API decisions"); metadata per
spec 2.4.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticCustomError

from engine import PROBE_TYPES

from .http_check_models import (
    AssertionObject,
    Assertions,
    RequestBody,
    RequestHeaders,
    TlsCaBundle,
    TlsExpiryDays,
    TlsVerify,
)

MAX_METADATA_KEYS = 50
MAX_METADATA_KEY_LENGTH = 40
MAX_METADATA_VALUE_LENGTH = 500

if TYPE_CHECKING:
    MonitorType = str
else:
    MonitorType = Literal[tuple(PROBE_TYPES)]
"""A monitor's ``type``: a name in `engine.PROBE_TYPES`, the one list of the probe types
(a Literal of them, so a wrong value is the 422 every enum field gives, and the OpenAPI
document lists them)."""
MonitorStatus = Literal["up", "down", "pending", "paused"]
IncidentStatus = Literal["investigating", "identified", "monitoring", "resolved"]
Severity = Literal["critical", "major", "minor", "maintenance"]
HttpMethod = Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


def _is_text(value: str) -> bool:
    """False for a string holding a lone surrogate (JSON allows ``"\\ud800"``; Postgres
    and UTF-8 do not). Pydantic refuses them in plain string fields but not in dict keys."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_metadata(value: dict[str, str]) -> dict[str, str]:
    """Spec 2.4 rules 1-3 on what a request sends (rule 1 is checked again after a merge)."""
    if len(value) > MAX_METADATA_KEYS:
        raise PydanticCustomError(
            "metadata_too_many_keys",
            f"metadata may have at most {MAX_METADATA_KEYS} keys, got {len(value)}",
        )
    for key, item in value.items():
        if not (_is_text(key) and _is_text(item)):
            raise PydanticCustomError(
                "metadata_invalid",
                "metadata keys and values must be valid Unicode text (a lone surrogate "
                "such as \\ud800 cannot be stored)",
            )
        if not 0 < len(key) <= MAX_METADATA_KEY_LENGTH:
            raise PydanticCustomError(
                "metadata_key_too_long",
                f"metadata keys must be 1 to {MAX_METADATA_KEY_LENGTH} characters: {key[:50]!r}",
            )
        if len(item) > MAX_METADATA_VALUE_LENGTH:
            raise PydanticCustomError(
                "metadata_value_too_long",
                f"metadata values may be at most {MAX_METADATA_VALUE_LENGTH} characters "
                f"(key {key!r})",
            )
    return value


Metadata = Annotated[
    dict[str, str],
    AfterValidator(_check_metadata),
    Field(
        json_schema_extra={
            "maxProperties": MAX_METADATA_KEYS,
            "propertyNames": {"minLength": 1, "maxLength": MAX_METADATA_KEY_LENGTH},
            "additionalProperties": {"type": "string", "maxLength": MAX_METADATA_VALUE_LENGTH},
        }
    ),
]
"""Metadata as a request sends it: string keys to string values; ``""`` removes a key.
The JSON schema states spec 2.4's limits (the validator above enforces them)."""

Absent = SkipJsonSchema[None]
"""The default of a PATCH field that may be left out but not set to null: None stands for
"not sent" in the model, and the OpenAPI document does not offer null."""

Name = Annotated[str, Field(min_length=1, max_length=200)]
Url = Annotated[str, Field(min_length=1, max_length=2048)]
Interval = Annotated[int, Field(ge=1, le=86_400, description="Seconds between checks.")]
Timeout = Annotated[int, Field(ge=1, le=60, description="Seconds a check may take.")]
StatusCode = Annotated[int, Field(ge=100, le=599)]
Threshold = Annotated[int, Field(ge=1, le=10)]
Description = Annotated[str, Field(max_length=10_000)]
MonitorId = Annotated[str, Field(pattern=r"^mon_[a-z0-9]{1,64}$")]
AffectedId = Annotated[str, Field(pattern=r"^(mon|hbt)_[a-z0-9]{1,64}$")]
"""An incident's affected monitor: a monitor or a heartbeat (extensions part 7: the
incident a heartbeat opens names its ``hbt_`` id, and a PATCH may send that list back)."""
AffectedMonitors = Annotated[
    list[AffectedId],
    Field(
        max_length=100,
        description="The affected monitors and heartbeats: the account's own, at most 100.",
    ),
]
Postmortem = Annotated[str, Field(max_length=50_000)]

_REQUEST = ConfigDict(strict=True, extra="forbid")


def _drop_absent_defaults(schema: dict[str, Any]) -> None:
    """JSON-schema hook of PATCH bodies: a field that may not be null has no ``default:
    null`` either (an :data:`Absent` default only means "not sent")."""
    for field in schema.get("properties", {}).values():
        if field.get("default", ...) is None and "anyOf" not in field:
            del field["default"]


_PATCH = ConfigDict(strict=True, extra="forbid", json_schema_extra=_drop_absent_defaults)


class MonitorCreate(BaseModel):
    """The body of `POST /monitors`: `name`, `url` and `type` are required, the
    other fields have the defaults shown. The http fields are left out or null on tcp, dns
    and ping monitors."""

    model_config = _REQUEST

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
    metadata: Metadata = Field(default_factory=dict)


class MonitorUpdate(BaseModel):
    """The body of `PATCH /monitors/{id}`: only the fields to change. `type` cannot
    change; `metadata` is merged key by key; `request_headers`, `request_body`,
    `assertions`, `tls_expiry_days` and `tls_ca_bundle` may be set to null."""

    model_config = _PATCH

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
    metadata: Metadata | Absent = None


class IncidentCreate(BaseModel):
    """The body of `POST /incidents`."""

    model_config = _REQUEST

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

    model_config = _PATCH

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

    model_config = _REQUEST

    message: Annotated[str, Field(min_length=1, max_length=10_000)]
    status: IncidentStatus | None = None


class IncidentResolve(BaseModel):
    """The body of `POST /incidents/{id}/resolve`, which may be left out."""

    model_config = _REQUEST

    resolution_message: Description | None = None


class EmptyBody(BaseModel):
    """The body of pause and resume: none, or an empty object."""

    model_config = _REQUEST


# ---- response objects (documentation and tests) ---------------------------------------


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
    last_checked_at: int | None = Field(description="Epoch seconds of the latest check.")
    created: int
    updated: int
    metadata: dict[str, str]


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
    monitor: str | None = Field(description="The monitor that opened it, or null.")
    monitors: list[str]
    postmortem: str | None
    metadata: dict[str, str]


class IncidentUpdateObject(BaseModel):
    """An entry of an incident's timeline: the incident's status after it and an
    optional message."""

    id: str = Field(pattern=r"^inu_[a-z0-9]+$")
    object: Literal["incident_update"]
    incident: str
    status: IncidentStatus
    message: str | None
    created: int


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


class CheckError(BaseModel):
    """Why a check failed: a stable `code` (`timeout`, `connection_refused`,
    `tls_error`, `unexpected_status`, `assertion_failed`, `tls_expiring`, ...) and a
    `message` for people."""

    code: str
    message: str


class CheckObject(BaseModel):
    """One check of a monitor: up or down, how long it took, and why it failed."""

    id: str = Field(pattern=r"^chk_[a-z0-9]+$")
    object: Literal["check"]
    monitor: str
    status: Literal["up", "down"]
    response_time_ms: float
    status_code: int | None
    error: CheckError | None
    tls_expires_at: int | None = Field(
        description="https: when the final response's certificate expires (epoch seconds)."
    )
    created: int


class _List(BaseModel):
    object: Literal["list"]
    has_more: bool
    url: str


class MonitorList(_List):
    """A page of monitors."""

    data: list[MonitorObject]


class IncidentList(_List):
    """A page of incidents."""

    data: list[IncidentObject]


class IncidentUpdateList(_List):
    """A page of an incident's timeline, oldest first."""

    data: list[IncidentUpdateObject]


class EventList(_List):
    """A page of events, newest first."""

    data: list[EventObject]


class CheckList(_List):
    """A page of checks, newest first."""

    data: list[CheckObject]


class ResponseTimes(BaseModel):
    """Response times over the range, in milliseconds: the mean and percentiles;
    null when there was no check."""

    mean: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None


class AvailabilityPart(BaseModel):
    """One bucket (an hour or a day) of an availability series."""

    start: int
    end: int
    uptime_percent: float | None
    up_seconds: int
    down_seconds: int
    paused_seconds: int
    unknown_seconds: int
    checks: int
    failed_checks: int
    incidents: int
    longest_down_seconds: int
    response_time_ms: ResponseTimes


class AvailabilityObject(AvailabilityPart):
    """A monitor's availability from `start` to `end`: seconds up, down, paused and
    unknown, checks, incidents and response times; `series` holds hour or day buckets
    when a `granularity` is asked for."""

    object: Literal["availability"]
    monitor: str
    series: list[AvailabilityPart] | None = None


class ErrorDetail(BaseModel):
    """The fields of an error: `code` is stable (each response lists those it may
    carry), `param` names the field or parameter at fault (or is null), `request_id`
    identifies the request for support."""

    type: Literal[
        "api_error",
        "authentication_error",
        "invalid_request_error",
        "rate_limit_error",
        "permission_error",
        "idempotency_error",
    ]
    code: str
    message: str
    param: str | None
    request_id: str


class ErrorResponse(BaseModel):
    """Every error response: `{"error": {...}}`."""

    error: ErrorDetail


def merge_metadata(current: dict[str, str], patch: dict[str, str]) -> dict[str, str]:
    """Spec 2.4 rules 4-5: keys sent are set, others stay, ``""`` removes a key.

    Pure; the caller checks the 50-key limit on the result.
    """
    merged = dict(current)
    for key, value in patch.items():
        if value == "":
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


JsonObject = dict[str, Any]
