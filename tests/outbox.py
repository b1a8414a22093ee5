"""Rows of the alerting schema written directly in SQL, for tests of the notification
outbox and the notifier (docs/alerts.md): a channel, an alert of a monitor, and a
notification, a member, an escalation policy and a schedule, each at a chosen time (epoch
seconds); and rows read back."""

from __future__ import annotations

from typing import Any

from store import Connection, Database, MonitorRecord, new_id, schedules


async def _execute(db: Database, sql: str, *args: Any) -> None:
    async def run(connection: Connection) -> None:
        await connection.execute(sql, *args)

    await db.transaction(run)


async def rows(db: Database, query: str, *args: Any) -> list[dict[str, Any]]:
    """The rows of ``query``, as dicts."""

    async def run(connection: Connection) -> list[dict[str, Any]]:
        return [dict(r) for r in await connection.fetch(query, *args)]

    return await db.transaction(run)


async def new_schedule(
    db: Database,
    account_id: str,
    members: list[str],
    *,
    now: int,
    rotation: str = "weekly",
    handoff: str = "2026-11-30T09:00:00",
) -> str:
    """A schedule of ``account_id`` in Europe/Berlin with one layer rotating ``members``
    (``rotation``: ``daily`` or ``weekly``) from the local ``handoff``; its ``sch_`` id."""
    values = {
        "id": new_id("sch"),
        "account_id": account_id,
        "name": "web on-call",
        "time_zone": "Europe/Berlin",
        "layers": [
            {
                "name": rotation,
                "members": members,
                "rotation": {"type": rotation, "handoff": handoff},
                "restrictions": [],
            }
        ],
        "calendar_key": schedules.new_calendar_key(),
        "created": now,
        "updated": now,
        "metadata": {},
    }
    record = await db.transaction(schedules.insert_schedule, values, None)
    return record.id


async def new_channel(
    db: Database,
    account_id: str,
    *,
    now: int,
    type: str = "webhook",
    config: dict[str, Any] | None = None,
    enabled: bool = True,
) -> str:
    """A notification channel of ``account_id``; its ``nch_`` id."""
    channel_id = new_id("nch")
    await _execute(
        db,
        "INSERT INTO notification_channels (id, account_id, name, type, config, enabled, "
        "created, updated) VALUES ($1, $2, 'ops', $3, $4, $5, $6, $6)",
        channel_id,
        account_id,
        type,
        config or {"url": "http://127.0.0.1:9/hook"},
        enabled,
        now,
    )
    return channel_id


async def new_alert(db: Database, monitor: MonitorRecord, *, now: int) -> str:
    """A triggered alert of ``monitor``; its ``alt_`` id."""
    alert_id = new_id("alt")
    await _execute(
        db,
        "INSERT INTO alerts (id, account_id, resource_id, status, severity, summary, "
        "triggered_at, created, updated) VALUES ($1, $2, $3, 'triggered', 'critical', "
        "$4, $5, $5, $5)",
        alert_id,
        monitor.account_id,
        monitor.id,
        f"{monitor.name} is down: connection refused",
        now,
    )
    return alert_id


async def new_notification(
    db: Database,
    *,
    account_id: str,
    alert_id: str | None,
    channel_id: str,
    now: int,
    kind: str = "trigger",
    ack_token: str | None = "tok",
) -> str:
    """A pending notification due at ``now``, given up on an hour later; its ``ntf_``
    id."""
    notification_id = new_id("ntf")
    await _execute(
        db,
        "INSERT INTO notifications (id, account_id, alert_id, channel_id, kind, step, "
        "status, ack_token, next_attempt_at, give_up_at, created) VALUES ($1, $2, $3, $4, "
        "$5, 0, 'pending', $6, $7::bigint, $7::bigint + 3600, $7::bigint)",
        notification_id,
        account_id,
        alert_id,
        channel_id,
        kind,
        ack_token,
        now,
    )
    return notification_id


async def new_policy(
    db: Database,
    account_id: str,
    steps: list[tuple[int, list[tuple[str, str]]]],
    *,
    repeat: int = 0,
    default: bool = False,
    now: int,
) -> str:
    """An escalation policy of ``account_id``: ``steps`` of ``(delay_seconds, [(type, id),
    ...])``; its ``esc_`` id."""
    policy_id = new_id("esc")
    stored = [
        {"delay_seconds": d, "targets": [{"type": t, "id": i} for t, i in targets]}
        for d, targets in steps
    ]
    await _execute(
        db,
        "INSERT INTO escalation_policies (id, account_id, name, steps, repeat, is_default, "
        "created, updated) VALUES ($1, $2, 'p', $3, $4, $5, $6, $6)",
        policy_id,
        account_id,
        stored,
        repeat,
        default,
        now,
    )
    return policy_id


async def new_member(db: Database, account_id: str, channels: list[str], *, now: int) -> str:
    """A member of ``account_id`` with ``channels`` as contact channels; its ``mbr_`` id."""
    member_id = new_id("mbr")
    await _execute(
        db,
        "INSERT INTO members (id, account_id, name, contact_channels, created, updated) "
        "VALUES ($1, $2, 'Ada', $3, $4, $4)",
        member_id,
        account_id,
        channels,
        now,
    )
    return member_id
