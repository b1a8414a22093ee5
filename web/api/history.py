"""A monitor's history as objects: its checks (docs/checks.md, "The checks of a monitor")
and its availability (docs/history.md, "Availability")."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from store import CheckRecord
from store.history import Availability

from .common import ListObject
from .shaping import Computed, From, Nested, OmitNull, shaper


class CheckError(BaseModel):
    """Why a check failed: a stable `code` (`timeout`, `connection_refused`,
    `tls_error`, `unexpected_status`, `assertion_failed`, `tls_expiring`, ...) and a
    `message` for people."""

    code: Annotated[str, From("error_code")]
    message: Annotated[str, From("error_message", null_as="")]


class CheckObject(BaseModel):
    """One check of a monitor: up or down, how long it took, and why it failed."""

    id: str = Field(pattern=r"^chk_[a-z0-9]+$")
    object: Literal["check"]
    monitor: Annotated[str, From("monitor_id")]
    status: Literal["up", "down"]
    response_time_ms: float
    status_code: int | None
    error: Annotated[CheckError | None, Nested(when="error_code")]
    tls_expires_at: int | None = Field(
        description="https: when the final response's certificate expires (epoch seconds)."
    )
    region: str | None = Field(
        description="The region of the node that made it (null: made before checks "
        "recorded their region; docs/regions.md)."
    )
    created: int


check_object = shaper(CheckObject, CheckRecord)
"""A check as the API shows it: ``error`` null when the check has no error code."""


class CheckList(ListObject):
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
    maintenance_seconds: int = Field(
        description="Seconds inside maintenance windows with exclude_from_availability "
        "that cover the monitor; left out of uptime_percent. Up, down, paused, unknown "
        "and maintenance seconds add up to end - start."
    )
    checks: int
    failed_checks: int
    incidents: int
    longest_down_seconds: int
    response_time_ms: Annotated[ResponseTimes, Computed(Availability.response_time_ms)]


availability_part = shaper(AvailabilityPart, Availability)
"""One range or bucket's figures (a ``store.history.Availability``) as the API shows them."""


def _monitor(_: Availability, monitor_id: str) -> str:
    return monitor_id


def _series(_: Availability, parts: list[Availability] | None) -> list[dict[str, Any]] | None:
    return None if parts is None else [availability_part(part) for part in parts]


class _AvailabilityOf(BaseModel):
    """The head of an availability object (its first keys)."""

    object: Literal["availability"]
    monitor: Annotated[str, Computed(_monitor, uses=("monitor_id",))]


class AvailabilityObject(AvailabilityPart, _AvailabilityOf):
    """A monitor's availability from `start` to `end`: seconds up, down, paused,
    unknown and in maintenance, checks, incidents and response times; `series` holds
    hour or day buckets when a `granularity` is asked for."""

    series: Annotated[
        list[AvailabilityPart] | None, Computed(_series, uses=("parts",)), OmitNull()
    ] = None


availability_object = shaper(AvailabilityObject, Availability)
"""A monitor's availability: ``availability_object(whole, monitor_id=..., parts=...)``
with ``parts`` the series' buckets, or None (no ``series`` key) without a granularity."""
