"""The listener actor (``engine.listener``; docs/several-nodes.md, Changes made through
another node): changes committed by another node reach this engine's actors through
``NOTIFY`` in well under the reconciliation's period (set to a minute here, so only the
listener can explain what happens); after its connection is ended it reconnects and
reconciles what it missed; a ping stored by another node moves the heartbeat, and a stored
success whose notification was lost is caught up by the reconciliation.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

import trio

from engine import EngineHandle, EngineSettings, Holding, ListenerSettings, run_engine, run_listener
from store import Database, PingRecord, StoreWriter, heartbeats, monitors, new_id, notify, pings
from tests.ops.helpers import NewMonitor, RecordingProber, insert_monitors
from tests.store.helpers import new_heartbeat, new_monitor

_SOON = 1.0
"""How soon a notified change must be in effect, seconds."""


async def _until(condition: Callable[[], bool], seconds: float = _SOON) -> None:
    with trio.fail_after(seconds):
        while not condition():
            await trio.sleep(0.02)


async def _start(db: Database, writer: StoreWriter, nursery: trio.Nursery) -> EngineHandle:
    slot = EngineHandle()
    settings = EngineSettings(shard_count=2, reconcile_seconds=60.0)
    engine = partial(run_engine, db, writer, RecordingProber(), settings)
    await nursery.start(partial(slot.run, partial(engine, holding=Holding.everything())))
    listening = ListenerSettings(deadline_seconds=2.0, keepalive_seconds=0.2)
    await nursery.start(run_listener, db, slot, Holding.everything(), "me", listening)
    await trio.sleep(0.3)  # connected and listening
    return slot


def _running(slot: EngineHandle) -> int:
    assert slot.current is not None
    return slot.current.running()


async def _end_listeners(connection: Any) -> int:
    return int(
        await connection.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = 'uptrio-listener' AND datname = current_database() "
            "AND pid <> pg_backend_pid()"
        )
    )


async def test_changes_of_another_node_reach_the_actors_and_a_reconnection_reconciles(
    db: Database, writer: StoreWriter, nursery: trio.Nursery
) -> None:
    slot = await _start(db, writer, nursery)
    assert _running(slot) == 0
    monitor = await new_monitor(db, created=int(time.time()), interval_seconds=1)
    await _until(lambda: _running(slot) == 1)
    await db.transaction(monitors.pause_monitor, monitor.account_id, monitor.id, 1)
    await _until(lambda: _running(slot) == 0)
    assert await db.run(_end_listeners) == 1
    # written behind its back: no NOTIFY (inserted as rows), and the listener is down
    await db.transaction(insert_monitors, monitor.account_id, [NewMonitor(url="127.0.0.1:1")])
    await _until(lambda: _running(slot) == 1, 3.0)  # reconnected (0.5 s), reconciled


async def test_pings_stored_elsewhere_move_the_heartbeat_and_a_lost_one_is_caught_up(
    db: Database, writer: StoreWriter, nursery: trio.Nursery
) -> None:
    slot = await _start(db, writer, nursery)
    told = await new_heartbeat(db, created=int(time.time()))
    silent = await new_heartbeat(db, created=int(time.time()))
    assert slot.current is not None

    async def status(heartbeat_id: str) -> str:
        record = await db.run(heartbeats.get_heartbeat, None, heartbeat_id)
        assert record is not None
        return record.status

    with trio.fail_after(5):
        while await slot.ping(silent.ping_key) is None:
            await trio.sleep(0.02)
        wall = time.time()
        ping = _ping(told.id, wall)
        assert await db.transaction(notify.store_ping_elsewhere, ping, wall)
        while await status(told.id) != "up":
            await trio.sleep(0.05)
        # a success stored with no notification (as if it was lost): the next
        # reconciliation tells the actor
        await db.transaction(pings.write_ping_batch, [_ping(silent.id, wall)], [])
        await trio.sleep(0.3)
        assert await status(silent.id) == "pending"
        slot.reconcile_now()
        while await status(silent.id) != "up":
            await trio.sleep(0.05)


def _ping(heartbeat_id: str, wall: float) -> PingRecord:
    return PingRecord(
        id=new_id("png"),
        heartbeat_id=heartbeat_id,
        kind="success",
        created=int(wall),
        duration_ms=None,
        source_ip=None,
    )
