"""Alert queries (docs/alerts.md, "Alerts"; asyncio side: run them through
:class:`store.Database`): read, list, acknowledge and resolve an alert, by the API or by
the one-click acknowledge link's token.

Acknowledging or resolving stops the walk of the escalation policy (``next_step_at``
cleared) and cancels the alert's pending messages; resolving deletes its acknowledge
tokens, so the links die (docs/alerts.md, "Acknowledge links").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .database import Connection
from .errors import StoreError
from .owned import select_owned
from .pagination import Page, PageRequest, fetch_page
from .records import _FromRow, column_names

__all__ = [
    "AlertNotOpen",
    "AlertRecord",
    "acknowledge",
    "acknowledge_by_token",
    "alert_of_token",
    "get_alert",
    "list_alerts",
    "resolve",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class AlertRecord(_FromRow):
    """One alert (docs/alerts.md, "Alerts"): the columns of ``alerts``. ``resource_id``
    is the ``mon_`` or ``hbt_`` id; ``status`` triggered, acknowledged or resolved;
    ``escalation_step`` the index of the last step notified (-1: none yet);
    ``next_step_at`` epoch seconds (fractional) or None; the other times integer epoch
    seconds; ``acknowledged_by`` ``{"type": "member" | "channel" | "token", "id"}`` or
    None."""

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


class AlertNotOpen(StoreError):
    """Acknowledge or resolve of a resolved alert (the API's 400 ``alert_not_open``)."""

    def __init__(self, alert_id: str) -> None:
        super().__init__(f"alert {alert_id} is already resolved")
        self.alert_id = alert_id


_SELECT = ", ".join(f"t.{c}" for c in column_names(AlertRecord))


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
    """One page of the account's alerts (newest first unless ``page`` says otherwise),
    filtered by exact ``status`` and ``resource_id`` (a ``mon_`` or ``hbt_`` id).

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


async def _stop(connection: Connection, alert_id: str, values: dict[str, Any]) -> AlertRecord:
    """Write ``values`` to the alert, stop its walk and cancel its pending messages."""
    sets = ", ".join(f"{c} = ${i + 2}" for i, c in enumerate(values))
    row = await connection.fetchrow(
        f"UPDATE alerts t SET {sets}, next_step_at = NULL WHERE t.id = $1 RETURNING {_SELECT}",
        alert_id,
        *values.values(),
    )
    await connection.execute(
        "UPDATE notifications SET status = 'cancelled', next_attempt_at = NULL "
        "WHERE alert_id = $1 AND status = 'pending' AND kind IN ('trigger', 'escalation', "
        "'reminder')",
        alert_id,
    )
    return AlertRecord.from_row(row)


async def acknowledge(
    connection: Connection, account_id: str, alert_id: str, *, by: dict[str, Any], now: int
) -> tuple[AlertRecord | None, bool]:
    """Acknowledge the account's alert on behalf of ``by`` (``{"type", "id"}``) at
    ``now`` (epoch seconds). Run inside a transaction.

    Returns:
        (None, False) for no such alert; (the alert, False) when it was already
        acknowledged (nothing changes); (the alert, True) when this acknowledged it.
    Raises:
        AlertNotOpen: the alert is resolved.
    """
    current = await get_alert(connection, account_id, alert_id, for_update=True)
    if current is None:
        return None, False
    if current.status == "resolved":
        raise AlertNotOpen(alert_id)
    if current.status == "acknowledged":
        return current, False
    values = {"status": "acknowledged", "acknowledged_at": now, "acknowledged_by": by}
    return await _stop(connection, alert_id, {**values, "updated": now}), True


async def resolve(
    connection: Connection, account_id: str, alert_id: str, *, by: dict[str, Any], now: int
) -> AlertRecord | None:
    """Resolve the account's alert at ``now`` (epoch seconds; ``by`` who did it) and
    delete its acknowledge tokens. Run inside a transaction. None: no such alert.

    Raises:
        AlertNotOpen: the alert is already resolved.
    """
    current = await get_alert(connection, account_id, alert_id, for_update=True)
    if current is None:
        return None
    if current.status == "resolved":
        raise AlertNotOpen(alert_id)
    record = await _stop(
        connection, alert_id, {"status": "resolved", "resolved_at": now, "updated": now}
    )
    await connection.execute("DELETE FROM alert_ack_tokens WHERE alert_id = $1", alert_id)
    return record


async def _token(connection: Connection, token: str) -> Any:
    return await connection.fetchrow(
        "SELECT k.alert_id, k.member_id, k.channel_id, a.account_id FROM alert_ack_tokens k "
        "JOIN alerts a ON a.id = k.alert_id WHERE k.token = $1 AND a.status <> 'resolved'",
        token,
    )


async def alert_of_token(connection: Connection, token: str) -> AlertRecord | None:
    """The open alert an acknowledge link's ``token`` is bound to; None for an unknown
    token or a dead one (its alert resolved)."""
    row = await _token(connection, token)
    if row is None:
        return None
    return await get_alert(connection, row["account_id"], row["alert_id"])


async def acknowledge_by_token(
    connection: Connection, token: str, *, now: int
) -> tuple[AlertRecord | None, bool]:
    """Acknowledge the alert of an acknowledge link's ``token`` at ``now`` (epoch
    seconds), on behalf of the member the token is bound to (``{"type": "member"}``), else
    of its channel (``{"type": "channel"}``). Run inside a transaction.

    Returns:
        as :func:`acknowledge`; (None, False) for an unknown or dead token.
    Raises:
        AlertNotOpen: the alert was resolved after the token was read.
    """
    row = await _token(connection, token)
    if row is None:
        return None, False
    if row["member_id"] is not None:
        by = {"type": "member", "id": row["member_id"]}
    else:
        by = {"type": "channel", "id": row["channel_id"]}
    return await acknowledge(connection, row["account_id"], row["alert_id"], by=by, now=now)
