"""Helpers of the store tests: a monitor inserted through the store, at a chosen time."""

from __future__ import annotations

from store import Database, MonitorRecord, accounts, monitors, new_id


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
