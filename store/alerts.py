"""Alerts: raised, walked up their escalation policy, acknowledged and resolved
(docs/alerts.md; asyncio side: run these through :class:`store.Database`).

- **Raised and resolved by moves** in the store actor's batch transaction
  (:mod:`store.alerting` embeds :data:`RAISE_CTE`, :data:`RESOLVE_CTES` and
  :data:`RESOLVED_EVENTS` in its round, then walks step 0 with :func:`walk_alerts` when
  its delay is 0), so a move into ``down`` commits with its alert, its
  ``alert.triggered`` event and its first notifications.
- **The walk** (:func:`walk_due`): an alert whose ``next_step_at`` has come is claimed
  ``FOR UPDATE SKIP LOCKED``, its next step's targets are written as notifications (the
  outbox of :mod:`store.notifications`) with their acknowledge tokens, and the alert moves
  on, in one transaction: every step is notified once, by one node, and the walk survives
  restarts and failover because it is rows with due times, never a sleeping task.
- **Acknowledge and resolve** by the API or by an acknowledge link's token
  (:func:`acknowledge`, :func:`resolve`, :func:`acknowledge_by_token`): both stop the
  walk and cancel the pending trigger, escalation and reminder notifications at once.

Targets of a step (docs/alerts.md, Escalation policies): a member is told on each of
their enabled contact channels, in order; a channel target on that channel if enabled. A
schedule target tells nobody: schedules are not part of the store yet, and a step naming
only schedules notifies no one (the walk still moves on).

"Told" (who gets the ``acknowledged`` and ``resolved`` notices): a channel with a trigger,
escalation or reminder notification of the alert that was attempted at least once. A
message cancelled before any attempt told nobody, so it earns no follow-up.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .database import Connection
from .errors import StoreError
from .events import EventCause, record_event
from .owned import select_owned
from .pagination import Page, PageRequest, fetch_page
from .records import AlertRecord, column_names

__all__ = [
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
    "walk_alerts",
    "walk_due",
]

NOTICE_SECONDS = 3600
"""How long a notification is tried before it is given up, seconds (docs/alerts.md)."""

_COLUMNS = column_names(AlertRecord)
_SELECT = ", ".join(f"t.{c}" for c in _COLUMNS)
_PAGING = ("trigger", "escalation", "reminder")
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
    WHERE mon.to_status = 'down' AND NOT EXISTS (
        SELECT 1 FROM alerts o WHERE o.resource_id = mon.resource_id AND o.status <> 'resolved')
    ON CONFLICT (resource_id) WHERE status <> 'resolved' DO NOTHING
    RETURNING a.*)"""
"""The CTE raising an alert for each move into ``down`` in ``mon`` (the round of
:mod:`store.alerting`: ``resource_id, account_id, name, incident_severity, error,
escalation_policy, to_status, created``; ``opened`` the incidents the round opened) whose
resource has a policy (its own, else the account's default) and no open alert:
``alert_raised``, the rows."""


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
    does, ``acknowledged_by`` ``{"type": "token", "id": <the member the link was sent
    to, or the channel for a channel target>}``. Run it in a transaction.

    Returns:
        ``(alert, changed)``: ``(None, False)`` for an unknown or dead token; ``changed``
        False when the alert was already acknowledged.
    """
    bound = await _token(connection, token)
    if bound is None:
        return None, False
    by = {"type": "token", "id": bound["member_id"] or bound["channel_id"]}
    return await acknowledge(connection, bound["account_id"], bound["alert_id"], by=by, now=now)


# The walk ------------------------------------------------------------------------------

_CLAIM = """
SELECT a.id, a.account_id, a.escalation_step, a.walks, p.steps, p.repeat
FROM alerts a LEFT JOIN escalation_policies p ON p.id = a.escalation_policy
WHERE {where} AND a.status = 'triggered' AND a.next_step_at IS NOT NULL
ORDER BY a.next_step_at, a.seq
{limit}
FOR UPDATE OF a{skip}
"""

_TARGETS = """
WITH t AS (
    SELECT * FROM unnest($1::int[], $2::text[], $3::text[], $4::text[])
        WITH ORDINALITY AS u(walk, type, target, account_id, ord))
SELECT t.walk, t.ord, cc.pos, c.id AS channel_id, m.id AS member_id
FROM t JOIN members m ON t.type = 'member' AND m.id = t.target AND m.account_id = t.account_id
CROSS JOIN LATERAL unnest(m.contact_channels) WITH ORDINALITY AS cc(channel_id, pos)
JOIN notification_channels c ON c.id = cc.channel_id AND c.account_id = t.account_id
    AND c.enabled
UNION ALL
SELECT t.walk, t.ord, 0, c.id, NULL
FROM t JOIN notification_channels c ON t.type = 'channel' AND c.id = t.target
    AND c.account_id = t.account_id AND c.enabled
ORDER BY 1, 2, 3
"""

_STEP = f"""
WITH sent AS (
    INSERT INTO notifications (id, account_id, alert_id, channel_id, member_id, kind, step,
                               status, ack_token, next_attempt_at, give_up_at, created)
    SELECT new_id('ntf'), u.account_id, u.alert_id, u.channel_id, u.member_id, u.kind,
           u.step, 'pending', u.token, $8::float8, $9::bigint + {NOTICE_SECONDS}, $9::bigint
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[],
                $7::text[]) WITH ORDINALITY
        AS u(account_id, alert_id, channel_id, member_id, kind, step, token, ord)
    ORDER BY u.ord),
tokens AS (
    INSERT INTO alert_ack_tokens (token, alert_id, member_id, channel_id, created)
    SELECT u.token, u.alert_id, u.member_id, u.channel_id, $9::bigint
    FROM unnest($2::text[], $3::text[], $4::text[], $7::text[])
        AS u(alert_id, channel_id, member_id, token)),
