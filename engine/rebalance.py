"""The engine following the buckets this node holds (docs/several-nodes.md): :func:`follow`
turns each change of the lease actor's :class:`~engine.leases.Holding` into a
:class:`Rebalance` for the engine's command actor, which calls :func:`rebalance` (serialised
with the changes applied) and then tells the holding it applied that version (the lease
actor waits for it before handing buckets over)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial

from .kind import Kind
from .leases import Holding
from .loading import load_when_available
from .shard import Shard, shard_of, shard_of_slot

__all__ = ["Rebalance", "follow", "rebalance"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Rebalance:
    """The buckets this node holds changed (the lease actor's :class:`Holding`): stop
    the actors of the lost ones, load and start those of the gained ones."""

    held: dict[int, int]
    """Bucket to lease epoch: a bucket whose epoch changed was lost and claimed again
    (its actors restart, so their results carry the new epoch)."""
    version: int = 0
    """The :attr:`Holding.version` it comes from."""
    releasing: frozenset[int] = frozenset()
    """Buckets being given back: their actors drain (a probe already sent finishes and is
    stored) rather than being cancelled."""


async def follow(
    holding: Holding, seen: dict[int, int], tell: Callable[[Rebalance], Awaitable[None]]
) -> None:
    """Tell the command actor (``tell``: its inbox) a :class:`Rebalance` each time the
    buckets held (or their epochs) change."""
    while True:
        held, version = dict(holding.held), holding.version
        if held != seen:
            await tell(Rebalance(held=held, version=version, releasing=holding.releasing))
            seen = held
        else:
            holding.mark_applied(version)
        await holding.wait_changed()


async def rebalance(
    kinds: Sequence[Kind],
    shards: list[Shard],
    epochs: dict[int, int],
    held: dict[int, int],
    stopping: bool,
    releasing: frozenset[int] = frozenset(),
) -> None:
    """Stop the actors of buckets no longer held at the epoch they run under (updating
    ``epochs``; those of ``releasing`` drain, the others are cancelled: another node may
    run them already); read each kind's records of the gained ones (one query a kind,
    docs/several-nodes.md) and start them in their shards (none once the engine is stopping),
    each catching up what the hand-over missed (``engine.kinds``)."""
    count = len(shards)
    lost = {b for b, epoch in epochs.items() if held.get(b) != epoch}
    gained = {b for b, epoch in held.items() if epochs.get(b) != epoch}
    epochs.clear()
    epochs.update(held)
    for shard in shards:
        if mine := {b for b in lost if shard_of_slot(b, count) == shard.index}:
            await shard.lose(mine, drain=bool(mine & releasing))
    if not gained or stopping:
        return
    ordered = sorted(gained)
    loaded = {
        kind.prefix: await load_when_available(partial(kind.load, ordered), "engine")
        for kind in kinds
    }
    for shard in shards:
        if mine := {b for b in gained if shard_of_slot(b, count) == shard.index}:
            records = {
                prefix: [r for r in found if shard_of(r.id, count) == shard.index]
                for prefix, found in loaded.items()
            }
            await shard.gain(mine, records)
