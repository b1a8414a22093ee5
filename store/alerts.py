"""Alerts: raised, walked up their escalation policy, acknowledged and resolved
(docs/alerts.md; asyncio side: run these through :class:`store.Database`).

- **Raised and resolved by moves** in the store actor's batch transaction
  (:mod:`store.alerting` embeds :data:`RAISE_CTE`, :data:`RESOLVE_CTES` and
  :data:`RESOLVED_EVENTS` in its round, then walks step 0 with :func:`walk_alerts` when
  its delay is 0), so a move into ``down`` commits with its alert, its
  ``alert.triggered`` event and its first notifications.
- **The walk** (:func:`walk_due`, from :mod:`store.alert_walk`): each due step of a
  triggered alert is notified once, by one node.
- **Acknowledge and resolve** by the API or by an acknowledge link's token
  (:func:`acknowledge`, :func:`resolve`, :func:`acknowledge_by_token`): both stop the
  walk and cancel the pending trigger, escalation and reminder notifications at once.

"Told" (who gets the ``acknowledged`` and ``resolved`` notices): a channel with a trigger,
escalation or reminder notification of the alert that was attempted at least once. A
message cancelled before any attempt told nobody, so it earns no follow-up.
"""

from __future__ import annotations

from typing import Any

from .alert_walk import NOTICE_SECONDS, walk_alerts, walk_due
from .database import Connection
from .errors import StoreError
from .events import EventCause, record_event
from .owned import select_owned
from .pagination import Page, PageRequest, fetch_page
from .records import AlertRecord, column_names

__all__ = [
    "LOCK_OPEN",
    "NOTICE_SECONDS",
    "RAISE_CTE",
    "RESOLVED_EVENTS",
    "RESOLVE_CTES",
    "AlertNotOpen",
    "acknowledge",
    "acknowledge_by_token",
    "alert_of_token",
    "get_alert",
    "list_alerts",
    "resolve",
    "resolve_of_deleted",
    "walk_alerts",
    "walk_due",
]

_COLUMNS = column_names(AlertRecord)
_SELECT = ", ".join(f"t.{c}" for c in _COLUMNS)
_PAGING_SQL = "('trigger', 'escalation', 'reminder')"


class AlertNotOpen(StoreError):
    """The alert is resolved: it can be neither acknowledged nor resolved again (the API's
    400 ``alert_not_open``, docs/alerts.md).

    Attributes:
        alert_id: the alert.
    """

    def __init__(self, alert_id: str) -> None:
        super().__init__(f"alert {alert_id} is resolved")
        self.alert_id = alert_id


def _notices(name: str, kind: str, channels: str) -> str:
    """A CTE ``name`` writing a ``kind`` notification, due at once, to every channel told
    of the alerts in ``alert_closing`` (``id``, ``at``) whose channel row ``ch`` passes
    ``channels`` (SQL from code)."""
    return f"""{name} AS (
    INSERT INTO notifications (id, account_id, alert_id, channel_id, member_id, kind,
                               status, next_attempt_at, give_up_at, created)
    SELECT new_id('ntf'), told.account_id, told.alert_id, told.channel_id, told.member_id,
           '{kind}', 'pending', told.at, told.at + {NOTICE_SECONDS}, told.at
    FROM (SELECT DISTINCT ON (n.alert_id, n.channel_id) n.account_id, n.alert_id,
                 n.channel_id, n.member_id, c.at
          FROM alert_closing c
          JOIN notifications n ON n.alert_id = c.id AND n.kind IN {_PAGING_SQL}
              AND n.attempts > 0
          JOIN notification_channels ch ON ch.id = n.channel_id AND ch.enabled
          WHERE {channels}
          ORDER BY n.alert_id, n.channel_id, n.seq) told),
alert_cancelled AS (
    UPDATE notifications n SET status = 'cancelled', next_attempt_at = NULL
    FROM alert_closing c
    WHERE n.alert_id = c.id AND n.status = 'pending' AND n.kind IN {_PAGING_SQL})"""


