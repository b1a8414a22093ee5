"""Helpers of the store tests: a monitor or a heartbeat inserted through the store, at a
chosen time; checks written and availability read through the store, at chosen times."""

from __future__ import annotations

import secrets
from typing import Any

from store import (
    CheckRecord,
    Database,
    HeartbeatRecord,
    MonitorRecord,
    StatusChange,
    accounts,
    checks,
    heartbeats,
    history,
    monitors,
    new_check_id,
    new_id,
    windows,
)
from store.history import Window


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


async def run_epoch(db: Database, monitor_id: str) -> int:
    """The stored ``run_epoch`` of ``monitor_id`` (a status change must carry it)."""
    record = await db.run(monitors.get_monitor, None, monitor_id)
    assert record is not None
    return record.run_epoch


HOUR = 3600
DAY = 86_400
H0 = 1_790_000_000 - 1_790_000_000 % DAY + 5 * HOUR
"""An hour boundary (epoch seconds) that store tests write histories around."""
T0 = H0 + 600
"""Ten minutes past :data:`H0`: monitors are created off the hour."""


def check_records(
    monitor_id: str,
    times: list[int],
    *,
    status: str = "up",
    response_ms: list[float] | None = None,
) -> list[CheckRecord]:
    """Checks of ``status`` at ``times`` (epoch seconds), 1 ms each unless
    ``response_ms`` says; a failed one was refused."""
    return [
        CheckRecord(
            id=new_check_id(t),
            monitor_id=monitor_id,
            status=status,
            response_time_ms=response_ms[k] if response_ms else 1.0,
            status_code=None,
            error_code=None if status == "up" else "connection_refused",
            error_message=None if status == "up" else "refused",
            created=t,
        )
        for k, t in enumerate(times)
    ]


def one_check(monitor_id: str, status: str = "up", created: int = 100) -> CheckRecord:
    """One check of ``status`` at ``created`` (epoch seconds), 1.5 ms; a failed one was
    refused."""
    return CheckRecord(
        id=new_id("chk"),
        monitor_id=monitor_id,
        status=status,
        response_time_ms=1.5,
        status_code=None,
        error_code=None if status == "up" else "connection_refused",
        error_message=None if status == "up" else "refused",
        created=created,
    )


def change_of(check: CheckRecord, before: str, after: str, epoch: int = 0) -> StatusChange:
    """The status move ``before`` → ``after`` that ``check`` caused, in run ``epoch``."""
    return StatusChange(
        monitor_id=check.monitor_id,
        check_id=check.id,
        from_status=before,
        to_status=after,
        run_epoch=epoch,
        created=check.created,
    )


async def write_checks(
    db: Database,
    monitor_id: str,
    times: list[int],
    *,
    status: str = "up",
    moved_from: str | None = None,
    move_on: int = 0,
    response_ms: list[float] | None = None,
) -> None:
    """One batch of checks of ``status`` at ``times`` (epoch seconds) through the store
    actor's path (``store.checks.write_check_batch``); when ``moved_from`` is given, the
    check ``times[move_on]`` moves the monitor from it to ``status``, as the engine would
    report it (with a failure threshold of 3, the third failed check moves it)."""
    await db.run(checks.ensure_partitions, min(times), max(times), 86_400)
    records = check_records(monitor_id, times, status=status, response_ms=response_ms)
    changes = []
    if moved_from is not None:
        changes.append(
            StatusChange(
                monitor_id=monitor_id,
                check_id=records[move_on].id,
                from_status=moved_from,
                to_status=status,
                run_epoch=await run_epoch(db, monitor_id),
                created=times[move_on],
            )
        )
    await db.transaction(checks.write_check_batch, records, changes)


async def read_availability(
    db: Database,
    monitor_id: str,
    start: int,
    end: int,
    *,
    now: int,
    granularity: str | None = None,
    rollup_cutoff: int = 0,
    check_cutoff: int = 0,
) -> tuple[history.Availability, list[history.Availability]]:
    """``store.history.availability`` of ``[start, end)`` at ``now`` (epoch seconds), as
    the endpoint asks it: the whole range and its series (one window without
    ``granularity``)."""
    windows = (
        [Window(start, end)]
        if granularity is None
        else history.series_windows(start, end, granularity)
    )
    found = await db.run(
        history.availability,
        monitor_id,
        windows,
        now=now,
        rollup_cutoff=rollup_cutoff,
        check_cutoff=check_cutoff,
    )
    assert found is not None
    return found


def seconds_of(a: history.Availability) -> tuple[int, int, int, int]:
    """``(up, down, paused, unknown)`` seconds of ``a``."""
    return a.up_seconds, a.down_seconds, a.paused_seconds, a.unknown_seconds


async def new_window(
    db: Database, account_id: str, resources: list[str], *, now: int, **fields: Any
) -> windows.WindowRecord:
    """A maintenance window of ``account_id`` over ``resources`` (``mon_``/``hbt_`` ids)
    written at ``now`` (epoch seconds) through ``store.windows.insert_window``: every
    effect but ``pause_checks`` on, no schedule unless ``fields`` give one (``starts_at``
    and ``ends_at``, or ``recurrence``); ``fields`` override any column."""
    values: dict[str, Any] = {
        "id": new_id("mnt"),
        "account_id": account_id,
        "title": "db upgrade",
        "description": None,
        "starts_at": None,
        "ends_at": None,
        "recurrence": None,
        "suppress_alerts": True,
        "exclude_from_availability": True,
        "pause_checks": False,
        "ended_at": None,
        "canceled_at": None,
        "created": now,
        "updated": now,
        "metadata": {},
        "monitors": resources,
    } | fields
    return await db.transaction(windows.insert_window, values, now=now)


async def known_history(
    db: Database,
    created: int,
    *,
    response_time_ms: float,
    metadata: dict[str, str] | None = None,
) -> str:
    """A monitor of account acme (returns its id) created at ``created`` (epoch seconds):
    up at ``created``, down 3000 s later, up again 600 s after that; a check every 300 s
    for 2 h, ``response_time_ms`` each, written through the store's batch path (so over a
    range holding those 2 h: 6600 s up, 600 s down, 24 checks, 2 failed)."""
    record = await new_monitor(db, created=created, interval_seconds=300, metadata=metadata)
    times = list(range(created, created + 2 * 3600, 300))
    await db.run(checks.ensure_partitions, times[0], times[-1], 86_400)
    down = range(created + 3000, created + 3600)
    records = [
        CheckRecord(
            id=new_check_id(t),
            monitor_id=record.id,
            status="down" if t in down else "up",
            response_time_ms=response_time_ms,
            status_code=None,
            error_code="timeout" if t in down else None,
            error_message="late" if t in down else None,
            created=t,
        )
        for t in times
    ]
    by_time = {r.created: r for r in records}
    changes = [
        StatusChange(
            monitor_id=record.id,
            check_id=by_time[t].id,
            from_status=before,
            to_status=after,
            run_epoch=record.run_epoch,
            created=t,
        )
        for t, before, after in (
            (created, "pending", "up"),
            (created + 3000, "up", "down"),
            (created + 3600, "down", "up"),
        )
    ]
    await db.transaction(checks.write_check_batch, records, changes)
    return record.id
