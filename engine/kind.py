"""What the engine runs, as plug-ins: a :class:`Kind` of watched thing (monitors,
heartbeats, …) and its :class:`Runner`, the kind's actors in one shard
(``docs/architecture.md``, "Kinds").

The engine's machinery (shards, the command actor, rebalancing, the listener, the
reconciliation) knows kinds only through these two protocols; each kind lives in a
module of its own under ``engine/kinds/`` and is registered there with one line. A
resource's kind is told by its id's prefix (``mon_``, ``hbt_``: :func:`store.has_prefix`).

The one verb: every change reaches a runner as a desired state, ``apply(resource_id,
record)`` (``record`` None: nothing to run, deleted or gone), whoever made it (an API
request, another node's change heard by the listener, the reconciliation); the runner
decides what it means by comparing it with what runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from store import Database, StoreWriter

from .leases import Holding
from .monitor import EngineStatistics
from .observer import CheckObserver
from .probes import Prober
from .settings import EngineSettings
from .supervisor import Supervisor

__all__ = ["Apply", "EngineContext", "Kind", "Runner", "ShardContext"]

Apply = Callable[[str, Any], Awaitable[None]]
"""``apply(resource_id, record or None)``: the engine's one verb (module docstring)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineContext:
    """What every kind of one engine incarnation shares: the database, the store's
    writer, the prober, the engine's settings and statistics, the observer (metrics) if
    any, ``holding``: the buckets this node holds (``engine.leases``), and
    ``stopping``."""

    db: Database
    writer: StoreWriter
    prober: Prober
    settings: EngineSettings
    stats: EngineStatistics
    observer: CheckObserver | None
    holding: Holding
    stopping: trio.Event
    """Set once the engine stops gracefully: changes still apply, but no actor starts
    (the next load from the database starts it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardContext:
    """One shard as its runners see it: its name and index, and ``buckets()``, the
    buckets of this shard this node holds now (docs/several-nodes.md)."""

    name: str
    index: int
    buckets: Callable[[], list[int]]


class Runner(Protocol):
    """One kind's actors in one shard. Called from the engine's command actor and the
    shard's incarnation only (one at a time)."""

    async def populate(self, supervisor: Supervisor) -> None:
        """A new incarnation of the shard, under ``supervisor``: load this kind's records
        of the shard's buckets and start their actors (waiting out a database outage).
        A change applied while it loads wins over what the load read."""

    async def apply(self, resource_id: str, record: Any) -> None:
        """Desired state of ``resource_id`` (``record`` None: nothing to run): start,
        reconfigure or stop its actor so that what runs matches. Returns once in effect
        (no check starts after a pause's response)."""

    async def lose(self, buckets: set[int], *, drain: bool) -> None:
        """Stop the actors of ``buckets`` (this node no longer holds them; ``drain``: it
        gives them back, so a probe already sent finishes and is stored first)."""

    async def gain(self, records: Sequence[Any]) -> None:
        """Start the actors of ``records``, this kind's records of buckets this node just
        took (read once for every shard)."""


class Kind(Protocol):
    """A kind of watched thing (module docstring), made once per engine incarnation from
    its :class:`EngineContext`."""

    prefix: str
    """Its ids' prefix (``mon``, ``hbt``)."""

    def runner(self, shard: ShardContext) -> Runner:
        """This kind's runner for one shard."""

    async def load(
        self,
        buckets: Sequence[int] | None,
        ids: Sequence[str] | None = None,
        *,
        db: Database | None = None,
    ) -> list[Any]:
        """The records an actor runs or keeps, of ``buckets`` (every bucket when None),
        or only those of ``ids`` (one query), read through ``db`` (the engine's when
        None: a caller with a deadline of its own passes its view of the pool).

        Raises:
            store.DatabaseUnavailable: the database did not answer.
        """

    async def reconcile(self, runners: Sequence[Runner], held: Sequence[int], apply: Apply) -> None:
        """Compare what ``runners`` run for buckets ``held`` with the database and
        ``apply`` the desired state of whatever differs (``engine.reconcile``).

        Raises:
            store.DatabaseUnavailable: the database did not answer (the comparison is
                skipped; the next one comes).
        """

    def heard(self, runners: Sequence[Runner], resource_id: str, detail: str, wall: float) -> None:
        """Another node stored an event ``detail`` of ``resource_id`` at ``wall`` (epoch
        seconds) and notified it (``store.notify``: a heartbeat's ping): tell the actor,
        if it runs here, without waiting. Most kinds ignore it."""