_BOTH_WAYS = "ch.type IN ('pagerduty', 'opsgenie')"

RESOLVE_CTES = (
    _notices("alert_notices", "resolved", f"ch.send_resolved OR {_BOTH_WAYS}")
    + """,
alert_tokens_dropped AS (
    DELETE FROM alert_ack_tokens k USING alert_closing c WHERE k.alert_id = c.id),
alert_resolved AS (
    UPDATE alerts a SET status = 'resolved', resolved_at = c.at, updated = c.at,
        next_step_at = NULL
    FROM alert_closing c WHERE a.id = c.id
    RETURNING a.*, c.old_status)"""
)
"""CTEs resolving the alerts of a preceding CTE ``alert_closing (id, old_status, at)``
that has locked them (``at`` epoch seconds): pending paging notifications cancelled,
acknowledge tokens deleted (the links die), ``resolved`` notices to the told channels
with ``send_resolved`` and to told PagerDuty and Opsgenie channels, and the alerts
resolved (``alert_resolved``: the rows and ``old_status``)."""

RESOLVED_EVENTS = """
SELECT account_id, 'alert.resolved' AS type, id AS resource_id, resolved_at AS created,
       to_jsonb(r) - 'seq' - 'old_status' AS object,
       jsonb_build_object('status', old_status, 'resolved_at', NULL) AS previous
FROM alert_resolved r"""
"""The ``alert.resolved`` events of :data:`RESOLVE_CTES` (columns ``account_id, type,
resource_id, created, object, previous``)."""

RAISE_CTE = """
alert_raised AS (
    INSERT INTO alerts AS a (id, account_id, resource_id, incident_id, status, severity,
                             summary, escalation_policy, next_step_at, triggered_at,
                             created, updated)
    SELECT new_id('alt'), mon.account_id, mon.resource_id,
           coalesce((SELECT o.id FROM opened o WHERE o.monitor_id = mon.resource_id),
                    (SELECT i.id FROM incidents i WHERE i.monitor_id = mon.resource_id
                     AND i.resolved_at IS NULL ORDER BY i.created DESC LIMIT 1)),
           'triggered', mon.incident_severity,
           left(mon.name || ' is down: ' || coalesce(mon.error, 'unknown'), 1000), p.id,
           mon.created + coalesce((p.steps -> 0 ->> 'delay_seconds')::float8, 0),
           mon.created, mon.created, mon.created
    FROM mon JOIN escalation_policies p ON p.account_id = mon.account_id
        AND p.id = coalesce(mon.escalation_policy,
            (SELECT d.id FROM escalation_policies d
             WHERE d.account_id = mon.account_id AND d.is_default))
    WHERE mon.to_status = 'down' AND mon.suppressed_by IS NULL AND NOT EXISTS (
        SELECT 1 FROM alerts o WHERE o.resource_id = mon.resource_id AND o.status <> 'resolved')
    ON CONFLICT (resource_id) WHERE status <> 'resolved' DO NOTHING
    RETURNING a.*)"""
"""The CTE raising an alert for each move into ``down`` in ``mon`` (the round of
:mod:`store.alerting`: ``resource_id, account_id, name, incident_severity, error,
escalation_policy, suppressed_by, to_status, created``; ``opened`` the incidents the round
opened) that nothing suppresses (``suppressed_by`` null: docs/incidents.md,
"Dependencies") and whose resource has a policy (its own, else the account's default) and
no open alert: ``alert_raised``, the rows."""


LOCK_OPEN = """
SELECT 1 FROM alerts WHERE resource_id = ANY($1::text[]) AND status <> 'resolved'
FOR UPDATE
"""
"""Locks the open alerts of the resources ``$1`` (``mon_``/``hbt_`` ids) before a
statement resolves them: a statement waiting for a lock inside itself keeps its older
snapshot and would miss the notifications a walk in flight (:mod:`store.alert_walk`)
committed meanwhile."""


