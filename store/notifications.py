"""The notification outbox (docs/alerts.md; asyncio side: run these through
:class:`store.Database`): what the notifier claims and records, and what the API lists.

- :func:`claim_due` picks due notifications (``FOR UPDATE SKIP LOCKED``, so notifiers in
  one process or on several nodes never claim the same one at once), moves their
  ``next_attempt_at`` past the attempt's deadline (a notifier that dies mid-attempt leaves
  the notification to be claimed again once that time passes: at least once), cancels
  those of a disabled channel, and returns with each what its message is rendered from:
  the channel, the alert and the monitor or heartbeat (or, for a shift reminder, the
  shift: store/shift_reminders.py).
- :func:`record_attempt` records one attempt and settles the notification: ``succeeded``,
  or a retry after an exponential back-off with jitter counted from the attempt's end
  (first after ``--notification-retry-base-seconds``, doubling, capped at
  :data:`MAX_RETRY_SECONDS`; ``store.deliveries.retry_outcome``), or ``failed`` once the
  next attempt would fall after ``give_up_at`` (1 hour after the notification).
- :func:`list_for_alert`: every message sent for an alert, each with its attempts.

Notifications are written by whatever raises, escalates or resolves an alert, in its own
transaction (``store.alerts``); never here.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Protocol

from .database import Connection
from .deliveries import retry_outcome
from .records import AttemptRecord, NotificationRecord, column_names

__all__ = [
    "MAX_RETRY_SECONDS",
    "AttemptResult",
    "Claimed",
    "ShiftNotice",
    "claim_due",
    "list_for_alert",
    "record_attempt",
]

MAX_RETRY_SECONDS = 300.0
"""The longest back-off between two attempts of one notification, seconds, before the
jitter (docs/alerts.md): a person's page is retried at least every 5 to 7.5 minutes
during its hour, never left for half of it."""

_COLUMNS = [c for c in column_names(NotificationRecord) if c != "attempts_list"]
_ATTEMPT_COLUMNS = column_names(AttemptRecord)


@dataclass(frozen=True, slots=True, kw_only=True)
class ShiftNotice:
    """What a ``shift_starting`` notification tells (docs/on-call.md, "Shift reminders").

    Attributes:
        schedule_id: the ``sch_`` id.
        schedule_name: its name.
        time_zone: its IANA time zone, in which the shift's times are told.
        member_id: the ``mbr_`` id of the member going on call.
        member_name: their name ("" if they were deleted meanwhile).
        starts_at: when the shift starts, epoch seconds.
        ends_at: when it ends, epoch seconds (at most a week later: a longer shift is told
            as ending then).
    """

    schedule_id: str
    schedule_name: str
    time_zone: str
    member_id: str
    member_name: str
    starts_at: int
    ends_at: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Claimed:
    """A claimed notification and what its message is rendered from (docs/alerts.md).

    Attributes:
        notification: the row as claimed (``attempts`` made before this one).
        channel_type: the channel's type (``email``, ``slack``, ...).
        channel_config: the channel's config, secrets included.
        alert_status: the alert's status now: triggered, acknowledged or resolved ("" for
            a shift reminder, which has no alert; so are ``severity``, ``summary`` and
            ``resource_id``, and ``triggered_at`` is 0).
        severity: the alert's severity.
        summary: the alert's summary, ``"<name> is down: <error message>"``.
        triggered_at: when the alert was raised, epoch seconds.
        resource_id: the ``mon_`` or ``hbt_`` id.
        resource_name: the monitor's or heartbeat's name (once deleted, as its
            ``.deleted`` event recorded it: the resolution notice of a deleted monitor
            still says what resolved).
        resource_url: a monitor's url (never its request headers); None for a heartbeat.
        error: the error message of the monitor's latest check, or None.
        claimed_until: epoch seconds (fractional) at which the claim lapses.
        shift: what a ``shift_starting`` notification tells, else None.
    """

    notification: NotificationRecord
    channel_type: str
    channel_config: dict[str, Any]
    alert_status: str
    severity: str
    summary: str
    triggered_at: int
    resource_id: str
    resource_name: str
    resource_url: str | None
    error: str | None
    claimed_until: float
    shift: ShiftNotice | None = None


_CLAIM = f"""
WITH unsendable AS (
    UPDATE notifications AS n SET status = 'cancelled', next_attempt_at = NULL
    WHERE n.id IN (
        SELECT d.id FROM notifications d
        JOIN notification_channels ch ON ch.id = d.channel_id
        WHERE d.status = 'pending' AND d.next_attempt_at <= $1
            AND NOT (ch.enabled AND (d.alert_id IS NOT NULL OR d.reminder_seq IS NOT NULL))
        FOR UPDATE OF d SKIP LOCKED)
), locked AS (
    SELECT n.id FROM notifications n
    JOIN notification_channels ch ON ch.id = n.channel_id
    WHERE n.status = 'pending' AND n.next_attempt_at <= $1
        AND ch.enabled AND (n.alert_id IS NOT NULL OR n.reminder_seq IS NOT NULL)
    ORDER BY n.next_attempt_at, n.seq
    LIMIT $2
    FOR UPDATE OF n SKIP LOCKED
), moved AS (
    UPDATE notifications AS n
    SET status = CASE WHEN ch.enabled THEN 'pending' ELSE 'cancelled' END,
        next_attempt_at = CASE WHEN ch.enabled THEN $3::float8 END
    FROM locked, notification_channels ch
    WHERE n.id = locked.id AND ch.id = n.channel_id
    RETURNING {", ".join(f"n.{c}" for c in _COLUMNS)},
              n.reminder_seq, ch.type AS channel_type, ch.config AS channel_config
)
SELECT moved.*, a.status AS alert_status, a.severity, a.summary, a.triggered_at,
       a.resource_id, coalesce(m.name, h.name, gone.object ->> 'name', '') AS resource_name,
       coalesce(m.url, gone.object ->> 'url') AS resource_url,
       (SELECT c.error_message FROM checks c WHERE c.monitor_id = m.id
        ORDER BY c.created DESC LIMIT 1) AS error,
       r.schedule_id, s.name AS schedule_name, s.time_zone, r.starts_at AS shift_start,
       r.ends_at AS shift_end, mb.name AS member_name
