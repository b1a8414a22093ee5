"""Regions and quorum (docs/regions.md; store.quorum): each region's view moved by its own
region moves, the monitor moved only when the quorum's answer changes, in the batch's
transaction, under the monitor's row lock; a silent region is unknown, never down."""

from __future__ import annotations

import asyncio
from typing import Any

import trio

from store import CheckRecord, Connection, Database, StatusChange, checks, monitors, new_check_id
from store.quorum import region_status_sql
from tests.outbox import new_channel, new_policy
from tests.store.helpers import new_monitor, run_epoch

T0 = 1_790_000_000
REGIONS = ["ap-south", "eu-west", "us-east"]


async def _monitor(db: Database, quorum: int | None = 2) -> str:
    record = await new_monitor(db, created=T0, interval_seconds=10)
    await db.run(checks.ensure_partitions, T0, T0 + 86_400, 86_400)

    def apply(current: Any) -> dict[str, Any]:
        return {"regions": REGIONS, "region_quorum": quorum, "name": "api"}

    await db.transaction(monitors.update_monitor, record.account_id, record.id, apply, T0)
    return record.id


def _check(monitor_id: str, region: str, status: str, at: int) -> CheckRecord:
    return CheckRecord(
        id=new_check_id(at),
        monitor_id=monitor_id,
        status=status,
        response_time_ms=2.0,
        status_code=None,
        error_code=None if status == "up" else "connection_refused",
        error_message=None if status == "up" else "Connection refused",
        created=at,
        region=region,
    )


async def _batch(
    db: Database, monitor_id: str, region: str, status: str, at: int, moved_from: str | None
) -> tuple[list[CheckRecord], list[StatusChange], list[str | None]]:
    """One check of ``region`` at ``at`` (and its region move from ``moved_from``)."""
    check = _check(monitor_id, region, status, at)
    changes = []
    if moved_from is not None:
        changes.append(
            StatusChange(
                monitor_id=monitor_id,
                check_id=check.id,
                from_status=moved_from,
                to_status=status,
                run_epoch=await run_epoch(db, monitor_id),
                created=at,
                region=region,
            )
        )
    return [check], changes, [region]


async def _write(
    db: Database,
    monitor_id: str,
    region: str,
    status: str,
    at: int,
    moved_from: str | None = None,
) -> None:
    batch = await _batch(db, monitor_id, region, status, at, moved_from)
    await db.transaction(checks.write_check_batch, *batch)


async def _rows(db: Database, query: str, *args: Any) -> list[dict[str, Any]]:
    async def fetch(connection: Connection) -> list[dict[str, Any]]:
        return [dict(r) for r in await connection.fetch(query, *args)]

    return await db.run(fetch)


async def _status(db: Database, monitor_id: str) -> str:
    [row] = await _rows(db, "SELECT status FROM monitors WHERE id = $1", monitor_id)
    return str(row["status"])


async def _region_status(db: Database, monitor_id: str, at: int) -> dict[str, str]:
    [row] = await _rows(
        db,
        f"SELECT {region_status_sql('m', '$2')} AS s FROM monitors m WHERE m.id = $1",
        monitor_id,
        at,
    )
    return dict(row["s"])


async def _all_up(db: Database, monitor_id: str, at: int) -> None:
    for region in REGIONS:
        await _write(db, monitor_id, region, "up", at, moved_from="pending")


