"""The engine freezes the heap once its monitors are loaded and then, on a clock, collects
the young generation and freezes what survived; it gives the frozen objects back to the
collector when it stops (`engine.heap.keep_heap_frozen`; bench/RESULTS.md, Why freeze the
heap, says why).

Whether an object is frozen is read from the collector itself: ``gc.get_objects()``
lists the objects of the three generations, not those of the permanent one.
"""

from __future__ import annotations

import gc
import weakref
from functools import partial

import trio

from engine import EngineSettings, Prober, run_engine
from store import Database, StoreSettings, run_store_writer
from tests.engine.test_engine_supervision import add_monitor


def frozen(value: object) -> bool:
    """Whether ``value`` (a tracked object) is in the collector's permanent generation."""
    assert gc.is_tracked(value)
    return not any(candidate is value for candidate in gc.get_objects())


class _Node:
    """An object that can be part of a reference cycle and be watched by a weak ref."""

    def __init__(self) -> None:
        self.other: object = None


async def test_the_engine_freezes_on_a_clock_collects_first_then_unfreezes(
    db: Database,
) -> None:
    with trio.fail_after(20):
        await add_monitor(db, "http://127.0.0.1:9/refused")
        settings = EngineSettings(shard_count=1, gc_freeze_every_seconds=0.2)
        before_start: list[object] = []
        async with trio.open_nursery() as nursery:
            writer = await nursery.start(
                partial(run_store_writer, db, StoreSettings(batch_age_seconds=0.05))
            )
            await nursery.start(run_engine, db, writer, Prober(), settings)
            assert frozen(before_start)  # frozen once the monitors are loaded

            after_start: list[object] = []
            cycle = _Node()
            cycle.other = cycle
            dead = weakref.ref(cycle)
            del cycle  # cyclic garbage: only a collection frees it
            await trio.sleep(0.5)  # two ticks or more
            assert frozen(after_start)
            assert dead() is None  # collected before the freeze, not frozen with the rest

            nursery.cancel_scope.cancel()
        assert not frozen(before_start) and not frozen(after_start)  # unfrozen on exit


async def test_no_freezing_when_switched_off(db: Database) -> None:
    with trio.fail_after(20):
        await add_monitor(db, "http://127.0.0.1:9/refused")
        settings = EngineSettings(shard_count=1, gc_freeze_every_seconds=None)
        before_start: list[object] = []
        async with trio.open_nursery() as nursery:
            writer = await nursery.start(run_store_writer, db)
            await nursery.start(run_engine, db, writer, Prober(), settings)
            await trio.sleep(0.3)
            assert not frozen(before_start)
            nursery.cancel_scope.cancel()
