"""A shard: one supervisor over the actors of every kind (``engine.kind``) whose
resources' bucket maps to it (:func:`shard_of`), of the buckets this node holds
(``buckets``: docs/several-nodes.md). Each incarnation asks each kind's runner to load its
records and start their actors; the shard's supervisor restarts a crashed actor with
back-off and its restart intensity, and past that the engine restarts the shard, which
loads again from the database (the source of truth). A polite close gives every actor
its graceful stop (their ``shutdown`` hooks).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import structlog
import trio

from store import leases

from .kind import EngineContext, Kind, Runner, ShardContext
from .supervisor import Supervisor, run_supervisor

__all__ = ["Shard", "shard_of", "shard_of_slot"]

log = structlog.get_logger("uptrio.engine")


@dataclass(slots=True)
class Shard:
    """One supervisor and the runners of every kind in it (module docstring)."""

    index: int
    name: str
    context: EngineContext
    kinds: tuple[Kind, ...]
    supervisor: Supervisor | None = None
    buckets: set[int] = field(default_factory=set)
    """The lease slots of this shard that this node holds (``store.leases.slot_of``:
    buckets of the any-region pool and of its region's; ``shard_of_slot`` maps them
    here)."""
    runners: dict[str, Runner] = field(default_factory=dict)
    """Each kind's runner, by the kind's id prefix."""

    def __post_init__(self) -> None:
        here = ShardContext(name=self.name, index=self.index, buckets=self._held)
        self.runners = {kind.prefix: kind.runner(here) for kind in self.kinds}

    def _held(self) -> list[int]:
        return sorted(self.buckets)

    async def run(self, *, task_status: trio.TaskStatus[Supervisor]) -> None:
        """One incarnation of the shard: a supervisor populated from the database."""
        settings = self.context.settings
        await run_supervisor(
            self.name,
            populate=self._populate,
            intensity=settings.monitor_intensity,
            backoff=settings.monitor_backoff,
            on_restart=self._on_restart,
            task_status=task_status,
        )

    def _on_restart(self, child_id: str, exc: Exception | None) -> None:
        restarts = self.context.stats.supervisor_restarts
        restarts[self.name] = restarts.get(self.name, 0) + 1
        log.warning("actor restarting", supervisor=self.name, child=child_id, error=repr(exc))

    async def _populate(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        for runner in self.runners.values():
            await runner.populate(supervisor)

    async def lose(self, lost: set[int], *, drain: bool = False) -> None:
        """Buckets this node no longer holds: every kind stops their actors (``drain``:
        buckets it gives back, still leased to it: a probe already sent finishes and is
        stored first)."""
        self.buckets -= lost
        for runner in self.runners.values():
            await runner.lose(lost, drain=drain)

    async def gain(self, gained: set[int], records: dict[str, list[object]]) -> None:
        """Buckets this node now holds, with each kind's records of them (by prefix, read
        once for every shard): each kind starts their actors. Between incarnations the
        next load reads them (``buckets`` already has them)."""
        self.buckets |= gained
        for prefix, runner in self.runners.items():
            await runner.gain(records.get(prefix, []))


def shard_of(resource_id: str, shard_count: int) -> int:
    """The shard of a resource of any kind: its bucket (``store.leases.bucket_of``, a
    stable hash of its id) modulo ``shard_count``."""
    return leases.bucket_of(resource_id) % shard_count


def shard_of_slot(slot: int, shard_count: int) -> int:
    """The shard of a lease slot (``store.leases.slot_of``): its bucket modulo
    ``shard_count``, so a monitor's actor runs in the same shard whichever pool it is
    leased in (:func:`shard_of`)."""
    return slot % leases.BUCKETS % shard_count
