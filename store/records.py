"""Rows as the store hands them out: frozen dataclasses, one per table.

Field names are the column names; timestamps are integer epoch seconds (docs/api.md,
Conventions). These are storage records, not API objects: the web layer shapes them into
responses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Self


class _FromRow:
    """Build a record from an asyncpg row (or mapping), ignoring extra columns.

    A frozen, slotted record without ``__post_init__`` (most of them) is filled through
    its slots' descriptors, the setters taken once when ``@dataclass(slots=True)`` makes
    the class: what its ``__init__`` would store, without a frozen ``__setattr__`` per
    field (a page of 100 monitors is read in a third of the time). Any other record goes
    through its ``__init__``.
    """

    _row_setters: ClassVar[tuple[tuple[Callable[[Any, Any], None], str], ...] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        names = cls.__dict__.get("__dataclass_fields__")
        if names is None or "__slots__" not in cls.__dict__ or hasattr(cls, "__post_init__"):
            cls._row_setters = None  # not (yet) the slotted dataclass: through __init__
            return
        cls._row_setters = tuple((cls.__dict__[name].__set__, name) for name in names)

    @classmethod
    def from_row(cls, row: Any) -> Self:
        setters = cls._row_setters
        if setters is None:
            names = cls.__dataclass_fields__  # type: ignore[attr-defined]
            return cls(**{k: row[k] for k in names})
        record = object.__new__(cls)
        for setter, name in setters:
            setter(record, row[name])
        return record

    @classmethod
    def from_snapshot(cls, snapshot: dict[str, Any]) -> Self:
        """Build a record from an event's stored snapshot (:mod:`store.events`): extra keys
        are ignored, and a field the snapshot predates takes its default (a snapshot
        written before a migration added the column)."""
        names = cls.__dataclass_fields__  # type: ignore[attr-defined]
        return cls(**{k: snapshot[k] for k in names if k in snapshot})

    def snapshot(self) -> dict[str, Any]:
        """The record as an event stores it: field name to value (JSON-able)."""
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)  # type: ignore[arg-type]
            if not f.metadata.get("internal")
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class AccountRecord(_FromRow):
    """An account: ``acct_`` id, unique name, pinned API version (None before its first token)."""

    id: str
    name: str
    api_version: str | None
    created: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenRecord(_FromRow):
    """An API token's record (the JWT itself is never stored; its ``sub`` is ``id``).

    ``name`` is the optional name given at creation (``uptrio tokens create --name``);
    ``expires_at`` and ``revoked_at`` are epoch seconds or None.
    """

    id: str
    account_id: str
    name: str | None
    permissions: list[str]
    created: int
    expires_at: int | None
    revoked_at: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenContext(_FromRow):
    """What authentication needs about a token, read in one query: the token and its
    account's name and pinned version."""

    id: str
    account_id: str
    account_name: str
    api_version: str | None
    permissions: list[str]
    expires_at: int | None
    revoked_at: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class MonitorRecord(_FromRow):
    """A monitor row plus ``last_checked_at`` (epoch seconds of its newest check, or None).

    ``run_epoch`` grows with every create, pause and resume; the engine writes a status
    only for the epoch it runs (see :func:`store.checks.write_check_batch`).
    ``request_headers``, ``request_body``, ``assertions`` and ``tls_expiry_days`` (days)
    are http's (docs/checks.md; migration 0006), like ``tls_verify`` and
    ``tls_ca_bundle`` (PEM text; migration 0014): None on the other types.
    """

    id: str
    account_id: str
    name: str
    url: str
    type: str
    status: str
    interval_seconds: int
    timeout_seconds: int
    method: str | None
    expected_status_code: int | None
    failure_threshold: int
    success_threshold: int
    run_epoch: int
    created: int
    updated: int
    metadata: dict[str, str]
    last_checked_at: int | None
    auto_incidents: bool = True
    incident_severity: str = "major"
    request_headers: dict[str, str] | None = None
    request_body: str | None = None
    assertions: list[dict[str, Any]] | None = None
    tls_expiry_days: int | None = None
    tls_verify: bool | None = None
    tls_ca_bundle: str | None = None
    escalation_policy: str | None = None
    depends_on: list[str] = field(default_factory=list)
    """The monitors it depends on (``mon_`` ids of its account, at most 10;
    ``store.dependencies``)."""
    suppressed_by: dict[str, str] | None = None
    """Why its current down episode opened no incident and raised no alert:
    ``{"type": "maintenance", "id": "mnt_..."}`` or ``{"type": "dependency", "id":
    "mon_..."}``, or None (``store.alerting``)."""
    regions: list[str] | None = None
    """The regions that probe it (1 to 10 names; one node of each: docs/several-nodes.md,
    Regions), or None: one node of any region (docs/regions.md)."""
    region_quorum: int | None = None
    """How many of ``regions`` must see it down for it to be down; None without regions."""
    region_status: dict[str, str] | None = None
    """Each region's view (``up``, ``down``, ``pending`` or ``unknown``: not heard for
    more than two intervals and 10 s; ``store.quorum``), computed by the read; None
    without regions."""
    badge_key: str | None = field(default=None, metadata={"internal": True})
    """The secret of its public badge URLs (32 hex digits; ``store.badges``), or None:
    badges off. Not part of an event's snapshot (events never carry it)."""
    in_maintenance: bool = False
    """Whether an occurrence of a maintenance window covers it now (``store.coverage``;
    computed by the read, not a column)."""
    maintenance_paused_until: int | None = field(default=None, metadata={"internal": True})
    """When (epoch seconds) the open occurrence of a window with ``pause_checks`` covering
    it ends, or None: its checks are not paused by maintenance (computed by the read;
    ``engine.monitor`` probes nothing before it). Not part of an event's snapshot."""
    settings_digest: int = field(default=0, metadata={"internal": True})
    """A 64-bit hash of its settings and run epoch (every column but ``status`` and
    ``updated``), computed by the store's queries (``store.monitors``): equal digests,
    same settings. Not part of an event's snapshot; 0 when not read from the database."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatRecord(_FromRow):
    """A heartbeat (docs/checks.md): a job that calls us at least every
    ``period_seconds`` (plus ``grace_seconds``). ``ping_key`` is the secret of its public
    ping URL (32 hex characters); ``last_ping_at`` the latest ping of any kind and
    ``last_success_at`` the latest success ping (epoch seconds, or None: the engine's
    deadline runs from it). ``run_epoch`` grows with every create, pause and resume."""

    id: str
    account_id: str
    name: str
    period_seconds: int
    grace_seconds: int
    status: str
    ping_key: str
    last_ping_at: int | None
    last_success_at: int | None
    auto_incidents: bool
    incident_severity: str
    run_epoch: int
    created: int
    updated: int
    metadata: dict[str, str]
    escalation_policy: str | None = None
    suppressed_by: dict[str, str] | None = None
    """Why its current down episode opened no incident and raised no alert:
    ``{"type": "maintenance", "id": "mnt_..."}``, or None (``store.alerting``)."""
    in_maintenance: bool = False
    """Whether an occurrence of a maintenance window covers it now (``store.coverage``;
    computed by the read, not a column)."""
    maintenance_paused_until: int | None = field(default=None, metadata={"internal": True})
    """When (epoch seconds) the open occurrence of a window with ``pause_checks`` covering
    it ends, or None (computed by the read; ``engine.heartbeat`` lets no deadline pass
    before it). Not part of an event's snapshot."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PingRecord(_FromRow):
    """One ping of a heartbeat (docs/checks.md): ``kind`` ``success``, ``fail`` or
    ``start``; ``created`` epoch seconds; ``duration_ms`` the milliseconds since the
    ``start`` before it (a success or fail right after a start), else None;
    ``source_ip`` the TCP peer's address (behind a proxy: the proxy's), or None."""

    id: str
    heartbeat_id: str
    kind: str
    created: int
    duration_ms: float | None
    source_ip: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class IncidentRecord(_FromRow):
    """An incident row; ``resolved_at`` is epoch seconds or None while open.

    ``monitor_id`` is the monitor that opened it (None when opened through the API);
    ``monitors`` the affected monitors' ids (docs/incidents.md).
    """

    id: str
    account_id: str
    title: str
    description: str | None
    status: str
    severity: str
    resolved_at: int | None
    resolution_message: str | None
    created: int
    updated: int
    metadata: dict[str, str]
    monitor_id: str | None = None
    monitors: list[str] = field(default_factory=list)
    postmortem: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class IncidentUpdateRecord(_FromRow):
    """One entry of an incident's timeline (docs/incidents.md): the incident's
    ``status`` after it and an optional ``message``; ``created`` epoch seconds."""

    id: str
    account_id: str
    incident_id: str
    status: str
    message: str | None
    created: int


