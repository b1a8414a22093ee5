"""Helpers of the store tests: a monitor or a heartbeat inserted through the store, at a
chosen time."""

from __future__ import annotations

import secrets

from store import Database, HeartbeatRecord, MonitorRecord, accounts, heartbeats, monitors, new_id


async def new_monitor(
    db: Database,
    *,
    created: int,
    account: str = "acme",
    status: str = "pending",
    interval_seconds: int = 60,
    failure_threshold: int = 1,
    metadata: dict[str, str] | None = None,
    url: str = "127.0.0.1:1",
    type: str = "tcp",
    timeout_seconds: int = 5,
) -> MonitorRecord:
    """A monitor of ``account`` (created if missing; a tcp one unless ``type`` says
    otherwise) stored with ``created`` (epoch seconds) as its creation time, through
    ``store.monitors.insert_monitor``; an http monitor gets ``GET`` and ``200``."""
    owner = await db.transaction(accounts.ensure_account, account, created)
    return await db.transaction(
        monitors.insert_monitor,
        {
            "id": new_id("mon"),
            "account_id": owner.id,
            "name": "m",
            "url": url,
            "type": type,
            "status": status,
            "interval_seconds": interval_seconds,
            "timeout_seconds": timeout_seconds,
            "method": "GET" if type == "http" else None,
            "expected_status_code": 200 if type == "http" else None,
            "failure_threshold": failure_threshold,
            "success_threshold": 1,
            "created": created,
            "updated": created,
            "metadata": metadata or {},
        },
    )


async def new_heartbeat(
    db: Database,
    *,
    created: int,
    account: str = "acme",
    name: str = "backup",
    period_seconds: int = 60,
    grace_seconds: int = 30,
    status: str = "pending",
) -> HeartbeatRecord:
    """A heartbeat of ``account`` (created if missing) stored with ``created`` (epoch
    seconds), through ``store.heartbeats.insert_heartbeat``; a random ping key."""
    owner = await db.transaction(accounts.ensure_account, account, created)
    return await db.transaction(
        heartbeats.insert_heartbeat,
        {
            "id": new_id("hbt"),
            "account_id": owner.id,
            "name": name,
            "period_seconds": period_seconds,
            "grace_seconds": grace_seconds,
            "status": status,
            "ping_key": secrets.token_hex(16),
            "auto_incidents": True,
            "incident_severity": "major",
            "created": created,
            "updated": created,
            "metadata": {},
        },
    )
