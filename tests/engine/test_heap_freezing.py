"""The engine freezes the heap once its monitors are loaded and again a while after a
monitor is saved, and gives the frozen objects back to the collector when it stops
(`engine.heap.freeze_heap`; bench/RESULTS.md says why).

Whether an object is frozen is read from the collector itself: ``gc.get_objects()``
lists the objects of the three generations, not those of the permanent one.
"""

from __future__ import annotations

import gc
from functools import partial

import trio

from engine import EngineSettings, Prober, run_engine
from store import Database, StoreSettings, monitors, run_check_writer
from tests.engine.test_engine_supervision import add_monitor


def frozen(value: object) -> bool:
    """Whether ``value`` (a tracked object) is in the collector's permanent generation."""
    assert gc.is_tracked(value)
    return not any(candidate is value for candidate in gc.get_objects())


async def test_the_engine_freezes_after_loading_and_after_a_save_then_unfreezes(
    db: Database,
) -> None:
    with trio.fail_after(20):
        monitor_id = await add_monitor(db, "http://127.0.0.1:9/refused")
        settings = EngineSettings(shard_count=1, gc_freeze_delay_seconds=0.5)
        before_start: list[object] = []
        async with trio.open_nursery() as nursery:
            writer = await nursery.start(
                partial(run_check_writer, db, StoreSettings(batch_age_seconds=0.05))
            )
            engine = await nursery.start(run_engine, db, writer, Prober(), settings)
            assert frozen(before_start)  # frozen once the monitors are loaded

            after_start: list[object] = []
            record = await db.run(monitors.get_monitor, None, monitor_id)
            assert record is not None
            await engine.monitor_saved(record)
            await trio.sleep(0.25)
            assert not frozen(after_start)  # not yet: half the delay
            await trio.sleep(0.5)
            assert frozen(after_start)  # the delay after the save has passed

            nursery.cancel_scope.cancel()
        assert not frozen(before_start) and not frozen(after_start)  # unfrozen on exit


async def test_no_freezing_when_switched_off(db: Database) -> None:
    with trio.fail_after(20):
        await add_monitor(db, "http://127.0.0.1:9/refused")
        settings = EngineSettings(shard_count=1, gc_freeze_delay_seconds=None)
        before_start: list[object] = []
        async with trio.open_nursery() as nursery:
            writer = await nursery.start(run_check_writer, db)
            await nursery.start(run_engine, db, writer, Prober(), settings)
            assert not frozen(before_start)
            nursery.cancel_scope.cancel()
