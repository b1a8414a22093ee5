"""Alerts raised and resolved by moves in the store actor's batch, the escalation walk,
acknowledging and resolving by hand and by an acknowledge link (docs/alerts.md;
``store.alerts``, ``store.alerting``). Real Postgres; times are explicit epoch seconds."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import trio

from store import (
    AlertRecord,
    Connection,
    Database,
    StatusChange,
    alerts,
    checks,
    heartbeats,
    monitors,
    new_id,
    pings,
)
from store.pings import HeartbeatChange
from tests.outbox import new_channel, new_member, new_policy
from tests.store.helpers import (
    check_records,
    new_heartbeat,
    new_monitor,
    run_epoch,
    write_checks,
)

T0 = 1_790_000_000


async def _sql(db: Database, query: str, *args: Any) -> list[dict[str, Any]]:
    async def run(connection: Connection) -> list[dict[str, Any]]:
        return [dict(r) for r in await connection.fetch(query, *args)]

    return await db.transaction(run)


async def _monitor(db: Database, policy: str | None = None) -> tuple[str, str]:
    """A monitor that is up, with ``policy`` as its own (or none); (account, id)."""
    record = await new_monitor(db, created=T0 - 100)
    await _sql(db, "UPDATE monitors SET escalation_policy = $2 WHERE id = $1", record.id, policy)
    await write_checks(db, record.id, [T0 - 50], status="up", moved_from="pending")
    return record.account_id, record.id


async def _paged(db: Database, delay: int) -> tuple[str, str, str]:
    """A monitor that is up, whose own policy's one step tells a channel after ``delay``
    seconds; (account, monitor, channel)."""
    account, _ = await _monitor(db)
    channel = await new_channel(db, account, now=T0 - 100)
    policy = await new_policy(db, account, [(delay, [("channel", channel)])], now=T0 - 100)
    _, mid = await _monitor(db, policy)
    return account, mid, channel


async def _down(db: Database, monitor_id: str, at: int, before: str = "up") -> None:
    await write_checks(db, monitor_id, [at], status="down", moved_from=before)


async def _up(db: Database, monitor_id: str, at: int) -> None:
    await write_checks(db, monitor_id, [at], status="up", moved_from="down")


async def _alerts(db: Database, resource_id: str) -> list[dict[str, Any]]:
    return await _sql(db, "SELECT * FROM alerts WHERE resource_id = $1 ORDER BY seq", resource_id)


async def _notes(db: Database, alert_id: str) -> list[dict[str, Any]]:
    return await _sql(db, "SELECT * FROM notifications WHERE alert_id = $1 ORDER BY seq", alert_id)


async def _alert_events(db: Database) -> list[tuple[str, dict[str, Any] | None]]:
    rows = await _sql(
        db, "SELECT type, previous FROM events WHERE type LIKE 'alert.%' ORDER BY seq"
    )
    return [(r["type"], r["previous"]) for r in rows]


async def _walk(db: Database, now: float) -> int:
    return await db.transaction(alerts.walk_due, now, 10)


async def test_a_down_raises_an_alert_with_the_monitors_policy_and_the_up_resolves_it(
    db: Database,
) -> None:
    with trio.fail_after(20):
        account, mid = await _monitor(db)
        channel = await new_channel(db, account, now=T0 - 100)
        policy = await new_policy(db, account, [(60, [("channel", channel)])], now=T0 - 100)
        await _sql(
            db,
            "UPDATE monitors SET escalation_policy = $2, incident_severity = 'critical' "
            "WHERE id = $1",
            mid,
            policy,
        )
        await _down(db, mid, T0)
        [alert] = await _alerts(db, mid)
        [incident] = await _sql(db, "SELECT id FROM incidents WHERE monitor_id = $1", mid)
        assert alert["status"] == "triggered"
        assert alert["summary"] == "m is down: refused"
        assert alert["severity"] == "critical"
        assert alert["incident_id"] == incident["id"]
        assert alert["escalation_policy"] == policy
        assert (alert["triggered_at"], alert["next_step_at"]) == (T0, T0 + 60)
        assert alert["escalation_step"] == -1
        assert await _notes(db, alert["id"]) == []  # step 0 waits 60 s
        await _up(db, mid, T0 + 30)
        [resolved] = await _alerts(db, mid)
        assert (resolved["status"], resolved["resolved_at"]) == ("resolved", T0 + 30)
        assert resolved["next_step_at"] is None
        assert await _walk(db, T0 + 3600) == 0  # the walk is over
        assert await _alert_events(db) == [
            ("alert.triggered", None),
            ("alert.resolved", {"status": "triggered", "resolved_at": None}),
        ]
        [event] = await _sql(db, "SELECT object FROM events WHERE type = 'alert.triggered'")
        assert AlertRecord.from_snapshot(event["object"]).id == alert["id"]


async def test_the_accounts_default_policy_stands_in_and_without_one_nothing_is_raised(
    db: Database,
) -> None:
    with trio.fail_after(20):
        account, bare = await _monitor(db)
        await _down(db, bare, T0)
        assert await _alerts(db, bare) == []  # no policy at all
        channel = await new_channel(db, account, now=T0 - 100)
        policy = await new_policy(
            db, account, [(60, [("channel", channel)])], default=True, now=T0 - 100
        )
        _, other = await _monitor(db)
        await _down(db, other, T0 + 1)
        [alert] = await _alerts(db, other)
        assert alert["escalation_policy"] == policy


async def test_one_alert_per_episode_and_a_hand_resolved_one_stays_resolved(
    db: Database,
) -> None:
    with trio.fail_after(20):
        account, mid, _ = await _paged(db, 60)
        await _down(db, mid, T0)
        await _down(db, mid, T0 + 10, before="pending")  # paused and resumed while down
        [alert] = await _alerts(db, mid)
        done = await db.transaction(
            alerts.resolve, account, alert["id"], by={"type": "member", "id": "mbr_x"}, now=T0 + 20
        )
        assert done is not None and done.status == "resolved" and done.resolved_at == T0 + 20
        with pytest.raises(alerts.AlertNotOpen):
            await db.transaction(
                alerts.resolve, account, alert["id"], by={"type": "member", "id": "x"}, now=T0
            )
        with pytest.raises(alerts.AlertNotOpen):
            await db.transaction(
                alerts.acknowledge, account, alert["id"], by={"type": "member", "id": "x"}, now=T0
            )
        await _up(db, mid, T0 + 30)
        assert [a["status"] for a in await _alerts(db, mid)] == ["resolved"]
        await _down(db, mid, T0 + 40)
        assert [a["status"] for a in await _alerts(db, mid)] == ["resolved", "triggered"]


async def test_a_heartbeats_down_raises_an_alert_saying_why(db: Database) -> None:
    with trio.fail_after(20):
        beat = await new_heartbeat(db, created=T0 - 100)
        channel = await new_channel(db, beat.account_id, now=T0 - 100)
        await new_policy(
            db, beat.account_id, [(0, [("channel", channel)])], default=True, now=T0 - 100
        )
        why = "No ping for 90 s (period 60 s + grace 30 s)"
        move = HeartbeatChange(
            heartbeat_id=beat.id,
            move_id=new_id("hbm"),
            from_status="up",
            to_status="down",
            run_epoch=0,
            created=T0,
            detail=why,
        )
        await db.transaction(pings.write_ping_batch, [], [move])
        [alert] = await _alerts(db, beat.id)
        assert alert["summary"] == f"backup is down: {why}"
        assert alert["severity"] == "major"
        # step 0 waits 0 s: its notification commits with the move
        [note] = await _notes(db, alert["id"])
        assert (note["kind"], note["channel_id"], note["created"]) == ("trigger", channel, T0)


async def test_the_walk_tells_members_on_their_channels_then_escalates_and_repeats(
    db: Database,
) -> None:
    with trio.fail_after(20):
        account, _ = await _monitor(db)
        email = await new_channel(
            db, account, now=T0 - 100, type="email", config={"address": "a@x"}
        )
        off = await new_channel(db, account, now=T0 - 100, enabled=False)
        sms = await new_channel(db, account, now=T0 - 100)
        team = await new_channel(db, account, now=T0 - 100, type="slack")
        ada = await new_member(db, account, [email, off, sms], now=T0 - 100)
        steps = [(0, [("member", ada), ("schedule", "sch_x")]), (300, [("channel", team)])]
        policy = await new_policy(db, account, steps, repeat=1, now=T0 - 100)
        _, mid = await _monitor(db, policy)
        await _down(db, mid, T0)
        [alert] = await _alerts(db, mid)
        aid = alert["id"]
        # the batch walked step 0: Ada on her enabled channels, in order, each with a token
        first = await _notes(db, aid)
        assert [(n["kind"], n["step"], n["channel_id"], n["member_id"]) for n in first] == [
            ("trigger", 0, email, ada),
            ("trigger", 0, sms, ada),
        ]
        assert all(n["status"] == "pending" and n["next_attempt_at"] == T0 for n in first)
        assert all(n["give_up_at"] == T0 + 3600 for n in first)
        tokens = await _sql(db, "SELECT * FROM alert_ack_tokens WHERE alert_id = $1", aid)
        assert {t["token"] for t in tokens} == {n["ack_token"] for n in first}
        assert all(len(t["token"]) >= 22 and t["member_id"] == ada for t in tokens)
        [walked] = await _alerts(db, mid)
        assert (walked["escalation_step"], walked["walks"]) == (0, 0)
        assert walked["next_step_at"] == T0 + 300
        assert await _walk(db, T0 + 299) == 0
        assert await _walk(db, T0 + 301) == 1
        # repeat 1: step 0 again (its delay, 0 s, after step 1), then step 1, then over
        assert await _walk(db, T0 + 301) == 1
        assert await _walk(db, T0 + 301) == 0  # each step once
        assert await _walk(db, T0 + 600) == 0
        assert await _walk(db, T0 + 601) == 1
        assert await _walk(db, T0 + 9999) == 0
        rows = await _notes(db, aid)
        assert [(n["kind"], n["step"], n["channel_id"]) for n in rows[2:]] == [
            ("escalation", 1, team),
            ("reminder", 0, email),
            ("reminder", 0, sms),
            ("reminder", 1, team),
        ]
        [done] = await _alerts(db, mid)
        assert (done["escalation_step"], done["walks"], done["next_step_at"]) == (1, 1, None)
        events = await _alert_events(db)
        assert [t for t, _ in events] == ["alert.triggered"] + ["alert.escalated"] * 3
        assert events[1][1] == {"escalation_step": 0}


async def test_acknowledging_stops_the_walk_and_cancels_pending_pages(db: Database) -> None:
    with trio.fail_after(20):
        account, _ = await _monitor(db)
        duty = await new_channel(db, account, now=T0 - 100, type="pagerduty")
        chat = await new_channel(db, account, now=T0 - 100, type="slack")
        steps = [(0, [("channel", duty), ("channel", chat)]), (60, [("channel", chat)])]
        policy = await new_policy(db, account, steps, now=T0 - 100)
        _, mid = await _monitor(db, policy)
        await _down(db, mid, T0)
        [alert] = await _alerts(db, mid)
        aid = alert["id"]
        # PagerDuty was told (one attempt made); Slack's page is still pending
        await _sql(
            db,
            "UPDATE notifications SET status = 'succeeded', attempts = 1 WHERE channel_id = $1",
            duty,
        )
        by = {"type": "member", "id": "mbr_ada"}
        acked, changed = await db.transaction(alerts.acknowledge, account, aid, by=by, now=T0 + 5)
        assert changed and acked is not None
        assert (acked.status, acked.acknowledged_at, acked.acknowledged_by) == (
            "acknowledged",
            T0 + 5,
            by,
        )
        assert acked.next_step_at is None
        assert await _walk(db, T0 + 9999) == 0
        rows = await _notes(db, aid)
        assert [(n["kind"], n["channel_id"], n["status"]) for n in rows] == [
            ("trigger", duty, "succeeded"),
            ("trigger", chat, "cancelled"),
            ("acknowledged", duty, "pending"),
        ]
        again, changed = await db.transaction(alerts.acknowledge, account, aid, by=by, now=T0 + 6)
        assert not changed and again is not None and again.acknowledged_at == T0 + 5
        assert await db.transaction(alerts.acknowledge, account, "alt_nope", by=by, now=T0) == (
            None,
            False,
        )
        await _up(db, mid, T0 + 100)
        rows = await _notes(db, aid)
        # told channels with send_resolved (Slack's page was never attempted: not told)
        assert [(n["kind"], n["channel_id"]) for n in rows[3:]] == [("resolved", duty)]
        assert [t for t, _ in await _alert_events(db)] == [
            "alert.triggered",
            "alert.acknowledged",
            "alert.resolved",
        ]


async def test_an_acknowledge_link_acknowledges_and_dies_with_the_alert(db: Database) -> None:
    with trio.fail_after(20):
        account, _ = await _monitor(db)
        sms = await new_channel(db, account, now=T0 - 100)
        ada = await new_member(db, account, [sms], now=T0 - 100)
        policy = await new_policy(db, account, [(0, [("member", ada)])], now=T0 - 100)
        _, mid = await _monitor(db, policy)
        await _down(db, mid, T0)
        [alert] = await _alerts(db, mid)
        [note] = await _notes(db, alert["id"])
        token = note["ack_token"]
        assert await db.run(alerts.alert_of_token, "not-a-token") is None
        shown = await db.run(alerts.alert_of_token, token)
        assert shown is not None and shown.id == alert["id"] and shown.status == "triggered"
        acked, changed = await db.transaction(alerts.acknowledge_by_token, token, now=T0 + 9)
        assert changed and acked is not None
        assert acked.acknowledged_by == {"type": "member", "id": ada}
        await _up(db, mid, T0 + 60)
        assert await db.run(alerts.alert_of_token, token) is None
        assert await db.transaction(alerts.acknowledge_by_token, token, now=T0 + 61) == (
            None,
            False,
        )
        assert await _sql(db, "SELECT * FROM alert_ack_tokens") == []


async def test_two_concurrent_walks_never_notify_a_step_twice(db: Database) -> None:
    with trio.fail_after(30):
        account, _ = await _monitor(db)
        chat = await new_channel(db, account, now=T0 - 100)
        policy = await new_policy(db, account, [(60, [("channel", chat)])], now=T0 - 100)
        monitors = [(await _monitor(db, policy))[1] for _ in range(3)]
        for mid in monitors:
            await _down(db, mid, T0)
        first_claimed = asyncio.Event()
        order: list[str] = []

        async def first(connection: Connection) -> int:
            walked = await alerts.walk_due(connection, T0 + 60, 2)
            first_claimed.set()
            await asyncio.sleep(1.0)  # hold the row locks
            order.append("first")
            return walked

        async def second(connection: Connection) -> int:
            await first_claimed.wait()
            walked = await alerts.walk_due(connection, T0 + 60, 10)
            order.append("second")
            return walked

        counts: dict[str, int] = {}

        async def run(name: str, fn: object) -> None:
            counts[name] = await db.transaction(fn)  # type: ignore[arg-type]

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, "first", first)
            nursery.start_soon(run, "second", second)
        assert counts == {"first": 2, "second": 1}
        assert order == ["second", "first"]  # skipped the locked alerts, never waited
        assert await _walk(db, T0 + 60) == 0
        rows = await _sql(db, "SELECT alert_id, step FROM notifications")
        assert len(rows) == 3 and len({r["alert_id"] for r in rows}) == 3
        assert json.dumps(sorted(r["step"] for r in rows)) == "[0, 0, 0]"


async def test_a_down_and_an_up_in_one_batch_raise_and_resolve_one_alert(db: Database) -> None:
    with trio.fail_after(20):
        _, mid, _ = await _paged(db, 0)
        [down] = check_records(mid, [T0], status="down")
        [up] = check_records(mid, [T0 + 5])
        epoch = await run_epoch(db, mid)
        changes = [
            StatusChange(
                monitor_id=mid,
                check_id=check.id,
                from_status=before,
                to_status=check.status,
                run_epoch=epoch,
                created=check.created,
            )
            for check, before in ((down, "up"), (up, "down"))
        ]
        await db.transaction(checks.write_check_batch, [down, up], changes)
        [alert] = await _alerts(db, mid)
        assert (alert["status"], alert["triggered_at"], alert["resolved_at"]) == (
            "resolved",
            T0,
            T0 + 5,
        )
        # its page was written, then cancelled before anyone was told: no resolution notice
        assert [(n["kind"], n["status"]) for n in await _notes(db, alert["id"])] == [
            ("trigger", "cancelled")
        ]
        assert [t for t, _ in await _alert_events(db)] == ["alert.triggered", "alert.resolved"]


async def test_an_up_waiting_on_a_walk_in_flight_cancels_the_pages_it_wrote(db: Database) -> None:
    with trio.fail_after(30):
        _, mid, _ = await _paged(db, 60)
        await _down(db, mid, T0)
        walked = asyncio.Event()

        async def walk(connection: Connection) -> int:
            count = await alerts.walk_due(connection, T0 + 60, 10)
            walked.set()
            await asyncio.sleep(1.0)  # hold the alert's lock while the up waits for it
            return count

        async def up() -> None:
            while not walked.is_set():
                await trio.sleep(0.01)
            await _up(db, mid, T0 + 61)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(db.transaction, walk)
            nursery.start_soon(up)
        [alert] = await _alerts(db, mid)
        assert alert["status"] == "resolved"
        assert [(n["kind"], n["status"]) for n in await _notes(db, alert["id"])] == [
            ("trigger", "cancelled")
        ]


async def test_deleting_a_monitor_or_heartbeat_resolves_its_open_alert(db: Database) -> None:
    """Nothing moves a deleted monitor up: its open alert is resolved in the deleting
    transaction, and the channels told of it get their resolution notice."""
    with trio.fail_after(20):
        account, mid, channel = await _paged(db, 0)
        await _down(db, mid, T0)
        [alert] = await _alerts(db, mid)
        [trigger] = await _notes(db, alert["id"])
        await _sql(
            db, "UPDATE notifications SET status = 'succeeded', attempts = 1 WHERE id = $1",
            trigger["id"],
        )  # fmt: skip
        assert await db.transaction(monitors.delete_monitor, account, mid, T0 + 40)
        [resolved] = await _alerts(db, mid)
        assert (resolved["status"], resolved["resolved_at"]) == ("resolved", T0 + 40)
        assert resolved["next_step_at"] is None
        notes = await _notes(db, alert["id"])
        assert [(n["kind"], n["channel_id"]) for n in notes] == [
            ("trigger", channel), ("resolved", channel),
        ]  # fmt: skip
        assert [t for t, _ in await _alert_events(db)] == ["alert.triggered", "alert.resolved"]

        beat = await new_heartbeat(db, created=T0 - 100)
        await _sql(
            db, "UPDATE heartbeats SET escalation_policy = $2 WHERE id = $1", beat.id,
            resolved["escalation_policy"],
        )  # fmt: skip
        move = HeartbeatChange(
            heartbeat_id=beat.id, move_id=new_id("hbm"), from_status="up",
            to_status="down", run_epoch=0, created=T0, detail="no ping",
        )  # fmt: skip
        await db.transaction(pings.write_ping_batch, [], [move])
        assert [a["status"] for a in await _alerts(db, beat.id)] == ["triggered"]
        assert await db.transaction(heartbeats.delete_heartbeat, account, beat.id, T0 + 50)
        assert [a["status"] for a in await _alerts(db, beat.id)] == ["resolved"]
        # with nothing open, a delete resolves nothing
        _, other = await _monitor(db)
        assert await db.transaction(monitors.delete_monitor, account, other, T0 + 60)