moved AS (
    UPDATE alerts a SET escalation_step = w.step, walks = w.walks, next_step_at = w.next,
        updated = $9::bigint
    FROM unnest($10::text[], $11::int[], $12::int[], $13::float8[], $14::bool[], $15::int[])
        AS w(id, step, walks, next, escalated, old_step)
    WHERE a.id = w.id
    RETURNING a.*, w.escalated, w.old_step)
INSERT INTO events (id, account_id, type, resource_id, created, object, previous)
SELECT new_id('evt'), account_id, 'alert.escalated', id, $9::bigint,
       to_jsonb(moved) - 'seq' - 'escalated' - 'old_step',
       jsonb_build_object('escalation_step', old_step)
FROM moved WHERE escalated ORDER BY id
"""


@dataclass(frozen=True, slots=True)
class _Step:
    """What one claimed alert's walk does now: notify ``step`` (None: nothing, the walk
    is over) of walk ``walks`` as ``kind``, then wait until ``next_at`` (None: never)."""

    alert_id: str
    account_id: str
    step: int | None
    walks: int
    kind: str
    targets: list[dict[str, str]]
    next_at: float | None
    old_step: int


def _plan(row: Any, now: float) -> _Step:
    """The step due for a claimed alert ``row`` (``escalation_step``, ``walks``, the
    policy's ``steps`` and ``repeat``) at ``now`` (epoch seconds): the step after the
    last one notified, or step 0 of the next walk while ``repeat`` allows; then the next
    step's due time, its ``delay_seconds`` after ``now``."""
    steps: list[dict[str, Any]] = row["steps"] or []
    repeat: int = row["repeat"] or 0
    step, walks = row["escalation_step"] + 1, row["walks"]
    if step >= len(steps) and walks < repeat and steps:
        step, walks = 0, walks + 1
    if step >= len(steps):
        return _Step(
            row["id"], row["account_id"], None, walks, "", [], None, row["escalation_step"]
        )
    kind = "reminder" if walks > 0 else "trigger" if step == 0 else "escalation"
    following = step + 1 if step + 1 < len(steps) else 0 if walks < repeat else None
    next_at = None if following is None else now + steps[following]["delay_seconds"]
    return _Step(
        row["id"],
        row["account_id"],
        step,
        walks,
        kind,
        steps[step]["targets"],
        next_at,
        row["escalation_step"],
    )


async def _walk(connection: Connection, claimed: Sequence[Any], now: float) -> int:
    """Notify the due step of each locked alert in ``claimed`` and move its walk on."""
    plans = [_plan(row, now) for row in claimed]
    if not plans:
        return 0
    walk, types, targets, accounts = [], [], [], []
    for index, plan in enumerate(plans):
        for target in plan.targets:
            walk.append(index)
            types.append(target["type"])
            targets.append(target["id"])
            accounts.append(plan.account_id)
    rows = await connection.fetch(_TARGETS, walk, types, targets, accounts) if walk else []
    notes: list[tuple[str, str, str, str | None, str, int, str]] = []
    seen: set[tuple[int, str, str | None]] = set()
    for r in rows:
        plan, key = plans[r["walk"]], (r["walk"], r["channel_id"], r["member_id"])
        if key in seen or plan.step is None:
            continue
        seen.add(key)
        token = secrets.token_urlsafe(16)
        notes.append(
            (
                plan.account_id,
                plan.alert_id,
                r["channel_id"],
                r["member_id"],
                plan.kind,
                plan.step,
                token,
            )
        )
    created = int(now)
    await connection.execute(
        _STEP,
        *(list(column) for column in zip(*notes, strict=True)) if notes else [[]] * 7,
        now,
        created,
        [p.alert_id for p in plans],
        [p.old_step if p.step is None else p.step for p in plans],
        [p.walks for p in plans],
        [p.next_at for p in plans],
        [p.step is not None and (p.step, p.walks) != (0, 0) for p in plans],
        [p.old_step for p in plans],
    )
    return len(plans)


async def walk_due(connection: Connection, now: float, limit: int) -> int:
    """Walk up to ``limit`` alerts whose next step is due at ``now`` (epoch seconds):
    claim them ``FOR UPDATE SKIP LOCKED`` (two nodes never notify one step twice), write
    each one's step (module docstring) and move it on (``escalation_step``, ``walks``,
    ``next_step_at``: the next step's ``delay_seconds`` after ``now``, or None once the
    walk is over), with ``alert.escalated`` for every step after the first notification.
    Run it in a transaction of its own. Returns how many alerts were claimed.

    Kinds: ``trigger`` for the first walk's step 0, ``escalation`` for its later steps,
    ``reminder`` for every step of a repeated walk.
    """
    claimed = await connection.fetch(
        _CLAIM.format(where="a.next_step_at <= $1", limit="LIMIT $2", skip=" SKIP LOCKED"),
        now,
        limit,
    )
    return await _walk(connection, claimed, now)


async def walk_alerts(connection: Connection, alert_ids: Sequence[str], now: float) -> int:
    """Walk the due step of the triggered alerts ``alert_ids`` at ``now`` (epoch seconds)
    as :func:`walk_due` does, waiting for their locks: the batch transaction that raised
    them walks step 0 itself when its delay is 0 (docs/alerts.md: the first notifications
    commit with the move). Returns how many were walked."""
    claimed = await connection.fetch(
        _CLAIM.format(where="a.id = ANY($1::text[])", limit="", skip=""), list(alert_ids)
    )
    return await _walk(connection, claimed, now)
