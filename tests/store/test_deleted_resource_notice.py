"""The resolution notice of an alert whose monitor was deleted still names the monitor
(docs/alerts.md, What each provider receives: "Every message says what is down"; Alerts:
deleting the monitor resolves its open alert and "the told channels get their resolution
notice"). Real Postgres; times are explicit epoch seconds; nothing is sent."""

from __future__ import annotations

import trio

from store import Database, monitors, notifications
from tests.outbox import new_channel, new_policy, rows
from tests.store.helpers import new_monitor, write_checks

T0 = 1_790_000_000


async def test_the_notice_of_a_deleted_monitors_alert_names_the_monitor(db: Database) -> None:
    with trio.fail_after(20):
        monitor = await new_monitor(db, created=T0 - 100)
        account = monitor.account_id
        channel = await new_channel(db, account, now=T0 - 100)
        policy = await new_policy(db, account, [(0, [("channel", channel)])], now=T0 - 100)
        await rows(
            db, "UPDATE monitors SET escalation_policy = $2 WHERE id = $1", monitor.id, policy
        )
        await write_checks(db, monitor.id, [T0 - 50], status="up", moved_from="pending")
        await write_checks(db, monitor.id, [T0], status="down", moved_from="up")
        await rows(
            db,
            "UPDATE notifications SET status = 'succeeded', attempts = 1 WHERE channel_id = $1",
            channel,
        )
        assert await db.transaction(monitors.delete_monitor, account, monitor.id, T0 + 40)
        [notice] = await db.transaction(notifications.claim_due, T0 + 41, 10, 60.0)
        assert notice.notification.kind == "resolved"
        assert notice.resource_name == monitor.name and notice.resource_url == monitor.url
