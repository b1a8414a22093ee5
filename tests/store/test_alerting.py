"""Incidents opened and resolved by monitors, and the engine's events, written in the store
actor's batch transaction (docs/incidents.md, Incidents opened by monitors and Events;
store.alerting)."""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio

from store import (
    CheckRecord,
    Database,
    MaintenanceSettings,
    StatusChange,
    checks,
    incidents,
    maintain,
    monitors,
    new_check_id,
)
from tests.store.helpers import new_monitor

T0 = 1_790_000_000


async def _monitor(db: Database, **values: Any) -> str:
    record = await new_monitor(db, created=T0, interval_seconds=10)
    await db.run(checks.ensure_partitions, T0, T0 + 86_400, 86_400)
    if values:

        def apply(current: Any) -> dict[str, Any]:
            return values

        await db.transaction(monitors.update_monitor, record.account_id, record.id, apply, T0)
    return record.id


def _check(monitor_id: str, status: str, created: int) -> CheckRecord:
    return CheckRecord(
        id=new_check_id(created),
        monitor_id=monitor_id,
        status=status,
        response_time_ms=1.5,
        status_code=None,
        error_code=None if status == "up" else "connection_refused",
        error_message=None if status == "up" else "Connection refused",
        created=created,
    )


async def _moves(db: Database, monitor_id: str, *steps: tuple[str, str, int]) -> None:
    """Write one batch holding a check and a status move per step ``(from, to, at)``."""
    batch = [_check(monitor_id, "up" if to == "up" else "down", at) for _, to, at in steps]
    changes = [
        StatusChange(
            monitor_id=monitor_id,
            check_id=check.id,
            from_status=before,
            to_status=to,
            run_epoch=0,
            created=at,
        )
        for check, (before, to, at) in zip(batch, steps, strict=True)
    ]
    await db.transaction(checks.write_check_batch, batch, changes)


async def _rows(db: Database, query: str, *args: Any) -> list[dict[str, Any]]:
    async def fetch(connection: Any) -> list[dict[str, Any]]:
        return [dict(r) for r in await connection.fetch(query, *args)]

    return await db.run(fetch)


async def _incidents(db: Database, monitor_id: str) -> list[dict[str, Any]]:
    return await _rows(db, "SELECT * FROM incidents WHERE monitor_id = $1 ORDER BY seq", monitor_id)


async def _event_types(db: Database) -> list[str]:
    rows = await _rows(
        db,
        "SELECT type FROM events WHERE type NOT IN ('monitor.created', 'monitor.updated') "
        "ORDER BY seq",
    )
    return [r["type"] for r in rows]


async def test_a_down_opens_an_incident_and_the_up_resolves_it(db: Database) -> None:
    with trio.fail_after(10):
        mid = await _monitor(db, incident_severity="critical")
        await _moves(db, mid, ("pending", "up", T0 + 10))
        await _moves(db, mid, ("up", "down", T0 + 20))
        [opened] = await _incidents(db, mid)
        assert opened["title"] == "m is down"
        assert opened["status"] == "investigating"
        assert opened["severity"] == "critical"
        assert opened["monitors"] == [mid]
        assert opened["created"] == T0 + 20 and opened["resolved_at"] is None
        assert "connection_refused" in opened["description"]
        assert "Connection refused" in opened["description"]
        await _moves(db, mid, ("down", "up", T0 + 20 + 312))
        [resolved] = await _incidents(db, mid)
        assert resolved["status"] == "resolved"
        assert resolved["resolved_at"] == T0 + 332
        assert resolved["resolution_message"] == "m is up again after 5m 12s"
        assert await _event_types(db) == [
            "monitor.up",
            "monitor.down",
            "incident.created",
            "monitor.up",
            "incident.resolved",
        ]
        timeline = await _rows(
            db,
            "SELECT status, message, created FROM incident_updates WHERE incident_id = $1 "
            "ORDER BY seq",
            opened["id"],
        )
        assert [(t["status"], t["created"]) for t in timeline] == [
            ("investigating", T0 + 20),
            ("resolved", T0 + 332),
        ]
        assert timeline[1]["message"] == "m is up again after 5m 12s"


async def test_flapping_opens_one_incident_per_down_episode_never_two_at_once(
    db: Database,
) -> None:
    with trio.fail_after(10):
        mid = await _monitor(db)
        await _moves(db, mid, ("pending", "down", T0 + 10))
        await _moves(db, mid, ("down", "up", T0 + 20), ("up", "down", T0 + 30))
        await _moves(db, mid, ("down", "up", T0 + 40))
        await _moves(db, mid, ("up", "down", T0 + 50), ("down", "up", T0 + 60))
        await _moves(db, mid, ("up", "down", T0 + 70))
        rows = await _incidents(db, mid)
        assert [(r["created"], r["resolved_at"]) for r in rows] == [
            (T0 + 10, T0 + 20),
            (T0 + 30, T0 + 40),
            (T0 + 50, T0 + 60),
            (T0 + 70, None),
        ]


async def test_a_retried_batch_opens_nothing_twice(db: Database) -> None:
    with trio.fail_after(10):
        mid = await _monitor(db)
        check = _check(mid, "down", T0 + 10)
        change = StatusChange(
            monitor_id=mid,
            check_id=check.id,
            from_status="pending",
            to_status="down",
            run_epoch=0,
            created=T0 + 10,
        )
        for _ in range(2):  # the commit acknowledgement was lost: the actor writes it again
            await db.transaction(checks.write_check_batch, [check], [change])
        assert len(await _incidents(db, mid)) == 1
        assert await _event_types(db) == ["monitor.down", "incident.created"]


