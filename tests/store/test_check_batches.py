"""The store's batch write of checks and status changes, and the store actor."""

from __future__ import annotations

import time

import trio

from store import (
    Database,
    WriteCheck,
    checks,
    monitors,
    run_store_writer,
)
from tests.store.helpers import change_of, new_monitor, one_check


async def _monitor(db: Database, status: str = "pending") -> str:
    record = await new_monitor(db, created=int(time.time()), status=status, interval_seconds=10)
    await db.run(checks.ensure_partitions, 0, 3_000, 86_400)  # the checks' `created`
    return record.id


async def test_batch_writes_checks_and_the_last_status_change(db: Database) -> None:
    with trio.fail_after(10):
        monitor_id = await _monitor(db)
        first, second = one_check(monitor_id, "up", 100), one_check(monitor_id, "down", 110)
        inserted = await db.transaction(
            checks.write_check_batch,
            [first, second],
            [change_of(first, "pending", "up"), change_of(second, "up", "down")],
        )
        assert inserted == 2
        record = await db.run(monitors.get_monitor, None, monitor_id)
        assert record is not None
        assert (record.status, record.updated, record.last_checked_at) == ("down", 110, 110)
        listed, has_more = await db.run(
            checks.list_checks, monitor_id, limit=10, starting_after=None
        )
        assert [c.id for c in listed] == [second.id, first.id] and not has_more


async def test_retried_batch_inserts_nothing_twice(db: Database) -> None:
    with trio.fail_after(10):
        monitor_id = await _monitor(db)
        batch = [one_check(monitor_id), one_check(monitor_id)]
        assert await db.transaction(checks.write_check_batch, batch, []) == 2
        assert await db.transaction(checks.write_check_batch, batch, []) == 0


async def test_status_change_of_an_old_epoch_or_a_paused_monitor_is_ignored(
    db: Database,
) -> None:
    with trio.fail_after(10):
        monitor_id = await _monitor(db)
        check = one_check(monitor_id, "up")
        await db.transaction(
            checks.write_check_batch, [check], [change_of(check, "pending", "up", epoch=7)]
        )
        record = await db.run(monitors.get_monitor, None, monitor_id)
        assert record is not None and record.status == "pending"
        paused = await _monitor(db, status="paused")
        check = one_check(paused, "up")
        await db.transaction(checks.write_check_batch, [check], [change_of(check, "pending", "up")])
        record = await db.run(monitors.get_monitor, None, paused)
        assert record is not None and record.status == "paused"


async def test_a_check_started_after_a_pause_is_refused(db: Database) -> None:
    """A pause made through another node: the owner may start a probe before it is told
    (docs/several-nodes.md, A pause through another node); that check is not stored, one
    started before the pause is."""
    with trio.fail_after(10):
        monitor_id = await _monitor(db)
        now = int(time.time())
        await db.run(checks.ensure_partitions, now - 10, now + 10, 86_400)
        record, changed = await db.transaction(
            monitors.pause_monitor, (await _account(db, monitor_id)), monitor_id, now
        )
        assert changed and record is not None
        before, after = one_check(monitor_id, created=now - 1), one_check(monitor_id, created=now)
        late = change_of(after, "pending", "up", epoch=record.run_epoch - 1)
        assert await db.transaction(checks.write_check_batch, [before, after], [late]) == 1
        listed, _ = await db.run(checks.list_checks, monitor_id, limit=10, starting_after=None)
        assert [c.id for c in listed] == [before.id]
        stored = await db.run(monitors.get_monitor, None, monitor_id)
        assert stored is not None and stored.status == "paused"


async def _account(db: Database, monitor_id: str) -> str:
    record = await db.run(monitors.get_monitor, None, monitor_id)
    assert record is not None
    return record.account_id


async def test_checks_of_a_deleted_monitor_are_dropped(db: Database) -> None:
    with trio.fail_after(10):
        assert await db.transaction(checks.write_check_batch, [one_check("mon_gone")], []) == 0


async def test_store_actor_batches_and_flushes_everything_on_close(db: Database) -> None:
    with trio.fail_after(20):
        monitor_id = await _monitor(db)
        async with trio.open_nursery() as nursery:
            writer = await nursery.start(run_store_writer, db)
            for i in range(1200):
                await writer.write(WriteCheck(check=one_check(monitor_id, created=i)))
            await writer.flush()
            assert writer.statistics.rows_written == 1200
            assert max(writer.statistics.batch_sizes) <= 500
            for i in range(300):
                await writer.write(WriteCheck(check=one_check(monitor_id, created=2000 + i)))
            await writer.aclose()
        count = await db.run(
            lambda conn: conn.fetchval(
                "SELECT count(*) FROM checks WHERE monitor_id = $1", monitor_id
            )
        )
        assert count == 1500
