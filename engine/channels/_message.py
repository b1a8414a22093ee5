"""What a notification channel is given and what it gives back: the `Message` (one alert
notice or shift reminder, rendered per channel type), the `ChannelSettings` of the process,
the `Attempt` (one try at sending), the errors of config validation, and the few wordings
every type shares (the headline, the severity's name), so that an alert reads the same on
every channel (docs/alerts.md).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final
from urllib.parse import urlsplit, urlunsplit
from zoneinfo import ZoneInfo

from engine.delivery import DeliveryClient
from engine.policy import TargetPolicy
from store.notifications import ShiftNotice

__all__ = [
    "KINDS",
    "TRIGGERING_KINDS",
    "Attempt",
    "ChannelSettings",
    "InvalidChannelConfig",
    "Message",
    "SmtpNotConfigured",
    "clip",
    "facts",
    "headline",
    "iso_time",
    "local_time",
    "shift_summary",
]

KINDS: Final = (
    "trigger",
    "escalation",
    "reminder",
    "acknowledged",
    "resolved",
    "test",
    "shift_starting",
)
"""The kinds of notification (docs/alerts.md): the alert's trigger, a later step of its
escalation, a reminder (the policy's steps walked again), its acknowledgement, its
resolution, a test sent from ``POST /notification-channels/:id/test``, and a member's
shift starting in 10 minutes (docs/on-call.md, "Shift reminders"), which is about a
schedule, not an alert."""

TRIGGERING_KINDS: Final = frozenset({"trigger", "escalation", "reminder", "test"})
"""The kinds that ask someone to act: providers with incidents of their own (PagerDuty,
Opsgenie) open or re-notify one for these."""

_PREFIX: Final = {
    "trigger": "DOWN",
    "escalation": "DOWN",
    "reminder": "STILL DOWN",
    "acknowledged": "ACKNOWLEDGED",
    "resolved": "RESOLVED",
    "test": "TEST",
    "shift_starting": "ON CALL SOON",
}

_RESOURCE_LABELS: Final = {
    "mon": "Monitor",
    "hbt": "Heartbeat",
    "nch": "Channel",
    "sch": "Schedule",
}
"""The label of a message's resource by its id's prefix: a test message is about its
channel (``POST /notification-channels/:id/test``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One notice about an alert (or a shift), before it is rendered for a channel type.

    It carries nothing secret of the monitor: ``resource_url`` is the monitor's url with
    any user and password removed by the renderers (`public_url`), and never its request
    headers or body.

    Attributes:
        kind: one of `KINDS`.
        alert_id: the ``alt_`` id, or None for a test message and a shift reminder.
        resource_id: the ``mon_`` or ``hbt_`` id the alert is about (a test message's
            ``nch_`` channel, a shift reminder's ``sch_`` schedule).
        resource_name: its name.
        resource_url: a monitor's url, or None (a heartbeat has none).
        status: the alert's status: ``triggered``, ``acknowledged`` or ``resolved``.
        severity: ``critical``, ``major``, ``minor`` or ``maintenance`` (the monitor's
            ``incident_severity``).
        summary: ``"<name> is down: <error message>"``.
        error: the failing check's error message, or None.
        triggered_at: when the alert was raised, epoch seconds.
        ack_url: the one-click acknowledge link (``<public url>/alerts/ack/<token>``), or
            None when the notice needs none (acknowledged, resolved).
        step: the escalation step (0 based) this notice belongs to, or None.
        shift: the shift a ``shift_starting`` notice tells of, else None (its severity
            is ``info``, its status ``scheduled``, ``triggered_at`` when it was written).
    """

    kind: str
    alert_id: str | None
    resource_id: str
    resource_name: str
    resource_url: str | None
    status: str
    severity: str
    summary: str
    error: str | None
    triggered_at: int
    ack_url: str | None
    step: int | None
    shift: ShiftNotice | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelSettings:
    """How this process sends notifications (``uptrio serve`` flags; docs/alerts.md).

    Attributes:
        smtp_url: the mail relay, ``smtp://user:password@host:port`` (STARTTLS when the
            relay offers it; port 25 by default) or ``smtps://…`` (TLS from the first
            byte; port 465 by default); None: no relay, email channels are refused.
        smtp_from: the ``From`` address of notification emails; None:
            ``uptrio@<relay host>``.
        provider_bases: a channel type's name to a base url (``scheme://host[:port]``)
            that replaces the provider's (``--provider-base NAME=URL``): a proxy, or a
            local receiver in tests.
        policy: where HTTP sends may connect (the monitors' target policy); None: the
            default `TargetPolicy` (cloud metadata refused).
        timeout_seconds: the deadline of one attempt, whole (resolution, connect, TLS,
            request, answer; every SMTP step), seconds.
        ssl_context: verifies the TLS of providers and of the mail relay; None: the
            system's CAs, host names checked, loaded at each send (a few milliseconds
            of CPU: the notifier loads them once and passes them here). Tests pass one
            trusting their own CA.
        client: an open delivery client that HTTP sends go through (the notifier's,
            shared by all its sends: its pool keeps connections to providers alive);
            None: each send opens its own, with ``policy`` and ``ssl_context`` (the
            channel test of the API).
    """

    smtp_url: str | None = None
    smtp_from: str | None = None
    provider_bases: Mapping[str, str] = field(default_factory=dict)
    policy: TargetPolicy | None = None
    timeout_seconds: float = 10.0
    ssl_context: ssl.SSLContext | None = None
    client: DeliveryClient | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    """The outcome of one try at sending a notice (object ``notification_attempt``).

    Attributes:
        status: ``succeeded`` or ``failed``.
        response_status: the provider's HTTP status (the SMTP reply code of a relay that
            refused the mail), or None when no answer came.
        error: None on success; else ``"<code>: <sentence>"``, the code one of the
            webhook deliveries' (``timeout``, ``connection_refused``, ``target_denied``,
            ``unexpected_status``, …: docs/webhooks.md) or ``smtp_error``,
            ``smtp_not_configured``, ``invalid_config``, ``internal_error``.
        duration_ms: from the start of the attempt to its end, milliseconds.
    """

    status: str
    response_status: int | None
    error: str | None
    duration_ms: float

    @classmethod
    def failed(cls, error: str, *, status: int | None = None, duration_ms: float = 0.0) -> Attempt:
        """A failed attempt with ``error`` (``"<code>: <sentence>"``)."""
        return cls(status="failed", response_status=status, error=error, duration_ms=duration_ms)


class InvalidChannelConfig(ValueError):
    """A channel's ``config`` is refused (the API's 422 on ``config.<param>``).

    Attributes:
        param: the offending config key (``"config"`` when the config as a whole is
            wrong, ``"type"`` for an unknown channel type).
    """

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param


class SmtpNotConfigured(ValueError):
    """An email channel on a server without a mail relay (``--smtp-url``): the API's
    422 ``smtp_not_configured``."""


def headline(message: Message) -> str:
    """``"[DOWN] <name>"``, ``"[RESOLVED] <name>"``…: short enough for a lock screen and
    an email subject (at most 78 characters, RFC 5322's line length)."""
    return clip(f"[{_PREFIX.get(message.kind, message.kind.upper())}] {message.resource_name}", 78)


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, ``…`` marking a cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def public_url(url: str | None) -> str | None:
    """``url`` without its user and password (a monitor's url may carry them), or None."""
    if url is None:
        return None
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=host))