FROM moved
LEFT JOIN alerts a ON a.id = moved.alert_id
LEFT JOIN monitors m ON m.id = a.resource_id
LEFT JOIN heartbeats h ON h.id = a.resource_id
LEFT JOIN LATERAL (
    SELECT e.object FROM events e
    WHERE m.id IS NULL AND h.id IS NULL AND e.account_id = a.account_id
        AND e.created >= a.triggered_at AND e.resource_id = a.resource_id
        AND e.type IN ('monitor.deleted', 'heartbeat.deleted')
    ORDER BY e.created DESC LIMIT 1) gone ON true
LEFT JOIN shift_reminders r ON r.seq = moved.reminder_seq
LEFT JOIN schedules s ON s.id = r.schedule_id
LEFT JOIN members mb ON mb.id = r.member_id
WHERE moved.status = 'pending' AND (a.id IS NOT NULL OR s.id IS NOT NULL)
"""


async def claim_due(
    connection: Connection, now: float, limit: int, lease_seconds: float
) -> list[Claimed]:
    """Claim up to ``limit`` pending notifications due at ``now`` (``next_attempt_at <=
    now``, epoch seconds), oldest due first, and move their ``next_attempt_at`` to ``now +
    lease_seconds`` (longer than an attempt's deadline). Run it in a transaction of its own.

    A notification of a disabled channel is ``cancelled`` instead, and so is one with
    neither an alert nor a shift reminder (the outbox carries alerts' messages and shift
    reminders; a channel's test is sent at once by the API): neither is returned. All of
    those that are due are cancelled by the claim, apart from the ``limit`` it takes, so a
    claim returns fewer than ``limit`` only when no more is due (the notifier then waits a
    poll): cancelled ones ahead in the queue never hold back one that can be sent. A channel
    disabled while the claim runs is re-checked once its rows are locked (then cancelled
    too; that claim may come back short).

    Concurrency: the rows are locked ``FOR UPDATE SKIP LOCKED`` and re-checked once
    locked, so two notifiers never claim the same notification; a claim never settled (a
    notifier that died) becomes due again at ``now + lease_seconds``.
    """
    rows = await connection.fetch(_CLAIM, now, limit, now + lease_seconds)
    return [
        Claimed(
            notification=NotificationRecord.from_row(
                {**{c: row[c] for c in _COLUMNS}, "attempts_list": []}
            ),
            channel_type=row["channel_type"],
            channel_config=row["channel_config"],
            alert_status=row["alert_status"] or "",
            severity=row["severity"] or "",
            summary=row["summary"] or "",
            triggered_at=row["triggered_at"] or 0,
            resource_id=row["resource_id"] or "",
            resource_name=row["resource_name"],
            resource_url=row["resource_url"],
            error=row["error"],
            claimed_until=now + lease_seconds,
            shift=_shift(row),
        )
        for row in rows
    ]


def _shift(row: Any) -> ShiftNotice | None:
    """The shift a claimed row tells of, or None (an alert's notification)."""
    if row["schedule_id"] is None:
        return None
    return ShiftNotice(
        schedule_id=row["schedule_id"],
        schedule_name=row["schedule_name"],
        time_zone=row["time_zone"],
        member_id=row["member_id"],
        member_name=row["member_name"] or "",
        starts_at=row["shift_start"],
        ends_at=row["shift_end"],
    )


class AttemptResult(Protocol):
    """What one attempt came to (``engine.channels.Attempt`` is one): ``status``
    ``succeeded`` or ``failed``, the provider's HTTP status or None, the error code or
    None, ``duration_ms`` milliseconds."""

    @property
    def status(self) -> str: ...
    @property
    def response_status(self) -> int | None: ...
    @property
    def error(self) -> str | None: ...
    @property
    def duration_ms(self) -> float: ...


async def record_attempt(
    connection: Connection,
    notification_id: str,
    attempt: AttemptResult,
    now: float,
    retry_base_seconds: float,
    *,
    jitter: float = 1.0,
) -> str | None:
    """Record one attempt of ``notification_id`` that started at ``now`` (epoch seconds)
    and settle the notification (module docstring): ``attempts`` + 1,
    ``last_attempt_at``, and ``succeeded``; or, failed, ``pending`` again after
    ``retry_base_seconds * 2 ** (failed attempts - 1)`` seconds (capped at
    :data:`MAX_RETRY_SECONDS`) times ``jitter`` (a random factor in [0.5, 1.5) drawn by
    the caller) counted from the attempt's end; or ``failed`` once that falls after
    ``give_up_at``. Run it in a transaction.

    A notification settled meanwhile (cancelled by an acknowledgement, or sent by another
    notifier after a lapsed claim) keeps its status; the attempt is still recorded.

    Returns:
        The notification's status afterwards, or None if it is gone (its alert or
        channel deleted; nothing is recorded).
    """
    row = await connection.fetchrow(
        "SELECT attempts, status, give_up_at FROM notifications WHERE id = $1 FOR UPDATE",
        notification_id,
    )
    if row is None:
        return None
    await connection.execute(
        "INSERT INTO notification_attempts (notification_id, attempted_at, status, "
        "response_status, error, duration_ms) VALUES ($1, $2, $3, $4, $5, $6)",
        notification_id,
        int(now),
        attempt.status,
        attempt.response_status,
        attempt.error,
        attempt.duration_ms,
    )
    status, next_attempt_at = row["status"], None
    if status == "pending":
        status, next_attempt_at = retry_outcome(
            succeeded=attempt.status == "succeeded",
            failed_attempts=row["attempts"] + 1,
            ended=now + attempt.duration_ms / 1000.0,
            give_up_at=row["give_up_at"],
            base_seconds=retry_base_seconds,
            jitter=jitter,
            cap_seconds=MAX_RETRY_SECONDS,
        )
    await connection.execute(
        "UPDATE notifications SET attempts = attempts + 1, last_attempt_at = $2, "
        "status = $3, next_attempt_at = CASE WHEN status = 'pending' THEN $4::float8 "
        "ELSE next_attempt_at END WHERE id = $1",
        notification_id,
        int(now),
        status,
        next_attempt_at,
    )
    return str(status)


async def list_for_alert(
    connection: Connection, account_id: str, alert_id: str
) -> list[NotificationRecord]:
    """Every notification of the account's alert, oldest first, each with its attempts
    (``attempts_list``) oldest first (docs/alerts.md). [] for an unknown alert (the
    caller tells a missing alert from one with no messages)."""
    rows = await connection.fetch(
        f"SELECT {', '.join(_COLUMNS)} FROM notifications "
        "WHERE account_id = $1 AND alert_id = $2 ORDER BY created, seq",
        account_id,
        alert_id,
    )
    if not rows:
        return []
    attempts: defaultdict[str, list[AttemptRecord]] = defaultdict(list)
    for a in await connection.fetch(
        f"SELECT {', '.join(_ATTEMPT_COLUMNS)} FROM notification_attempts "
        "WHERE notification_id = ANY($1::text[]) ORDER BY seq",
        [r["id"] for r in rows],
    ):
        attempts[a["notification_id"]].append(AttemptRecord.from_row(a))
    return [
        NotificationRecord.from_row(
            {**{c: r[c] for c in _COLUMNS}, "attempts_list": attempts[r["id"]]}
        )
        for r in rows
    ]
