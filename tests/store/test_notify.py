"""Changes told to every node through Postgres ``NOTIFY`` (``store.notify``;
docs/several-nodes.md, Changes made through another node): a committed change is told, a
rolled back one is not; a ping stored by a node that does not run the heartbeat is told with
its kind and time; a listening connection that the server ends is noticed."""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio

from store import Database, DatabaseUnavailable, PingRecord, heartbeats, monitors, new_id, notify
from tests.store.helpers import new_heartbeat, new_monitor


async def _next(listener: notify.Listener) -> list[str]:
    with trio.fail_after(5):
        return await listener.receive()


async def test_committed_changes_are_told_and_rolled_back_ones_are_not(db: Database) -> None:
    async with notify.open_listener(db.url, deadline_seconds=5) as listener:
        monitor = await new_monitor(db, created=int(time.time()))
        assert await _next(listener) == [monitor.id]

        class Refused(Exception):
            pass

        async def pause_then_fail(connection: Any) -> None:
            await monitors.pause_monitor(connection, monitor.account_id, monitor.id, 1)
            raise Refused

        with pytest.raises(Refused):
            await db.transaction(pause_then_fail)
        await db.transaction(monitors.pause_monitor, monitor.account_id, monitor.id, 2)
        assert await _next(listener) == [monitor.id]  # the pause that committed, once
        await listener.check(5)
        assert notify.parse_notification(monitor.id) == notify.Notification(monitor.id)


async def test_a_ping_stored_elsewhere_is_told_to_the_owner(db: Database) -> None:
    beat = await new_heartbeat(db, created=int(time.time()))
    found = await db.run(heartbeats.heartbeat_of_ping_key, beat.ping_key)
    assert found == beat.id
    assert await db.run(heartbeats.heartbeat_of_ping_key, "0" * 32) is None
    async with notify.open_listener(db.url, deadline_seconds=5) as listener:
        wall = time.time()
        ping = PingRecord(
            id=new_id("png"),
            heartbeat_id=beat.id,
            kind="success",
            created=int(wall),
            duration_ms=None,
            source_ip="127.0.0.1",
        )
        assert await db.transaction(notify.store_ping_elsewhere, ping, wall)
        [payload] = await _next(listener)
        told = notify.parse_notification(payload)
        assert told is not None and (told.resource_id, told.kind) == (beat.id, "success")
        assert abs(told.wall - wall) < 0.001
        stored = await db.run(heartbeats.get_heartbeat, beat.account_id, beat.id)
        assert stored is not None and stored.last_success_at == int(wall)
        assert stored.status == "pending"  # the owner's actor decides the move
        await db.transaction(heartbeats.delete_heartbeat, beat.account_id, beat.id, 3)
        assert await _next(listener) == [beat.id]
        assert not await db.transaction(notify.store_ping_elsewhere, ping, wall)
    assert notify.parse_notification("leases a:8080") == notify.Notification("", leases_of="a:8080")
    assert notify.parse_notification("hbt_x success nan") is None


async def test_a_listening_connection_ended_by_the_server_is_noticed(db: Database) -> None:
    async with notify.open_listener(db.url, deadline_seconds=5) as listener:

        async def end_listeners(connection: Any) -> int:
            return int(
                await connection.fetchval(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE application_name = 'uptrio-listener' AND datname = current_database() "
                    "AND pid <> pg_backend_pid()"
                )
            )

        assert await db.run(end_listeners) >= 1
        with trio.fail_after(5), pytest.raises(DatabaseUnavailable):
            while True:
                await listener.check(1)
                await trio.sleep(0.05)