async def test_without_auto_incidents_a_down_only_writes_its_event(db: Database) -> None:
    with trio.fail_after(10):
        mid = await _monitor(db, auto_incidents=False)
        await _moves(db, mid, ("pending", "down", T0 + 10))
        await _moves(db, mid, ("down", "up", T0 + 20))
        assert await _incidents(db, mid) == []
        assert await _event_types(db) == ["monitor.down", "monitor.up"]


async def test_an_incident_resolved_by_hand_stays_resolved_and_the_next_down_opens_anew(
    db: Database,
) -> None:
    with trio.fail_after(10):
        mid = await _monitor(db)
        await _moves(db, mid, ("pending", "down", T0 + 10))
        [opened] = await _incidents(db, mid)

        def resolve(current: Any) -> dict[str, Any]:
            return {"status": "resolved", "resolved_at": T0 + 15, "resolution_message": "mine"}

        await db.transaction(
            incidents.update_incident, opened["account_id"], opened["id"], resolve, T0 + 15
        )
        await _moves(db, mid, ("down", "up", T0 + 20))
        [still] = await _incidents(db, mid)
        assert (still["resolved_at"], still["resolution_message"]) == (T0 + 15, "mine")
        await _moves(db, mid, ("up", "down", T0 + 30))
        assert [r["resolved_at"] for r in await _incidents(db, mid)] == [T0 + 15, None]


async def test_pausing_and_deleting_leave_the_open_incident_open(db: Database) -> None:
    with trio.fail_after(10):
        mid = await _monitor(db)
        await _moves(db, mid, ("pending", "down", T0 + 10))
        [opened] = await _incidents(db, mid)
        account = opened["account_id"]
        await db.transaction(monitors.pause_monitor, account, mid, T0 + 20)
        await db.transaction(monitors.resume_monitor, account, mid, T0 + 30)
        await _moves(db, mid, ("pending", "down", T0 + 40))  # still open: nothing new
        await db.transaction(monitors.delete_monitor, account, mid, T0 + 50)
        [left] = await _rows(db, "SELECT * FROM incidents WHERE id = $1", opened["id"])
        assert left["resolved_at"] is None and left["monitors"] == [mid]
        assert len(await _rows(db, "SELECT id FROM incidents")) == 1


async def test_an_event_of_the_engine_shows_the_monitor_as_it_moved(db: Database) -> None:
    with trio.fail_after(10):
        mid = await _monitor(db)
        await _moves(db, mid, ("pending", "down", T0 + 10), ("down", "up", T0 + 20))
        rows = await _rows(
            db,
            "SELECT type, object, previous, created FROM events WHERE resource_id = $1 "
            "AND type IN ('monitor.up', 'monitor.down') ORDER BY seq",
            mid,
        )
        assert [(r["type"], r["object"]["status"], r["previous"]) for r in rows] == [
            ("monitor.down", "down", {"status": "pending"}),
            ("monitor.up", "up", {"status": "down"}),
        ]
        assert [r["created"] for r in rows] == [T0 + 10, T0 + 20]


async def test_a_rolled_back_mutation_leaves_no_event(db: Database) -> None:
    with trio.fail_after(10):
        record = await new_monitor(db, created=int(time.time()))
        before = len(await _rows(db, "SELECT id FROM events"))

        class Refused(Exception):
            pass

        async def rename_then_fail(connection: Any) -> None:
            def apply(current: Any) -> dict[str, Any]:
                return {"name": "renamed"}

            await monitors.update_monitor(
                connection, record.account_id, record.id, apply, record.created + 1
            )
            await monitors.pause_monitor(
                connection, record.account_id, record.id, record.created + 1
            )
            raise Refused

        with pytest.raises(Refused):
            await db.transaction(rename_then_fail)
        assert len(await _rows(db, "SELECT id FROM events")) == before
        stored = await db.run(monitors.get_monitor, None, record.id)
        assert stored is not None and stored.name == "m" and stored.status == "pending"


async def test_events_older_than_30_days_are_purged_with_their_deliveries(db: Database) -> None:
    with trio.fail_after(20):
        mid = await _monitor(db)  # monitor.created at T0
        await _moves(db, mid, ("pending", "down", T0 + 10))

        async def endpoint_and_two_events(connection: Any) -> None:
            account = await connection.fetchval(
                "SELECT account_id FROM monitors WHERE id = $1", mid
            )
            await connection.execute(
                "INSERT INTO webhook_endpoints (id, account_id, url, enabled_events, status, "
                "secret, created, updated) VALUES ('we_t', $1, 'http://127.0.0.1:9/', "
                "'{*}', 'enabled', 'whsec_t', $2, $2)",
                account,
                T0,
            )
            # Both fan out to the endpoint (the trigger of migration 0004).
            await connection.execute(
                "INSERT INTO events (id, account_id, type, resource_id, created, object) "
                "VALUES ('evt_old', $1, 'monitor.updated', $2, $3, '{}'), "
                "('evt_new', $1, 'monitor.updated', $2, $4, '{}')",
                account,
                mid,
                T0 + 20,
                T0 + 40 * 86_400,
            )

        await db.transaction(endpoint_and_two_events)
        counts = await _rows(
            db,
            "SELECT (SELECT count(*) FROM events) AS e, "
            "(SELECT count(*) FROM webhook_deliveries) AS d",
        )
        assert counts == [{"e": 5, "d": 2}]  # created, down, incident.created, old, new
        report = await maintain(
            db, MaintenanceSettings(), partition_seconds=86_400, now=T0 + 40 * 86_400
        )
        assert report.events_deleted == 4
        left = await _rows(db, "SELECT id FROM events")
        assert left == [{"id": "evt_new"}]
        assert len(await _rows(db, "SELECT id FROM webhook_deliveries")) == 1
