"""Migration 0017 on a database written before it: heartbeats' status moves, logged in
``status_changes`` beside the monitors' until then, move to ``heartbeat_moves`` in their
order (the engine's moves with their ``hbm_`` id, a pause with none); the monitors' stay.
A batch retried across the migration still finds its move logged: it causes nothing
twice."""

from __future__ import annotations

from typing import Any

import asyncpg
import trio
import trio_asyncio

from store import HeartbeatChange, apply_migrations, pings

T0 = 1_790_000_000

_BEFORE = """
INSERT INTO accounts (id, name, created) VALUES ('acct_1', 'acme', {t0});
INSERT INTO heartbeats (id, account_id, name, period_seconds, grace_seconds, status,
                        ping_key, run_epoch, created, updated)
VALUES ('hbt_1', 'acct_1', 'nightly backup', 60, 30, 'down', repeat('a', 32), 1, {t0},
        {t0} + 300);
INSERT INTO status_changes (monitor_id, check_id, from_status, to_status, created)
VALUES ('hbt_1', 'hbm_up', 'pending', 'up', {t0} + 10),
       ('mon_1', 'chk_1', 'pending', 'up', {t0} + 20),
       ('hbt_1', NULL, 'up', 'paused', {t0} + 100),
       ('hbt_1', NULL, 'paused', 'pending', {t0} + 200),
       ('hbt_1', 'hbm_down', 'pending', 'down', {t0} + 300);
"""


async def test_0017_moves_heartbeats_moves_out_of_status_changes(
    empty_database_url: str,
) -> None:
    async def on_asyncio() -> tuple[list[Any], list[Any], list[Any]]:
        conn = await asyncpg.connect(empty_database_url)
        try:
            await apply_migrations(conn, up_to=16)
            await conn.execute(_BEFORE.format(t0=T0))
            assert await apply_migrations(conn, up_to=17) == ["0017_heartbeat_moves.sql"]
            # the engine's batch that logged the down, retried after the migration
            retried = HeartbeatChange(
                heartbeat_id="hbt_1",
                move_id="hbm_down",
                from_status="pending",
                to_status="down",
                run_epoch=1,
                created=T0 + 300,
                detail="No ping for 90 s",
            )
            async with conn.transaction():
                await pings.write_ping_batch(conn, [], [retried])
            return (
                list(await conn.fetch("SELECT * FROM status_changes ORDER BY seq")),
                list(await conn.fetch("SELECT * FROM heartbeat_moves ORDER BY seq")),
                list(await conn.fetch("SELECT type FROM events")),
            )
        finally:
            await conn.close()

    with trio.fail_after(30):
        monitors, heartbeats, events = await trio_asyncio.aio_as_trio(on_asyncio)()
    assert [(r["monitor_id"], r["check_id"]) for r in monitors] == [("mon_1", "chk_1")]
    assert [
        (r["heartbeat_id"], r["move_id"], r["from_status"], r["to_status"], r["created"] - T0)
        for r in heartbeats
    ] == [
        ("hbt_1", "hbm_up", "pending", "up", 10),
        ("hbt_1", None, "up", "paused", 100),
        ("hbt_1", None, "paused", "pending", 200),
        ("hbt_1", "hbm_down", "pending", "down", 300),
    ]
    assert events == []  # the retried move was logged already: nothing caused twice