def facts(message: Message) -> list[tuple[str, str]]:
    """The details every rendering shows, as (label, value) pairs, in order: severity,
    status, since (UTC), the monitor, heartbeat or (a test message) channel, its url, the
    error, the step. A shift reminder's: the schedule, the member, the shift's start and
    end in the schedule's time zone, and the start in UTC."""
    if message.shift is not None:
        shift = message.shift
        return [
            ("Schedule", f"{shift.schedule_name} ({shift.schedule_id})"),
            ("Member", shift.member_name or shift.member_id),
            ("Starts", local_time(shift.starts_at, shift.time_zone)),
            ("Ends", local_time(shift.ends_at, shift.time_zone)),
            ("Starts (UTC)", _utc(shift.starts_at)),
        ]
    resource = _RESOURCE_LABELS.get(message.resource_id.split("_", 1)[0], "Resource")
    found = [
        ("Severity", message.severity),
        ("Status", message.status),
        ("Since", _utc(message.triggered_at)),
        (resource, message.resource_id),
    ]
    url = public_url(message.resource_url)
    if url is not None:
        found.append(("URL", url))
    if message.error:
        found.append(("Error", message.error))
    if message.step is not None:
        found.append(("Escalation step", str(message.step + 1)))
    return found


def _utc(epoch_seconds: int) -> str:
    """``2025-01-02 03:04:05 UTC``."""
    return iso_time(epoch_seconds).replace("T", " ").replace("+00:00", " UTC")


def local_time(epoch_seconds: int, time_zone: str) -> str:
    """Epoch seconds as a wall time of the IANA ``time_zone`` with its abbreviation,
    ``Mon 07 Dec 2026 09:00 CET`` (zoneinfo)."""
    return datetime.fromtimestamp(epoch_seconds, ZoneInfo(time_zone)).strftime(
        "%a %d %b %Y %H:%M %Z"
    )


def shift_summary(shift: ShiftNotice) -> str:
    """``"<member>'s on-call shift for <schedule> starts <local start> and ends <local
    end>"``: a shift reminder's one line."""
    who = shift.member_name or shift.member_id
    return (
        f"{who}'s on-call shift for {shift.schedule_name} starts "
        f"{local_time(shift.starts_at, shift.time_zone)} and ends "
        f"{local_time(shift.ends_at, shift.time_zone)}"
    )


def iso_time(epoch_seconds: int) -> str:
    """Epoch seconds as ISO 8601 in UTC (``2025-01-02T03:04:05+00:00``)."""
    return datetime.fromtimestamp(epoch_seconds, UTC).isoformat()
