"""Heartbeat actors carry their bucket's lease epoch (docs/several-nodes.md, Heartbeat
fencing): a heartbeat group started with the lease actor's ``epoch_of`` gives every actor it
starts the epoch of its bucket, every move the actor hands to the store carries it (the
store refuses it once another node holds the bucket: tests/store/test_fencing.py), and an
update of the same run keeps it. The store actor's inbox is a memory channel read by the
test; the heartbeat is loaded from the real database.
"""

from __future__ import annotations

from dataclasses import replace

import trio

from engine.heartbeat_group import HeartbeatGroup
from store import Database, StoreWriter, WritePing, WriterStatistics
from tests.store.helpers import new_heartbeat


async def test_moves_carry_the_lease_epoch_the_actor_started_under(
    db: Database, nursery: trio.Nursery
) -> None:
    with trio.fail_after(10):
        beat = await new_heartbeat(db, created=1_790_000_000)
        send, store = trio.open_memory_channel[object](100)
        group = HeartbeatGroup(
            name="shard-0/heartbeats",
            buckets=lambda: list(range(256)),
            db=db,
            writer=StoreWriter(send, WriterStatistics()),
            keys={},
            inbox_size=16,
            ping_timeout_seconds=5.0,
            lease_epoch=lambda heartbeat_id: 7 if heartbeat_id == beat.id else None,
        )
        await nursery.start(group.run)
        handle = group.keys[beat.ping_key]
        assert handle.config.lease_epoch == 7
        assert await handle.ping("success", "127.0.0.1")
        handed = await store.receive()
        assert isinstance(handed, WritePing) and handed.change is not None
        assert (handed.change.to_status, handed.change.lease_epoch) == ("up", 7)

        group.save(replace(beat, period_seconds=120))  # same run: retuned, same epoch
        assert group.keys[beat.ping_key].config.lease_epoch == 7
        assert await handle.ping("fail", "127.0.0.1")
        handed = await store.receive()
        assert isinstance(handed, WritePing) and handed.change is not None
        assert (handed.change.to_status, handed.change.lease_epoch) == ("down", 7)
        group.request_close()