@dataclass(frozen=True, slots=True, kw_only=True)
class EventRecord(_FromRow):
    """An event of the outbox (docs/incidents.md, Events).

    ``object`` is the snapshot of the resource's record right after the change (the
    fields of :class:`MonitorRecord`, :class:`IncidentRecord`, ...; build it back with
    ``from_snapshot``); ``previous`` maps the changed fields to their old values, or is
    None. ``request_id`` is None when the engine caused the event.
    """

    id: str
    account_id: str
    type: str
    resource_id: str
    created: int
    object: dict[str, Any]
    previous: dict[str, Any] | None
    request_id: str | None
    idempotency_key: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class WebhookEndpointRecord(_FromRow):
    """A webhook endpoint (docs/webhooks.md). ``previous_secret`` stays valid until
    ``previous_secret_expires_at`` (epoch seconds) after a rotation."""

    id: str
    account_id: str
    url: str
    enabled_events: list[str]
    description: str | None
    status: str
    secret: str
    previous_secret: str | None
    previous_secret_expires_at: int | None
    created: int
    updated: int
    metadata: dict[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class WebhookDeliveryRecord(_FromRow):
    """A delivery of one event to one endpoint (docs/webhooks.md).

    ``next_attempt_at`` is epoch seconds (fractional) or None once settled;
    ``last_duration_ms`` milliseconds; ``give_up_at`` epoch seconds, 3 days after the
    event.
    """

    id: str
    account_id: str
    endpoint_id: str
    event_id: str
    status: str
    attempts: int
    last_attempt_at: int | None
    last_response_status: int | None
    last_error: str | None
    last_duration_ms: float | None
    next_attempt_at: float | None
    created: int
    give_up_at: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusPageRecord(_FromRow):
    """A status page (docs/status-pages.md). ``slug`` is unique over the service;
    ``components`` is the ordered list of ``{"monitor": "mon_...", "name": display name,
    "group": str or None}``."""

    id: str
    account_id: str
    name: str
    slug: str
    description: str | None
    components: list[dict[str, Any]]
    created: int
    updated: int
    metadata: dict[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckRecord(_FromRow):
    """One check result (docs/checks.md, The checks of a monitor). ``response_time_ms`` in
    milliseconds; ``tls_expires_at`` the certificate's expiry (epoch seconds) of an https
    check, else None (docs/checks.md)."""

    id: str
    monitor_id: str
    status: str
    response_time_ms: float
    status_code: int | None
    error_code: str | None
    error_message: str | None
    created: int
    tls_expires_at: int | None = None
    region: str | None = None
    """The region of the node that made it (docs/regions.md); None: written before
    checks recorded their region."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberRecord(_FromRow):
    """A member, someone who can be paged (docs/alerts.md): ``email`` or None, an IANA
    ``time_zone``, and ``contact_channels``, the ``nch_`` ids tried in order."""

    id: str
    account_id: str
    name: str
    email: str | None
    time_zone: str
    contact_channels: list[str]
    created: int
    updated: int
    metadata: dict[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class NotificationChannelRecord(_FromRow):
    """A notification channel (docs/alerts.md): ``type`` one of the nine and its
    ``config``, secrets included (the API masks them)."""

    id: str
    account_id: str
    name: str
    type: str
    config: dict[str, Any]
    enabled: bool
    send_resolved: bool
    created: int
    updated: int
    metadata: dict[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class EscalationPolicyRecord(_FromRow):
    """An escalation policy (docs/alerts.md): ``steps`` as stored, each ``{"delay_seconds",
    "targets": [{"type", "id"}]}``; ``repeat`` 0 to 9; ``is_default`` (the API's
    ``default``), at most one per account."""

    id: str
    account_id: str
    name: str
    steps: list[dict[str, Any]]
    repeat: int
    is_default: bool
    created: int
    updated: int
    metadata: dict[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class AlertRecord(_FromRow):
    """An alert, one page-worthy episode of a monitor or heartbeat (docs/alerts.md).

    ``resource_id`` is the ``mon_`` or ``hbt_`` id (the API's ``monitor``);
    ``incident_id`` the incident of the episode, or None; ``status`` triggered,
    acknowledged or resolved; ``summary`` ``"<name> is down: <error message>"``;
    ``escalation_step`` the index of the last step notified (-1: none yet) and ``walks``
    how many times the steps were walked again (``repeat``); ``next_step_at`` epoch
    seconds (fractional) when the next step is due, None when nothing is;
    ``acknowledged_by`` ``{"type": "member" | "token", "id": ...}`` or None; every other
    time epoch seconds.
    """

    id: str
    account_id: str
    resource_id: str
    incident_id: str | None
    status: str
    severity: str
    summary: str
    escalation_policy: str | None
    escalation_step: int
    walks: int
    next_step_at: float | None
    triggered_at: int
    acknowledged_at: int | None
    acknowledged_by: dict[str, Any] | None
    resolved_at: int | None
    created: int
    updated: int
    metadata: dict[str, str]


def column_names(record: type[_FromRow]) -> list[str]:
    """The field names of a record class, in order."""
    return [f.name for f in fields(record)]  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptRecord(_FromRow):
    """One attempt to send a notification (docs/alerts.md): ``attempted_at`` epoch
    seconds, ``status`` ``succeeded`` or ``failed``, the provider's HTTP status (None
    without one, or for email), the error code (None on success), ``duration_ms``
    milliseconds."""

    notification_id: str
    attempted_at: int
    status: str
    response_status: int | None
    error: str | None
    duration_ms: float


@dataclass(frozen=True, slots=True, kw_only=True)
class NotificationRecord(_FromRow):
    """One message of the notification outbox to one channel (docs/alerts.md).

    ``kind``: trigger, escalation, reminder, acknowledged, resolved or test; ``status``:
    pending, succeeded, failed or cancelled; ``step`` the escalation step (or None);
    ``ack_token`` the acknowledge link's token the message carries (None: none);
    ``last_attempt_at``, ``give_up_at`` and ``created`` epoch seconds;
    ``next_attempt_at`` epoch seconds (fractional), None once settled;
    ``attempts_list`` its attempts, oldest first (empty unless read with them).
    """

    id: str
    account_id: str
    alert_id: str | None
    channel_id: str
    member_id: str | None
    kind: str
    step: int | None
    status: str
    ack_token: str | None
    attempts: int
    last_attempt_at: int | None
    next_attempt_at: float | None
    give_up_at: int
    created: int
    attempts_list: list[AttemptRecord] = field(default_factory=list, metadata={"internal": True})
