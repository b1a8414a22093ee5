"""The notification outbox, as the API reads it (docs/alerts.md, "The outbox and
retries"; asyncio side: run these through :class:`store.Database`):
:func:`list_for_alert`, every message sent for an alert, each with its attempts.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from .database import Connection
from .records import _FromRow, column_names

__all__ = ["AttemptRecord", "NotificationRecord", "list_for_alert"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptRecord(_FromRow):
    """One attempt to send a notification: ``attempted_at`` epoch seconds, ``status``
    ``succeeded`` or ``failed``, the provider's HTTP status (None without one), the error
    (None on success), ``duration_ms`` milliseconds."""

    notification_id: str
    attempted_at: int
    status: str
    response_status: int | None
    error: str | None
    duration_ms: float


@dataclass(frozen=True, slots=True, kw_only=True)
class NotificationRecord(_FromRow):
    """One message of the outbox to one channel: the columns of ``notifications`` (times
    epoch seconds, ``next_attempt_at`` fractional) and ``attempts_list``, its attempts
    oldest first."""

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


_COLUMNS = [c for c in column_names(NotificationRecord) if c != "attempts_list"]
_ATTEMPT_COLUMNS = column_names(AttemptRecord)


async def list_for_alert(
    connection: Connection, account_id: str, alert_id: str
) -> list[NotificationRecord]:
    """Every notification of the account's alert, oldest first, each with its attempts
    oldest first; [] for an unknown alert."""
    rows = await connection.fetch(
        f"SELECT {', '.join(_COLUMNS)} FROM notifications "
        "WHERE account_id = $1 AND alert_id = $2 ORDER BY created, seq",
        account_id,
        alert_id,
    )
    attempts: defaultdict[str, list[AttemptRecord]] = defaultdict(list)
    for a in await connection.fetch(
        f"SELECT {', '.join(_ATTEMPT_COLUMNS)} FROM notification_attempts "
        "WHERE notification_id = ANY($1::text[]) ORDER BY seq",
        [r["id"] for r in rows],
    ):
        attempts[a["notification_id"]].append(AttemptRecord.from_row(a))
    return [
        NotificationRecord.from_row({**dict(r), "attempts_list": attempts[r["id"]]}) for r in rows
    ]
