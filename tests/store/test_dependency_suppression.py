"""A dependency suppresses a dependent's incident and alert in the store actor's batch
(docs/incidents.md, "Dependencies"; ``store.alerting``): a monitor that moves into down
while a monitor it depends on is down opens no incident, raises no alert and says why in
its ``monitor.down`` event; still down after the parent is back, its next failed check
opens them, once. Real Postgres; times are explicit epoch seconds."""

from __future__ import annotations

import trio

from store import Database, StatusChange, checks, monitors
from tests.outbox import new_channel, new_policy
from tests.store.helpers import check_records, new_monitor, read_availability, write_checks
from tests.store.suppression import down, events, opened, sql, suppressed_by

T0 = 1_790_000_000


async def _pair(db: Database) -> tuple[str, str]:
    """A router and a web monitor depending on it, both up, the account paged by a
    default policy (its step waits 60 s); (router, web)."""
    router = await new_monitor(db, created=T0 - 100)
    web = await new_monitor(db, created=T0 - 100)
    channel = await new_channel(db, router.account_id, now=T0 - 100)
    await new_policy(
        db, router.account_id, [(60, [("channel", channel)])], default=True, now=T0 - 100
    )
    await db.transaction(
        monitors.update_monitor,
        web.account_id,
        web.id,
        lambda _: {"depends_on": [router.id]},
        T0 - 100,
    )
    for monitor_id in (router.id, web.id):
        await write_checks(db, monitor_id, [T0 - 50], status="up", moved_from="pending")
    return router.id, web.id


async def _held(db: Database) -> tuple[str, str]:
    """:func:`_pair`, the router down at T0, the web monitor down at T0 + 10: held back."""
    router, web = await _pair(db)
    await down(db, router, T0)
    await down(db, web, T0 + 10)
    return router, web


async def test_a_child_down_while_its_parent_is_down_opens_nothing_and_says_why(
    db: Database,
) -> None:
    with trio.fail_after(20):
        router, web = await _held(db)
        assert await opened(db, router) == [("alert", T0), ("incident", T0)]
        assert await opened(db, web) == []
        why = {"type": "dependency", "id": router}
        assert await events(db, web) == [("monitor.up", None), ("monitor.down", why)]
        assert await suppressed_by(db, web) == why
        # availability still counts it down
        whole, _ = await read_availability(db, web, T0, T0 + 20, now=T0 + 20)
        assert whole.down_seconds == 10


async def test_still_down_after_the_parent_is_back_it_alerts_at_its_next_check_once(
    db: Database,
) -> None:
    with trio.fail_after(20):
        router, web = await _held(db)
        await down(db, web, T0 + 20, moved=False)  # the parent is still down
        assert await opened(db, web) == []
        await write_checks(db, router, [T0 + 30], status="up", moved_from="down")
        assert await opened(db, web) == []  # its own next check has not run yet
        await down(db, web, T0 + 40, moved=False)
        assert await opened(db, web) == [("alert", T0 + 40), ("incident", T0 + 40)]
        await down(db, web, T0 + 50, moved=False)
        assert await opened(db, web) == [("alert", T0 + 40), ("incident", T0 + 40)]
        why = {"type": "dependency", "id": router}
        assert await events(db, web) == [
            ("monitor.up", None),
            ("monitor.down", why),
            ("incident.created", T0 + 40),
            ("alert.triggered", T0 + 40),
        ]
        assert await suppressed_by(db, web) is None
        [incident] = await sql(
            db, "SELECT id, description FROM incidents WHERE monitor_id = $1", web
        )
        assert incident["description"].startswith("Check chk_")
        [alert] = await sql(db, "SELECT incident_id FROM alerts WHERE resource_id = $1", web)
        assert alert["incident_id"] == incident["id"]


async def test_a_child_back_up_while_suppressed_is_done_with_it(db: Database) -> None:
    with trio.fail_after(20):
        router, web = await _held(db)
        await write_checks(db, web, [T0 + 20], status="up", moved_from="down")
        assert await suppressed_by(db, web) is None
        await write_checks(db, router, [T0 + 30], status="up", moved_from="down")
        await down(db, web, T0 + 40)  # a new episode, its parent up: it alerts
        assert await opened(db, web) == [("alert", T0 + 40), ("incident", T0 + 40)]


async def test_parent_and_child_down_in_one_batch_the_child_is_suppressed(db: Database) -> None:
    with trio.fail_after(20):
        router, web = await _pair(db)
        batch, changes = [], []
        for monitor_id in (web, router):
            [check] = check_records(monitor_id, [T0], status="down")
            batch.append(check)
            changes.append(
                StatusChange(
                    monitor_id=monitor_id,
                    check_id=check.id,
                    from_status="up",
                    to_status="down",
                    run_epoch=0,
                    created=T0,
                )
            )
        await db.transaction(checks.write_check_batch, batch, changes)
        assert await opened(db, router) == [("alert", T0), ("incident", T0)]
        assert await opened(db, web) == []
        assert await suppressed_by(db, web) == {"type": "dependency", "id": router}


async def test_a_parent_that_is_up_suppresses_nothing(db: Database) -> None:
    with trio.fail_after(20):
        _, web = await _pair(db)
        await down(db, web, T0)
        assert await opened(db, web) == [("alert", T0), ("incident", T0)]
        assert await events(db, web) == [
            ("monitor.up", None),
            ("monitor.down", None),
            ("incident.created", T0),
            ("alert.triggered", T0),
        ]
        assert await suppressed_by(db, web) is None


async def test_a_paused_parent_holds_nothing_back_any_more(db: Database) -> None:
    with trio.fail_after(20):
        router, web = await _held(db)
        [row] = await sql(db, "SELECT account_id FROM monitors WHERE id = $1", router)
        await db.transaction(monitors.pause_monitor, row["account_id"], router, T0 + 20)
        await down(db, web, T0 + 30, moved=False)
        assert await opened(db, web) == [("alert", T0 + 30), ("incident", T0 + 30)]