async def get_alert(
    connection: Connection, account_id: str, alert_id: str, *, for_update: bool = False
) -> AlertRecord | None:
    """The account's alert, or None. ``for_update`` locks it."""
    row = await select_owned(
        connection,
        table="alerts",
        select=_SELECT,
        account_id=account_id,
        row_id=alert_id,
        for_update=for_update,
    )
    return None if row is None else AlertRecord.from_row(row)


async def list_alerts(
    connection: Connection,
    account_id: str,
    page: PageRequest,
    *,
    status: str | None = None,
    resource_id: str | None = None,
) -> Page[AlertRecord]:
    """One page of the account's alerts (newest first with the default ``page``: keyset
    on ``created``), filtered by exact ``status`` and ``resource_id`` (``mon_`` or
    ``hbt_``).

    Raises:
        CursorNotFound: the cursor names no alert of the account.
    """
    filters: list[tuple[str, object]] = []
    if status is not None:
        filters.append(("t.status = {}", status))
    if resource_id is not None:
        filters.append(("t.resource_id = {}", resource_id))
    rows, has_more = await fetch_page(
        connection,
        table="alerts",
        select=_SELECT,
        account_id=account_id,
        filters=filters,
        page=page,
    )
    return Page([AlertRecord.from_row(r) for r in rows], has_more)


async def _open(connection: Connection, account_id: str, alert_id: str) -> AlertRecord | None:
    """The account's alert, locked; None when there is none.

    Raises:
        AlertNotOpen: it is resolved.
    """
    current = await get_alert(connection, account_id, alert_id, for_update=True)
    if current is not None and current.status == "resolved":
        raise AlertNotOpen(alert_id)
    return current


_RESOLVE = f"""
WITH alert_closing AS (
    SELECT id, status AS old_status, $2::bigint AS at FROM alerts WHERE id = $1),
{RESOLVE_CTES}
INSERT INTO events (id, account_id, type, resource_id, created, object, previous,
                    request_id, idempotency_key)
SELECT new_id('evt'), e.*, $3, $4 FROM ({RESOLVED_EVENTS}) e
"""


async def resolve(
    connection: Connection,
    account_id: str,
    alert_id: str,
    *,
    by: dict[str, Any],
    now: int,
    cause: EventCause | None = None,
) -> AlertRecord | None:
    """Resolve the account's alert by hand (docs/alerts.md) at ``now`` (epoch seconds), as
    a move into ``up`` does (:data:`RESOLVE_CTES`), and write ``alert.resolved``. Run it
    in a transaction. ``by`` (``{"type", "id"}``) is who asked; an alert keeps no
    resolver (docs/alerts.md), so it is not stored: the event's ``request`` names the
    call. None when the account has no such alert.

    Raises:
        AlertNotOpen: the alert is already resolved.
    """
    if await _open(connection, account_id, alert_id) is None:
        return None
    cause = cause or EventCause()
    await connection.execute(_RESOLVE, alert_id, now, cause.request_id, cause.idempotency_key)
    return await get_alert(connection, account_id, alert_id)


async def resolve_of_deleted(
    connection: Connection,
    account_id: str,
    resource_id: str,
    *,
    now: int,
    cause: EventCause | None = None,
) -> str | None:
    """Resolve the open alert of a monitor or heartbeat being deleted (docs/alerts.md,
    "Alerts": nothing will ever move it up, so it would page until someone resolved it
    by hand), as :func:`resolve` does: the walk stopped, resolution notices to the told
    channels (PagerDuty's and Opsgenie's incidents close), ``alert.resolved``. Run it in
    the deleting transaction. Returns the resolved alert's id, None when none was open.
    """
    alert_id = await connection.fetchval(
        "SELECT id FROM alerts WHERE account_id = $1 AND resource_id = $2 "
        "AND status <> 'resolved' FOR UPDATE",
        account_id,
        resource_id,
    )
    if alert_id is not None:
        cause = cause or EventCause()
        await connection.execute(_RESOLVE, alert_id, now, cause.request_id, cause.idempotency_key)
    return alert_id  # type: ignore[no-any-return]


