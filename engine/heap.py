"""The garbage collector while the engine runs: a higher young-generation threshold, and
the heap frozen after the monitors change (bench/RESULTS.md says why)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import AsyncIterator, Iterator

import structlog

__all__ = ["freeze_heap", "unfrozen_on_exit", "young_gc_threshold"]

log = structlog.get_logger("uptrio.engine")


@contextlib.asynccontextmanager
async def young_gc_threshold(threshold: int | None) -> AsyncIterator[None]:
    """Raise the garbage collector's young-generation threshold to ``threshold`` tracked
    objects for the block (the older generations' thresholds unchanged), then restore it.

    Why: every monitor actor parks on a timer for a whole interval, so each check leaves
    objects that live ~10 s. With CPython's default (a young collection every 700 net
    allocations) they are collected while alive and promoted to the oldest generation,
    which then triggers a full collection every ~10 s over the whole heap: 1.5 s pauses
    at 10,000 monitors, and a third of the service's CPU (bench/RESULTS.md). Those objects
    are freed by reference counting, so allocations and frees balance and a young
    collection comes only with real growth or cyclic garbage.
    """
    if threshold is None:
        yield
        return
    previous = gc.get_threshold()
    gc.set_threshold(threshold, *previous[1:])
    try:
        yield
    finally:
        gc.set_threshold(*previous)


def freeze_heap() -> None:
    """Move every object the garbage collector tracks into its permanent generation
    (``gc.freeze``, constant time), so that no later collection walks them again.

    Why: the monitors' own objects (actors, records, timers) make up most of the heap and
    live as long as their monitors. When the heap grows by a quarter, CPython collects the
    oldest generation, walking all of it while the event loop stands still: 0.8 s at
    10,000 monitors, and every check due in that time is late by as much
    (bench/RESULTS.md). Frozen, they are still freed by reference counting when their
    monitor goes; only a reference cycle among objects alive at a freeze is never
    collected, which is why the engine freezes after the set of monitors changes (once
    after loading, then `EngineSettings.gc_freeze_delay_seconds` after a save) rather
    than on a clock.
    """
    gc.freeze()
    log.debug("heap frozen", frozen_objects=gc.get_freeze_count())


@contextlib.contextmanager
def unfrozen_on_exit(freezing: bool) -> Iterator[None]:
    """On exit, give the frozen objects back to the collector (``gc.unfreeze``, constant
    time): the engine's monitors are gone, and a restarted engine freezes again."""
    try:
        yield
    finally:
        if freezing:
            gc.unfreeze()
