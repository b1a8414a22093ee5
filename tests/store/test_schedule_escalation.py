"""An escalation step whose target is a schedule pages whoever is on call in it when the
step runs, not when the alert was raised (docs/on-call.md, Schedules through the API;
``store.alert_walk``). Real Postgres; fixed epoch seconds."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import trio

from store import Connection, Database, alerts, new_id, schedules
from tests.outbox import new_channel, new_member, new_policy
from tests.store.helpers import new_monitor, write_checks

MONDAY_9 = int(datetime(2026, 11, 30, 8, 0, tzinfo=UTC).timestamp())  # 09:00 in Berlin
WEEK = 7 * 86_400


async def _sql(db: Database, query: str, *args: Any) -> list[dict[str, Any]]:
    async def run(connection: Connection) -> list[dict[str, Any]]:
        return [dict(r) for r in await connection.fetch(query, *args)]

    return await db.transaction(run)


async def _schedule(db: Database, account_id: str, members: list[str]) -> str:
    """A weekly rotation of ``members`` in Berlin, handing off on Mondays at 09:00."""
    values = {
        "id": new_id("sch"),
        "account_id": account_id,
        "name": "web on-call",
        "time_zone": "Europe/Berlin",
        "layers": [
            {
                "name": "weekly",
                "members": members,
                "rotation": {"type": "weekly", "handoff": "2026-11-30T09:00:00"},
                "restrictions": [],
            }
        ],
        "calendar_key": schedules.new_calendar_key(),
        "created": MONDAY_9 - 100,
        "updated": MONDAY_9 - 100,
        "metadata": {},
    }
    record = await db.transaction(schedules.insert_schedule, values, None)
    return record.id


async def test_a_schedule_target_pages_whoever_is_on_call_when_the_step_runs(
    db: Database,
) -> None:
    with trio.fail_after(30):
        monitor = await new_monitor(db, created=MONDAY_9 - 200)
        account = monitor.account_id
        ada_phone = await new_channel(db, account, now=MONDAY_9 - 100)
        bob_phone = await new_channel(db, account, now=MONDAY_9 - 100)
        ada = await new_member(db, account, [ada_phone], now=MONDAY_9 - 100)
        bob = await new_member(db, account, [bob_phone], now=MONDAY_9 - 100)
        schedule = await _schedule(db, account, [ada, bob])
        # step 0 at once, then the same schedule again a week later
        policy = await new_policy(
            db,
            account,
            [(0, [("schedule", schedule)]), (WEEK, [("schedule", schedule)])],
            default=True,
            now=MONDAY_9 - 100,
        )
        assert policy
        await write_checks(db, monitor.id, [MONDAY_9 - 50], status="up", moved_from="pending")
        await write_checks(db, monitor.id, [MONDAY_9 + 60], status="down", moved_from="up")
        [alert] = await _sql(db, "SELECT id FROM alerts WHERE resource_id = $1", monitor.id)
        # raised in Ada's week: step 0 (walked by the batch) pages Ada
        sent = await _sql(
            db,
            "SELECT member_id, channel_id, kind FROM notifications WHERE alert_id = $1 "
            "ORDER BY seq",
            alert["id"],
        )
        assert sent == [{"member_id": ada, "channel_id": ada_phone, "kind": "trigger"}]
        # step 1 runs in Bob's week: Bob, not who was on call at the trigger
        assert await db.transaction(alerts.walk_due, MONDAY_9 + 60 + WEEK, 10) == 1
        sent = await _sql(
            db,
            "SELECT member_id, channel_id, kind FROM notifications WHERE alert_id = $1 "
            "ORDER BY seq",
            alert["id"],
        )
        assert sent[1:] == [{"member_id": bob, "channel_id": bob_phone, "kind": "escalation"}]


async def test_a_schedule_of_another_account_or_gone_pages_nobody(db: Database) -> None:
    with trio.fail_after(30):
        monitor = await new_monitor(db, created=MONDAY_9 - 200)
        other = await new_monitor(db, created=MONDAY_9 - 200, account="globex")
        phone = await new_channel(db, other.account_id, now=MONDAY_9 - 100)
        stranger = await new_member(db, other.account_id, [phone], now=MONDAY_9 - 100)
        foreign = await _schedule(db, other.account_id, [stranger])
        await new_policy(
            db,
            monitor.account_id,
            [(0, [("schedule", foreign)])],
            default=True,
            now=MONDAY_9 - 100,
        )
        await write_checks(db, monitor.id, [MONDAY_9 - 50], status="up", moved_from="pending")
        await write_checks(db, monitor.id, [MONDAY_9 + 60], status="down", moved_from="up")
        [alert] = await _sql(db, "SELECT id FROM alerts WHERE resource_id = $1", monitor.id)
        assert await _sql(db, "SELECT id FROM notifications WHERE alert_id = $1", alert["id"]) == []
