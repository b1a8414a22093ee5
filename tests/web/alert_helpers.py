"""Arranging alerts for the API and page tests (docs/alerts.md): alerts, channels,
notifications, their attempts and acknowledge tokens inserted in SQL, as the engine
would have written them."""

from __future__ import annotations

import secrets
from typing import Any

from store import Database, new_id

from .helpers import sql


async def _fetchval(connection: Any, query: str, *args: Any) -> Any:
    return await connection.fetchval(query, *args)


async def account_id(db: Database, name: str = "acme") -> str:
    """The id of the account named ``name`` (created by its first token)."""
    found = await db.run(_fetchval, "SELECT id FROM accounts WHERE name = $1", name)
    assert found is not None, name
    return str(found)


async def alert_row(db: Database, alert_id: str, column: str) -> Any:
    """One column of an alert as stored (``column`` from the test, never a request)."""
    return await db.run(_fetchval, f"SELECT {column} FROM alerts WHERE id = $1", alert_id)


async def insert_alert(
    db: Database,
    account: str,
    resource_id: str,
    *,
    created: int,
    status: str = "triggered",
    severity: str = "major",
    summary: str = "web is down: connection refused",
    acknowledged_by: dict[str, str] | None = None,
) -> str:
    """A new alert of ``account`` about ``resource_id`` triggered at ``created`` (epoch
    seconds), its next escalation step due a minute later; its id."""
    alert_id = new_id("alt")
    acknowledged_at = created + 5 if status != "triggered" else None
    await sql(
        db,
        "INSERT INTO alerts (id, account_id, resource_id, status, severity, summary, "
        "escalation_step, next_step_at, triggered_at, acknowledged_at, acknowledged_by, "
        "resolved_at, created, updated) "
        "VALUES ($1, $2, $3, $4, $5, $6, 0, $7, $8, $9, $10::jsonb, $11, $8, $8)",
        alert_id,
        account,
        resource_id,
        status,
        severity,
        summary,
        None if status != "triggered" else created + 60.0,
        created,
        acknowledged_at,
        acknowledged_by,
        created + 9 if status == "resolved" else None,
    )
    return alert_id


async def insert_channel(db: Database, account: str, *, created: int) -> str:
    """A Slack-style notification channel of ``account``; its id."""
    channel_id = new_id("nch")
    await sql(
        db,
        "INSERT INTO notification_channels (id, account_id, name, type, config, created, "
        "updated) VALUES ($1, $2, 'ops', 'slack', $3::jsonb, $4, $4)",
        channel_id,
        account,
        {"webhook_url": "https://hooks.example.com/services/T0/B0/secret"},
        created,
    )
    return channel_id


async def insert_notification(
    db: Database,
    account: str,
    alert_id: str,
    channel_id: str,
    *,
    created: int,
    kind: str = "trigger",
    status: str = "pending",
    attempts: int = 0,
    next_attempt_at: float | None = None,
    ack_token: str | None = None,
) -> str:
    """A message of the outbox for ``alert_id`` through ``channel_id``; its id."""
    notification_id = new_id("ntf")
    await sql(
        db,
        "INSERT INTO notifications (id, account_id, alert_id, channel_id, kind, step, status, "
        "ack_token, attempts, last_attempt_at, next_attempt_at, give_up_at, created) "
        "VALUES ($1, $2, $3, $4, $5, 0, $6, $7, $8, $9, $10, $11, $12)",
        notification_id,
        account,
        alert_id,
        channel_id,
        kind,
        status,
        ack_token,
        attempts,
        created + attempts if attempts else None,
        next_attempt_at,
        created + 3600,
        created,
    )
    return notification_id


async def insert_attempt(
    db: Database,
    notification_id: str,
    *,
    at: int,
    status: str,
    response_status: int | None,
    error: str | None,
    duration_ms: float,
) -> None:
    """One attempt of ``notification_id`` at ``at`` (epoch seconds)."""
    await sql(
        db,
        "INSERT INTO notification_attempts (notification_id, attempted_at, status, "
        "response_status, error, duration_ms) VALUES ($1, $2, $3, $4, $5, $6)",
        notification_id,
        at,
        status,
        response_status,
        error,
        duration_ms,
    )


async def insert_ack_token(
    db: Database,
    alert_id: str,
    *,
    created: int,
    member_id: str | None = None,
    channel_id: str | None = None,
) -> str:
    """An acknowledge link's token (128 random bits, hex) bound to ``alert_id`` and the
    member or channel it was sent to."""
    token = secrets.token_hex(16)
    await sql(
        db,
        "INSERT INTO alert_ack_tokens (token, alert_id, member_id, channel_id, created) "
        "VALUES ($1, $2, $3, $4, $5)",
        token,
        alert_id,
        member_id,
        channel_id,
        created,
    )
    return token
