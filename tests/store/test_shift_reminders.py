"""Shift reminders (docs/on-call.md, "Shift reminders"; ``store.shift_reminders``): a
member is told on each of their contact channels 10 minutes before their shift starts,
once, whoever walks and however often; a change of the schedule changes who is told; a
start nobody walked before is missed, never told late. Real Postgres; fixed epoch
seconds (a daily rotation in Berlin handing off at 09:00)."""

from __future__ import annotations

from datetime import UTC, datetime

import trio

from engine.notifier import message_of
from store import Database, notifications, schedule_overrides, shift_reminders
from store.rotation import Shift
from tests.outbox import new_channel, new_member, new_schedule, rows
from tests.store.helpers import new_monitor

MONDAY_9 = int(datetime(2026, 11, 30, 8, 0, tzinfo=UTC).timestamp())  # 09:00 in Berlin
DAY = 86_400
LEAD = shift_reminders.LEAD_SECONDS

_TOLD = (
    "SELECT n.member_id, n.channel_id, n.kind, n.alert_id, n.give_up_at, r.starts_at "
    "FROM notifications n JOIN shift_reminders r ON r.seq = n.reminder_seq ORDER BY n.seq"
)


async def _walk(db: Database, now: int) -> int:
    return await db.transaction(shift_reminders.walk_due, now, 100)


async def _rota(db: Database) -> tuple[str, dict[str, str], dict[str, list[str]]]:
    """Ada (phone, then mail) and Bob (phone) taking turns daily from Monday 09:00 (Ada
    first; Bob holds the night before), and Carol (phone) in no layer: the schedule, the
    members by name and their channels."""
    monitor = await new_monitor(db, created=MONDAY_9 - 2 * DAY)
    account, at = monitor.account_id, MONDAY_9 - 2 * DAY
    channels = {
        "ada": [await new_channel(db, account, now=at), await new_channel(db, account, now=at)],
        "bob": [await new_channel(db, account, now=at)],
        "carol": [await new_channel(db, account, now=at)],
    }
    members = {name: await new_member(db, account, ch, now=at) for name, ch in channels.items()}
    schedule = await new_schedule(
        db,
        account,
        [members["ada"], members["bob"]],
        now=at,
        rotation="daily",
        handoff="2026-11-30T09:00:00",
    )
    return schedule, members, channels


async def test_a_member_is_told_ten_minutes_before_on_each_channel_once(db: Database) -> None:
    with trio.fail_after(30):
        schedule, members, channels = await _rota(db)
        await _walk(db, MONDAY_9 - 1800)  # plans Ada's 09:00 start
        planned = await rows(db, "SELECT member_id, starts_at, due_at, status FROM shift_reminders")
        assert planned == [
            {
                "member_id": members["ada"],
                "starts_at": MONDAY_9,
                "due_at": MONDAY_9 - LEAD,
                "status": "planned",
            }
        ]
        await _walk(db, MONDAY_9 - LEAD - 1)
        assert await rows(db, _TOLD) == []
        await _walk(db, MONDAY_9 - LEAD)
        told = [
            {
                "member_id": members["ada"],
                "channel_id": channel,
                "kind": "shift_starting",
                "alert_id": None,
                "give_up_at": MONDAY_9,  # never tried once the shift has started
                "starts_at": MONDAY_9,
            }
            for channel in channels["ada"]
        ]
        assert await rows(db, _TOLD) == told
        [sent] = await rows(db, "SELECT status, ends_at FROM shift_reminders")
        assert sent == {"status": "sent", "ends_at": MONDAY_9 + DAY}
        # walked again, by a restarted node or two at once: nobody is told twice
        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(_walk, db, MONDAY_9 - LEAD + 5)
        assert await rows(db, _TOLD) == told
        # the notifier renders it from the claim: the shift in Berlin's time
        claimed = await db.transaction(notifications.claim_due, MONDAY_9 - LEAD, 10, 60.0)
        assert [c.shift.member_name if c.shift else None for c in claimed] == ["Ada", "Ada"]
        message = message_of(claimed[0], "https://uptrio.example")
        assert message.kind == "shift_starting" and message.resource_id == schedule
        assert message.summary == (
            "Ada's on-call shift for web on-call starts Mon 30 Nov 2026 09:00 CET "
            "and ends Tue 01 Dec 2026 09:00 CET"
        )


