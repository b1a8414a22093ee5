"""The escalation walker (``engine.run_escalations``; docs/alerts.md) on the real
Postgres: it writes a step's notifications once the step is due, and a database that
stops answering (the alerts table locked past the walker's deadline) is waited out, never
crashing the actor. The clock it reads is the test's (epoch seconds); each test has a
``trio.fail_after``."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

import trio

from engine import WalkerSettings, run_escalations
from store import Connection, Database
from tests.outbox import new_channel, new_policy
from tests.store.helpers import new_monitor, write_checks

T0 = 1_790_000_000
FAST = WalkerSettings(poll_seconds=0.05)


async def _notes(db: Database) -> list[Any]:
    return await db.run(lambda c: c.fetch("SELECT step, kind FROM notifications"))


async def _wait_for_notes(db: Database) -> list[Any]:
    while not (rows := await _notes(db)):
        await trio.sleep(0.05)
    return rows


async def test_the_walker_notifies_a_due_step_and_outlasts_a_database_that_hangs(
    db: Database,
) -> None:
    with trio.fail_after(30):
        monitor = await new_monitor(db, created=T0 - 100)
        channel = await new_channel(db, monitor.account_id, now=T0 - 100)
        await new_policy(
            db, monitor.account_id, [(60, [("channel", channel)])], default=True, now=T0 - 100
        )
        await write_checks(db, monitor.id, [T0 - 50], status="up", moved_from="pending")
        await write_checks(db, monitor.id, [T0], status="down", moved_from="up")
        now = [float(T0 + 30)]
        bounded = db.with_deadline(0.3)

        async def hold_lock() -> None:
            async def hold(connection: Connection) -> None:
                await connection.execute("LOCK TABLE alerts IN ACCESS EXCLUSIVE MODE")
                locked.set()
                while not release.is_set():
                    await asyncio.sleep(0.02)

            await db.transaction(hold)

        locked, release = _Flag(), _Flag()
        async with trio.open_nursery() as nursery:
            await nursery.start(partial(run_escalations, bounded, FAST, clock=lambda: now[0]))
            await trio.sleep(0.3)
            assert await _notes(db) == []  # step 0 waits 60 s
            nursery.start_soon(hold_lock)
            while not locked.is_set():
                await trio.sleep(0.02)
            now[0] = T0 + 61  # due, but every walk hangs past its deadline
            await trio.sleep(1.5)
            release.set()
            [note] = await _wait_for_notes(db)
            assert (note["step"], note["kind"]) == (0, "trigger")
            await trio.sleep(0.3)
            assert len(await _notes(db)) == 1  # once
            nursery.cancel_scope.cancel()


class _Flag:
    """A flag both event loops read (set once)."""

    def __init__(self) -> None:
        self.value = False

    def set(self) -> None:
        self.value = True

    def is_set(self) -> bool:
        return self.value