async def test_one_region_down_keeps_it_up_two_take_it_down_with_one_incident_naming_both(
    db: Database,
) -> None:
    with trio.fail_after(20):
        mid = await _monitor(db)
        await _all_up(db, mid, T0 + 10)
        assert await _status(db, mid) == "up"
        await _write(db, mid, "eu-west", "down", T0 + 20, moved_from="up")
        await _write(db, mid, "ap-south", "up", T0 + 20)
        assert await _status(db, mid) == "up"  # 1 of 3: below the quorum
        assert await _rows(db, "SELECT id FROM incidents WHERE monitor_id = $1", mid) == []
        await _write(db, mid, "us-east", "down", T0 + 30, moved_from="up")
        assert await _status(db, mid) == "down"
        [incident] = await _rows(db, "SELECT * FROM incidents WHERE monitor_id = $1", mid)
        assert incident["description"].startswith("Down in eu-west, us-east (2 of 3). ")
        assert incident["created"] == T0 + 30
        [down] = await _rows(
            db, "SELECT object FROM events WHERE type = 'monitor.down' AND resource_id = $1", mid
        )
        assert down["object"]["region_status"] == {
            "ap-south": "up",
            "eu-west": "down",
            "us-east": "down",
        }
        # a third region down changes no answer: no second move, no second incident
        await _write(db, mid, "ap-south", "down", T0 + 40, moved_from="up")
        await _write(db, mid, "eu-west", "up", T0 + 50, moved_from="down")
        assert await _status(db, mid) == "down"  # us-east and ap-south still down
        await _write(db, mid, "us-east", "up", T0 + 60, moved_from="down")
        assert await _status(db, mid) == "up"
        [resolved] = await _rows(db, "SELECT * FROM incidents WHERE monitor_id = $1", mid)
        assert resolved["resolved_at"] == T0 + 60
        moves = await _rows(
            db,
            "SELECT from_status, to_status, created FROM status_changes "
            "WHERE monitor_id = $1 AND check_id IS NOT NULL ORDER BY seq",
            mid,
        )
        assert [(m["from_status"], m["to_status"], m["created"]) for m in moves] == [
            ("pending", "up", T0 + 10),
            ("up", "down", T0 + 30),
            ("down", "up", T0 + 60),
        ]


async def test_two_regions_committing_at_once_lose_no_move_and_open_one_incident(
    db: Database,
) -> None:
    with trio.fail_after(20):
        mid = await _monitor(db)
        await _all_up(db, mid, T0 + 10)
        first = await _batch(db, mid, "eu-west", "down", T0 + 20, "up")
        second = await _batch(db, mid, "us-east", "down", T0 + 20, "up")

        async def slow(connection: Connection, *batch: Any) -> None:
            await checks.write_check_batch(connection, *batch)
            await asyncio.sleep(1.0)  # commits while the other batch has started

        async with trio.open_nursery() as nursery:
            nursery.start_soon(db.transaction, slow, *first)
            await trio.sleep(0.3)
            await db.transaction(checks.write_check_batch, *second)
        assert await _status(db, mid) == "down"
        assert len(await _rows(db, "SELECT id FROM incidents WHERE monitor_id = $1", mid)) == 1
        assert len(await _rows(db, "SELECT id FROM events WHERE type = 'monitor.down'")) == 1


async def test_a_silent_region_is_unknown_never_down(db: Database) -> None:
    with trio.fail_after(20):
        mid = await _monitor(db)
        await _all_up(db, mid, T0 + 10)
        await _write(db, mid, "eu-west", "down", T0 + 20, moved_from="up")
        # eu-west's node goes; ap-south and us-east go on (2 intervals + 10 s: 30 s)
        for at in (T0 + 30, T0 + 40, T0 + 50):
            await _write(db, mid, "ap-south", "up", at)
        assert await _region_status(db, mid, T0 + 50) == {
            "ap-south": "up",
            "eu-west": "down",  # heard 30 s ago: still counts
            "us-east": "unknown",  # heard 40 s ago
        }
        assert (await _region_status(db, mid, T0 + 51))["eu-west"] == "unknown"
        await _write(db, mid, "us-east", "down", T0 + 55, moved_from="up")
        assert await _status(db, mid) == "up"  # eu-west's old down no longer counts
        assert await _rows(db, "SELECT id FROM incidents WHERE monitor_id = $1", mid) == []


async def test_a_retried_region_batch_moves_nothing_twice(db: Database) -> None:
    with trio.fail_after(20):
        mid = await _monitor(db, quorum=1)
        await _all_up(db, mid, T0 + 10)
        batch = await _batch(db, mid, "eu-west", "down", T0 + 20, "up")
        await db.transaction(checks.write_check_batch, *batch)
        await db.transaction(checks.write_check_batch, *batch)
        assert await _status(db, mid) == "down"
        logged = await _rows(db, "SELECT * FROM region_moves WHERE monitor_id = $1", mid)
        assert len(logged) == 4  # three pending -> up, one up -> down
        assert len(await _rows(db, "SELECT id FROM incidents WHERE monitor_id = $1", mid)) == 1


