"""Reconciliation (docs/several-nodes.md, "A lost notification
delays, never loses"): the fallback by which a change made through another node, whose
notification was lost, reaches the actors of this one.

Every ``reconcile_seconds`` (5 s by default) the engine's command actor asks each kind
(``engine.kind``) to compare its resources of the buckets this node holds with what its
runners run, and to apply, through the engine's one verb, the desired state of whatever
differs. How a kind compares is its own (monitors per bucket by settings digests first;
heartbeats whole). A change made through this node was applied at once already, so
there is nothing left to do for it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TypeVar

import structlog
import trio

from store import DatabaseUnavailable

from .actor import ActorRef
from .kind import Apply, Kind
from .shard import Shard

__all__ = ["reconcile", "tick"]

log = structlog.get_logger("uptrio.engine")

M = TypeVar("M")


async def tick(ref: ActorRef[M], message: M, every_seconds: float) -> None:
    """Tell ``ref`` ``message`` every ``every_seconds`` until cancelled (a full inbox
    skips a tick: the next one comes)."""
    while True:
        await trio.sleep(every_seconds)
        with contextlib.suppress(trio.WouldBlock):
            ref.tell_nowait(message)


async def reconcile(
    kinds: Sequence[Kind], shards: list[Shard], epochs: dict[int, int], apply: Apply
) -> None:
    """One comparison (module docstring) of the buckets in ``epochs``; a kind whose
    database read fails is skipped (the next comparison comes)."""
    held = sorted(epochs)
    if not held:
        return
    for kind in kinds:
        runners = [shard.runners[kind.prefix] for shard in shards]
        try:
            await kind.reconcile(runners, held, apply)
        except DatabaseUnavailable as exc:
            log.warning("reconciliation skipped", kind=kind.prefix, error=str(exc))
