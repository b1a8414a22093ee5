"""The engine's graceful stop (docs/operations.md, Shutdown): :meth:`engine.Engine.stop`
lets a probe already sent finish and hands its check to the store; a probe still waiting for
a slot of the global limiter was never sent and never is; commands are answered meanwhile
but start nothing; a pause still stops its actor at once.

Real clock: the database and the loopback target (``tests.targets.HttpTarget``, slow
mode: it answers a while after the request arrives) are real I/O.
"""

from __future__ import annotations

import time
from dataclasses import replace
from functools import partial

import trio

from engine import EngineSettings, Prober, run_engine
from store import (
    Connection,
    Database,
    MonitorRecord,
    StoreSettings,
    run_store_writer,
)
from tests.store.helpers import new_monitor
from tests.targets import HttpTarget

SLOW_SECONDS = 0.5


async def _monitor(db: Database, url: str) -> MonitorRecord:
    """A monitor stored paused (so the engine does not load it), as a pending record."""
    record = await new_monitor(
        db,
        created=int(time.time()),
        url=url,
        type="http",
        status="paused",
        timeout_seconds=10,
        failure_threshold=2,
    )
    return replace(record, status="pending")


async def _stored(connection: Connection, monitor_id: str) -> list[tuple[str, float]]:
    rows = await connection.fetch(
        "SELECT status, response_time_ms FROM checks WHERE monitor_id = $1", monitor_id
    )
    return [(row["status"], row["response_time_ms"]) for row in rows]


async def test_stop_finishes_the_probe_sent_and_never_sends_the_one_waiting(
    db: Database, nursery: trio.Nursery
) -> None:
    with trio.fail_after(20):
        target = HttpTarget(mode="slow", slow_seconds=SLOW_SECONDS)
        await nursery.start(target.run)
        first = await _monitor(db, target.url("/first"))
        second = await _monitor(db, target.url("/second"))
        third = await _monitor(db, target.url("/third"))
        settings = EngineSettings(shard_count=1, max_probes_in_flight=1)
        async with trio.open_nursery() as writers:
            writer = await writers.start(
                partial(run_store_writer, db, StoreSettings(batch_age_seconds=0.05))
            )
            async with trio.open_nursery() as engines:
                engine = await engines.start(run_engine, db, writer, Prober(), settings)
                await engine.apply(first.id, first)  # checked at once: takes the only slot
                await engine.apply(second.id, second)  # checked at once: waits for the slot
                limiter = engine.kind("mon").deps.limiter
                while not target.requests or limiter.statistics().tasks_waiting != 1:
                    await trio.sleep(0.005)
                began = trio.current_time()
                engine.stop()
                # commands are still answered while the tree drains; none starts a probe
                await engine.apply(third.id, third)
                answered_seconds = trio.current_time() - began
            stop_seconds = trio.current_time() - began  # run_engine returned
            await writer.aclose()
        assert [r.path for r in target.requests] == ["/first"]
        assert engine.statistics.checks == 1
        (check,) = await db.run(_stored, first.id)
        assert check[0] == "up" and check[1] >= SLOW_SECONDS * 1000 * 0.9, check
        assert await db.run(_stored, second.id) == []
        assert stop_seconds < SLOW_SECONDS + 5, stop_seconds
        assert answered_seconds < SLOW_SECONDS, answered_seconds


async def test_a_pause_does_not_wait_for_the_probe_in_flight(
    db: Database, nursery: trio.Nursery
) -> None:
    with trio.fail_after(20):
        target = HttpTarget(mode="slow", slow_seconds=10)
        await nursery.start(target.run)
        record = await _monitor(db, target.url("/"))
        async with trio.open_nursery() as writers:
            writer = await writers.start(run_store_writer, db)
            async with trio.open_nursery() as engines:
                engine = await engines.start(
                    run_engine, db, writer, Prober(), EngineSettings(shard_count=1)
                )
                await engine.apply(record.id, record)
                while not target.requests:
                    await trio.sleep(0.005)
                began = trio.current_time()
                await engine.apply(record.id, replace(record, status="paused"))
                pause_seconds = trio.current_time() - began
                engines.cancel_scope.cancel()
            await writer.aclose()
        assert pause_seconds < 5, pause_seconds  # the target answers after 10 s
        assert await db.run(_stored, record.id) == []
