"""The garbage collector while the engine runs: a higher young-generation threshold, and
the survivors of young collections frozen on a clock (bench/RESULTS.md says why)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import AsyncIterator, Iterator

import trio

__all__ = ["freeze_heap", "keep_heap_frozen", "unfrozen_on_exit", "young_gc_threshold"]


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
    """Collect the young generation (cyclic garbage allocated since the last collection),
    then move every object the collector tracks into its permanent generation
    (``gc.freeze``), so that no later collection walks them again. Costs about 0.3 ms per
    1,000 objects allocated since the last call and still alive (the young collection;
    the freeze itself takes constant time).
    """
    gc.collect(0)
    gc.freeze()


async def keep_heap_frozen(every_seconds: float) -> None:
    """Call `freeze_heap` every ``every_seconds`` seconds until cancelled (the engine's
    task; `EngineSettings.gc_freeze_every_seconds`).

    Why (bench/RESULTS.md, Several nodes; docs/design-notes.md): each check frees the
    objects its monitor kept since the previous check and allocates as many, so CPython's
    count of allocations minus frees, which triggers a young collection, barely moves, while
    the young generation grows to every object allocated since the last collection: at
    20,000 monitors a young collection walked 80,000 to 450,000 objects (30 to 275 ms), and
    the older generations then walked them again (0.5 to 0.9 s pauses). Collected and frozen
    on a clock, the young generation holds a fraction of a second of allocations, and the
    older ones stay empty. The shorter the period, the shorter each pause for the same
    total: at 20,000 monitors 13 ms every 0.25 s, 2.2 ms every 0.05 s (the default).

    The cost: a reference cycle still alive at one of these moments is never collected
    while the engine runs (objects without a cycle are still freed by reference
    counting); `unfrozen_on_exit` gives them back when the engine stops.
    """
    while True:
        await trio.sleep(every_seconds)
        freeze_heap()


@contextlib.contextmanager
def unfrozen_on_exit(freezing: bool) -> Iterator[None]:
    """On exit, give the frozen objects back to the collector (``gc.unfreeze``, constant
    time): the engine's monitors are gone, and a restarted engine freezes again."""
    try:
        yield
    finally:
        if freezing:
            gc.unfreeze()
