"""An escalation step whose target is a schedule pages whoever is on call in it when the
step runs, not when the alert was raised (docs/on-call.md, Schedules through the API;
``store.alert_walk``). Real Postgres; fixed epoch seconds."""

from __future__ import annotations

from datetime import UTC, datetime

import trio

from store import Database, alerts
from tests.outbox import new_channel, new_member, new_policy, new_schedule, rows
from tests.store.helpers import new_monitor, write_checks

MONDAY_9 = int(datetime(2026, 11, 30, 8, 0, tzinfo=UTC).timestamp())  # 09:00 in Berlin
WEEK = 7 * 86_400


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
        schedule = await new_schedule(db, account, [ada, bob], now=MONDAY_9 - 100)
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
        [alert] = await rows(db, "SELECT id FROM alerts WHERE resource_id = $1", monitor.id)
        # raised in Ada's week: step 0 (walked by the batch) pages Ada
        sent = await rows(
            db,
            "SELECT member_id, channel_id, kind FROM notifications WHERE alert_id = $1 "
            "ORDER BY seq",
            alert["id"],
        )
        assert sent == [{"member_id": ada, "channel_id": ada_phone, "kind": "trigger"}]
        # step 1 runs in Bob's week: Bob, not who was on call at the trigger
        assert await db.transaction(alerts.walk_due, MONDAY_9 + 60 + WEEK, 10) == 1
        sent = await rows(
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
        foreign = await new_schedule(db, other.account_id, [stranger], now=MONDAY_9 - 100)
        await new_policy(
            db,
            monitor.account_id,
            [(0, [("schedule", foreign)])],
            default=True,
            now=MONDAY_9 - 100,
        )
        await write_checks(db, monitor.id, [MONDAY_9 - 50], status="up", moved_from="pending")
        await write_checks(db, monitor.id, [MONDAY_9 + 60], status="down", moved_from="up")
        [alert] = await rows(db, "SELECT id FROM alerts WHERE resource_id = $1", monitor.id)
        assert await rows(db, "SELECT id FROM notifications WHERE alert_id = $1", alert["id"]) == []