async def test_a_move_of_a_region_not_listed_changes_nothing(db: Database) -> None:
    with trio.fail_after(20):
        mid = await _monitor(db, quorum=1)
        await _write(db, mid, "default", "down", T0 + 10, moved_from="pending")
        assert await _status(db, mid) == "pending"
        assert await _rows(db, "SELECT * FROM region_moves WHERE monitor_id = $1", mid) == []


async def test_the_alert_names_the_regions_down(db: Database) -> None:
    with trio.fail_after(20):
        mid = await _monitor(db)
        [row] = await _rows(db, "SELECT account_id FROM monitors WHERE id = $1", mid)
        channel = await new_channel(db, row["account_id"], now=T0)
        policy = await new_policy(db, row["account_id"], [(60, [("channel", channel)])], now=T0)

        async def adopt(connection: Connection) -> None:
            await connection.execute(
                "UPDATE monitors SET escalation_policy = $2 WHERE id = $1", mid, policy
            )

        await db.run(adopt)
        await _all_up(db, mid, T0 + 10)
        await _write(db, mid, "eu-west", "down", T0 + 20, moved_from="up")
        await _write(db, mid, "ap-south", "down", T0 + 20, moved_from="up")
        [alert] = await _rows(db, "SELECT summary FROM alerts WHERE resource_id = $1", mid)
        assert alert["summary"] == (
            "api is down: down in ap-south, eu-west (2 of 3): Connection refused"
        )


async def test_pause_and_resume_start_the_views_again(db: Database) -> None:
    with trio.fail_after(20):
        mid = await _monitor(db)
        [row] = await _rows(db, "SELECT account_id FROM monitors WHERE id = $1", mid)
        await _all_up(db, mid, T0 + 10)
        await db.transaction(monitors.pause_monitor, row["account_id"], mid, T0 + 20)
        await db.transaction(monitors.resume_monitor, row["account_id"], mid, T0 + 30)
        assert set((await _region_status(db, mid, T0 + 30)).values()) == {"pending"}
        # the actors start from pending again: a region's first up moves the monitor up
        await _write(db, mid, "us-east", "up", T0 + 40, moved_from="pending")
        assert await _status(db, mid) == "up"
        logged = await _rows(
            db,
            "SELECT to_status, created FROM region_moves WHERE monitor_id = $1 "
            "AND region = 'us-east' ORDER BY seq",
            mid,
        )
        assert [(r["to_status"], r["created"]) for r in logged] == [
            ("up", T0 + 10),
            ("paused", T0 + 20),
            ("pending", T0 + 30),
            ("up", T0 + 40),
        ]


async def test_one_batch_of_many_moves_decides_each_in_order(db: Database) -> None:
    """A node's batch carries many region moves, of several monitors and several of one
    monitor: each is decided in its order, in two statements whatever their number."""
    with trio.fail_after(20):
        first, second = await _monitor(db, quorum=1), await _monitor(db, quorum=2)
        batches = [
            await _batch(db, first, "eu-west", "up", T0 + 10, "pending"),
            await _batch(db, second, "eu-west", "up", T0 + 10, "pending"),
            await _batch(db, first, "eu-west", "down", T0 + 20, "up"),
            await _batch(db, second, "eu-west", "down", T0 + 20, "up"),
            await _batch(db, first, "eu-west", "up", T0 + 30, "down"),
        ]
        records = [check for batch in batches for check in batch[0]]
        moves = [change for batch in batches for change in batch[1]]
        await db.transaction(checks.write_check_batch, records, moves, ["eu-west"] * 5)
        logged = await _rows(
            db,
            "SELECT monitor_id, from_status, to_status FROM status_changes "
            "WHERE monitor_id = ANY($1::text[]) ORDER BY seq",
            [first, second],
        )
        # quorum 1: up, down, up again; quorum 2 of 3: one region's down is not enough
        assert [(r["monitor_id"], r["from_status"], r["to_status"]) for r in logged] == [
            (first, "pending", "up"),
            (second, "pending", "up"),
            (first, "up", "down"),
            (first, "down", "up"),
        ]
        assert await _status(db, first) == "up" and await _status(db, second) == "up"
        assert (await _region_status(db, second, T0 + 30))["eu-west"] == "down"
        assert len(await _rows(db, "SELECT * FROM region_moves")) == 5