async def test_two_nodes_walking_at_once_tell_a_member_once(db: Database) -> None:
    with trio.fail_after(30):
        _, _, channels = await _rota(db)
        async with trio.open_nursery() as nursery:  # plan and send, both at once
            for _ in range(2):
                nursery.start_soon(_walk, db, MONDAY_9 - LEAD)
        told = await rows(db, _TOLD)
        assert [t["channel_id"] for t in told] == channels["ada"]
        assert await rows(db, "SELECT count(*) AS n FROM shift_reminders") == [{"n": 1}]


async def test_an_override_changes_who_is_told(db: Database) -> None:
    with trio.fail_after(30):
        schedule, members, channels = await _rota(db)
        account = (await rows(db, "SELECT account_id FROM schedules"))[0]["account_id"]
        await _walk(db, MONDAY_9 - 1800)  # Ada's start planned
        await db.transaction(
            schedule_overrides.insert_override,
            {
                "account_id": account,
                "schedule_id": schedule,
                "member_id": members["carol"],
                "starts_at": MONDAY_9,
                "ends_at": MONDAY_9 + 3600,
                "created": MONDAY_9 - 1700,
            },
            None,
        )
        await _walk(db, MONDAY_9 - LEAD)
        told = await rows(db, _TOLD)
        assert [(t["member_id"], t["channel_id"]) for t in told] == [
            (members["carol"], channels["carol"][0])
        ]
        reminders = await rows(
            db, "SELECT member_id, starts_at, ends_at, status FROM shift_reminders ORDER BY seq"
        )
        assert reminders == [
            {"member_id": members["ada"], "starts_at": MONDAY_9, "ends_at": None, "status": "void"},
            {
                "member_id": members["carol"],
                "starts_at": MONDAY_9,
                "ends_at": MONDAY_9 + 3600,
                "status": "sent",
            },
        ]
        # Ada now starts when Carol's hour ends: planned again, told 10 minutes before it
        await _walk(db, MONDAY_9 + 3600 - LEAD)
        told = await rows(db, _TOLD)
        assert [(t["member_id"], t["starts_at"]) for t in told[1:]] == [
            (members["ada"], MONDAY_9 + 3600),
            (members["ada"], MONDAY_9 + 3600),
        ]


async def test_a_start_nobody_walked_before_is_missed_not_told_late(db: Database) -> None:
    with trio.fail_after(30):
        await _rota(db)
        await _walk(db, MONDAY_9 - 1800)
        await _walk(db, MONDAY_9 + 5)  # every node was down across 08:50 and 09:00
        assert await rows(db, _TOLD) == []
        statuses = await rows(db, "SELECT starts_at, status FROM shift_reminders ORDER BY seq")
        assert statuses[0] == {"starts_at": MONDAY_9, "status": "missed"}


def test_touching_shifts_of_one_member_are_one_start() -> None:
    listed = [
        Shift("mbr_bob", 0, 100, 0, None),
        Shift("mbr_ada", 100, 200, 0, None),
        Shift("mbr_ada", 200, 260, None, "ovr_1"),  # Ada's own override right after: no start
        Shift("mbr_bob", 200, 300, 0, None),
        Shift("mbr_ada", 300, 400, 0, None),  # back after Bob: a start
    ]
    assert shift_reminders.shift_starts(listed, 1) == [
        ("mbr_ada", 100),
        ("mbr_ada", 300),
        ("mbr_bob", 200),
    ]