_ACKNOWLEDGE = f"""
WITH alert_closing AS (SELECT $1::text AS id, $2::bigint AS at),
{_notices("alert_notices", "acknowledged", _BOTH_WAYS)}
UPDATE alerts SET status = 'acknowledged', acknowledged_at = $2, acknowledged_by = $3,
    next_step_at = NULL, updated = $2
WHERE id = $1
RETURNING {", ".join(_COLUMNS)}
"""


async def acknowledge(
    connection: Connection,
    account_id: str,
    alert_id: str,
    *,
    by: dict[str, Any],
    now: int,
    cause: EventCause | None = None,
) -> tuple[AlertRecord | None, bool]:
    """Acknowledge the account's triggered alert at ``now`` (epoch seconds; docs/alerts.md):
    ``acknowledged_at``, ``acknowledged_by`` = ``by`` (``{"type": "member" | "token",
    "id": ...}``), the walk stopped, pending trigger, escalation and reminder
    notifications cancelled, an ``acknowledged`` notice to every told PagerDuty and
    Opsgenie channel, and ``alert.acknowledged``. Run it in a transaction.

    Returns:
        ``(alert, changed)``: ``(None, False)`` when the account has no such alert;
        ``changed`` False when it was already acknowledged (nothing is written).
    Raises:
        AlertNotOpen: the alert is resolved.
    """
    current = await _open(connection, account_id, alert_id)
    if current is None:
        return None, False
    if current.status == "acknowledged":
        return current, False
    row = await connection.fetchrow(_ACKNOWLEDGE, alert_id, now, by)
    record = AlertRecord.from_row(row)
    await record_event(
        connection,
        type="alert.acknowledged",
        record=record,
        created=now,
        cause=cause,
        previous={"status": current.status, "acknowledged_at": None, "acknowledged_by": None},
    )
    return record, True


async def _token(connection: Connection, token: str) -> Any:
    return await connection.fetchrow(
        "SELECT k.alert_id, k.member_id, k.channel_id, a.account_id FROM alert_ack_tokens k "
        "JOIN alerts a ON a.id = k.alert_id WHERE k.token = $1 AND a.status <> 'resolved'",
        token,
    )


async def alert_of_token(connection: Connection, token: str) -> AlertRecord | None:
    """The open alert an acknowledge link's ``token`` is bound to; None for an unknown
    token or a dead one (its alert resolved: docs/alerts.md)."""
    bound = await _token(connection, token)
    if bound is None:
        return None
    return await get_alert(connection, bound["account_id"], bound["alert_id"])


async def acknowledge_by_token(
    connection: Connection, token: str, *, now: int
) -> tuple[AlertRecord | None, bool]:
    """Acknowledge the alert of an acknowledge link (docs/alerts.md) as :func:`acknowledge`
    does, ``acknowledged_by`` ``{"type": "member", "id": <the member the link was sent
    to>}``, or ``{"type": "token", "id": <the channel>}`` for a link sent to a channel
    target (docs/alerts.md, "Acknowledge links"). Run it in a transaction.

    Returns:
        ``(alert, changed)``: ``(None, False)`` for an unknown or dead token; ``changed``
        False when the alert was already acknowledged.
    """
    bound = await _token(connection, token)
    if bound is None:
        return None, False
    if bound["member_id"] is not None:
        by = {"type": "member", "id": bound["member_id"]}
    else:
        by = {"type": "token", "id": bound["channel_id"]}
    return await acknowledge(connection, bound["account_id"], bound["alert_id"], by=by, now=now)
