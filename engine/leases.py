"""The lease actor: this node's share of the buckets (docs/several-nodes.md), and
:class:`Holding`, what it holds as the engine and ``/metrics`` see it.

A child of the root supervisor (``web.service``), started before the engine: it
registers the node (``store.leases.register_node``), renews every third of the lease
(``store.leases.renew_leases``: extend, claim up to the fair share) and publishes each
round in the :class:`Holding` the engine follows (it starts the actors of gained buckets
and stops those of lost ones). Every renewal has a deadline (the lease itself); a nudge
(:meth:`Holding.nudge`: another node registered or gave buckets back, told through
``store.notify``) makes it renew at once.

**Giving back** what is above the fair share is a hand-over, in three steps, so that no
grid point is probed by neither node nor by both: the buckets leave the published
holding (the engine drains their actors: a probe already sent finishes and its check goes
to the store), the store flushes, and only then are the leases given back
(``store.leases.release_buckets``, at the epochs held) and the others told. The node that
claims them starts their actors from the stored checks (``engine.shard``): a grid point
missed in the hand-over is probed at once.

**May this node probe?** (:meth:`Holding.may_probe`, asked by every actor before each
probe). A lease is known held until ``lease_seconds`` after the renewal that extended it
*started*, on this process's monotonic clock (trio's), so no database clock is needed. A
node paused past that (SIGSTOP, a frozen VM) wakes with its actors overdue: they probe
nothing until the lease actor has renewed and learned which buckets it still holds. Past
that, while the database is unreachable (a renewal started within the last one and a half
``lease_seconds``, while the node was still entitled to probe, failed or is still waiting),
the node keeps probing: in an outage of the database no other node can claim its buckets,
and what it buffers is stored once the database is back (its own lapsed leases take their
rows: ``store.fencing``). If the database was unreachable from this node only, another node
may have claimed them meanwhile: both probe until this node renews, and the fence refuses
its rows, counted as dropped. On a graceful stop (``request_stop``, after the engine stopped
and the store flushed) it gives every bucket back at once.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog
import trio

from store import Database, DatabaseUnavailable, StoreError, leases

__all__ = ["Holding", "LeaseSettings", "run_leases"]

log = structlog.get_logger("uptrio.leases")


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseSettings:
    """``uptrio serve --node-name --lease-seconds --region``.

    Attributes:
        node_name: this node's name (default host:port, set by ``web.flags``).
        region: this node's region (``a-z 0-9 -``, at most 32 characters; default
            ``default``): it holds leases in the any-region pool and in this region's
            (docs/several-nodes.md, Regions).
        lease_seconds: how long a lease lasts unrenewed, seconds (default 10); renewed
            every third of it.
    """

    node_name: str
    lease_seconds: float = 10.0
    region: str = "default"


class Holding:
    """The leases this node holds (slot to lease epoch: ``store.leases.slot_of``, the
    any-region pool's buckets and its region's), shared by the lease actor (writer) and
    the engine and metrics (readers); outlives their incarnations.

    Without a lease actor (``Holding.everything()``: tests and embedders running one
    engine alone) every slot is held at epoch 0 and ``ready`` at once.
    """

    def __init__(self, region: str = "default") -> None:
        self.region = region
        """This node's region (``LeaseSettings.region``)."""
        self.held: dict[int, int] = {}
        self.releasing: frozenset[int] = frozenset()
        """Buckets being given back (published as no longer held, leases not yet given
        back): their actors drain instead of being cancelled."""
        self.version = 0
        """Counts the changes :meth:`publish` made (the engine acknowledges them)."""
        self.applied = 0
        """The latest :attr:`version` the engine applied (:meth:`mark_applied`)."""
        self.share = 0
        self.live_nodes = 0
        self.ready = False
        self.lease_seconds = math.inf
        """How long a lease lasts unrenewed, seconds (set by the lease actor)."""
        self.last_renewal: float | None = None
        """``trio.current_time()`` of the start of the latest successful renewal, or None."""
        self.attempt_started: float | None = None
        """``trio.current_time()`` of the start of the latest renewal attempt, or None."""
        self.attempt_failed = False
        """Whether the latest renewal attempt failed (database unavailable) or has not
        answered yet."""
        self.attempt_entitled = False
        """Whether this node might probe when the latest attempt started
        (:meth:`may_probe`'s clock rule then): only such an attempt failing, or waiting,
        says "the database is unreachable" rather than "this node was paused"."""
        self.fenced = True
        """Whether results carry lease epochs (False for :meth:`everything`)."""
        self._changed = trio.Event()
        self._applied = trio.Event()
        self._nudged = trio.Event()

    @classmethod
    def everything(cls, region: str = "default") -> Holding:
        """Every bucket of both pools, ready: a lone engine with no lease actor, in
        ``region`` (the engine's: it runs the monitors listing that region)."""
        holding = cls(region)
        holding.held = dict.fromkeys(range(2 * leases.BUCKETS), 0)
        holding.share, holding.live_nodes, holding.ready = leases.BUCKETS, 1, True
        holding.fenced = False
        return holding

    def epoch_of(self, resource_id: str) -> int | None:
        """The lease epoch of ``resource_id``'s bucket in the any-region pool now (the
        fence its actor's results carry): -1 when the bucket is not held (every write
        refused), None when not fenced."""
        if not self.fenced:
            return None
        return self.held.get(leases.bucket_of(resource_id), -1)

    def slot_of(self, resource_id: str, regions: list[str] | None) -> int | None:
        """The lease slot (``store.leases.slot_of``) under which this node runs a monitor
        ``resource_id`` of ``regions``: its bucket in the any-region pool when
        ``regions`` is None, in this node's region's pool when ``regions`` lists it; None
        when it does not (another region's nodes run it; docs/several-nodes.md,
        Regions)."""
        if regions is not None and self.region not in regions:
            return None
        return leases.slot_of(leases.bucket_of(resource_id), regions is not None)

    def may_probe(self, bucket: int, epoch: int | None, now: float) -> bool:
        """Whether this node may probe a monitor of ``bucket`` whose actor runs under lease
        epoch ``epoch`` at ``now`` (``trio.current_time()``, seconds): the bucket is held
        at that epoch (not lost, nor being given back), and its lease is known unexpired
        on the monotonic clock, or the database is unreachable and the lease actor keeps
        trying (the module docstring). Always True without a lease actor."""
        if not self.fenced:
            return True
        return self.held.get(bucket) == epoch and self.entitled(now)

    def entitled(self, now: float) -> bool:
        """:meth:`may_probe`'s clock rule at ``now`` (``trio.current_time()``, seconds):
        within a lease of the start of the latest successful renewal, or within one and a
        half leases of the start of a renewal attempt that failed or still waits and that
        started while entitled (attempts come a third of a lease after the previous one
        ends, each waiting a lease at most: a chain of them keeps the node entitled while
        the database stays unreachable; a pause breaks it)."""
        lease = self.lease_seconds
        if self.last_renewal is not None and now < self.last_renewal + lease:
            return True
        started = self.attempt_started
        return (
            self.attempt_failed
            and self.attempt_entitled
            and started is not None
            and now - started < lease * 1.5
        )

    def publish(
        self,
        held: dict[int, int],
        *,
        ready: bool | None = None,
        releasing: frozenset[int] = frozenset(),
    ) -> None:
        """Replace what is held (and wake those waiting in :meth:`wait_changed`);
        ``releasing``: buckets just removed that are being given back (drained, not
        cancelled)."""
        if ready is not None:
            self.ready = ready
        if held != self.held:
            self.held = dict(held)
            self.releasing = releasing
            self.version += 1
            self._changed.set()
            self._changed = trio.Event()

    def mark_applied(self, version: int) -> None:
        """The engine runs what :attr:`version` ``version`` held (``engine.rebalance``)."""
        if version > self.applied:
            self.applied = version
            self._applied.set()
            self._applied = trio.Event()

    async def wait_applied(self, version: int) -> None:
        """Wait until the engine applied :attr:`version` ``version`` (or a later one)."""
        while self.applied < version:
            await self._applied.wait()

    def nudge(self) -> None:
        """Renew now rather than at the next third of the lease: another node registered
        or gave buckets back (``engine.listener``, from ``store.notify``)."""
        self._nudged.set()

    async def wait_changed(self) -> None:
        """Wait until the next :meth:`publish` that changes what is held."""
        await self._changed.wait()

    def renew_lag_seconds(self) -> float:
        """Seconds since the latest successful renewal (0 without a lease actor or before
        the first renewal)."""
        if self.last_renewal is None:
            return 0.0
        return max(0.0, trio.current_time() - self.last_renewal)


async def run_leases(
    db: Database,
    settings: LeaseSettings,
    holding: Holding,
    stop: trio.Event,
    *,
    flush: Callable[[], Awaitable[None]] | None = None,
    task_status: trio.TaskStatus[Holding] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Register, renew until ``stop`` is set, then give every bucket back; reports
    ``holding`` through ``task_status.started`` after the first renewal (so the engine
    starting next loads the buckets already held). ``flush`` waits until the store has
    committed every result handed to it (``store.StoreWriter.flush``): a hand-over runs it
    before giving leases back (the module docstring); None: no store to wait for.

    Raises:
        store.DatabaseUnavailable: the first registration or renewal failed (the root
            supervisor restarts this actor with back-off).
    """
    name, lease, region = settings.node_name, settings.lease_seconds, settings.region
    db = db.with_deadline(lease)
    holding.lease_seconds, holding.region = lease, region
    await db.transaction(leases.register_node, name, lease, region)
    wait = await _renew(db, name, lease, holding, flush)
    log.info(
        "node registered",
        node=name,
        region=region,
        buckets=len(holding.held),
        share=holding.share,
    )
    task_status.started(holding)
    try:
        while not stop.is_set():
            await _sleep(wait, stop, holding)
            if stop.is_set():
                break
            wait = lease / 3
            try:
                wait = await _renew(db, name, lease, holding, flush)
            except DatabaseUnavailable as exc:
                log.warning("lease renewal failed", node=name, error=str(exc))
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(min(lease, 5.0)):
            try:
                released = await db.transaction(leases.release_node, name)
                log.info("buckets given back", node=name, buckets=released)
            except DatabaseUnavailable as exc:
                log.warning("could not give buckets back", node=name, error=str(exc))
        holding.publish({}, ready=False)


async def _sleep(seconds: float, stop: trio.Event, holding: Holding) -> None:
    """Wait ``seconds`` seconds, or until ``stop`` is set or ``holding`` is nudged
    (:meth:`Holding.nudge`; the nudge is then taken)."""
    with trio.move_on_after(seconds):
        async with trio.open_nursery() as nursery:

            async def until(event: trio.Event) -> None:
                await event.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(until, stop)
            nursery.start_soon(until, holding._nudged)
    if holding._nudged.is_set():
        holding._nudged = trio.Event()


async def _renew(
    db: Database,
    name: str,
    lease: float,
    holding: Holding,
    flush: Callable[[], Awaitable[None]] | None,
) -> float:
    """One renewal, published in ``holding``, then the hand-over of what is above the
    share (:func:`_give_back`); the seconds until the next: a third of the lease, or
    sooner when another node's lease expires first (a live node renews its leases every
    third of one, so only a dead node's lapse that early: its buckets are taken as soon
    as they do, at its share's end, not up to a third of a lease later).

    Raises:
        store.DatabaseUnavailable: the renewal failed (``holding`` says so).
    """
    began = trio.current_time()
    holding.attempt_entitled = holding.entitled(began)  # False after a pause past it
    holding.attempt_started, holding.attempt_failed = began, True  # until it answers
    found = await db.transaction(leases.renew_leases, name, lease, holding.region)
    holding.last_renewal, holding.attempt_failed = began, False
    holding.share, holding.live_nodes = found.share, found.live_nodes
    before = len(holding.held)
    held, surplus = found.slots()
    keep = {b: e for b, e in held.items() if b not in surplus}
    holding.publish(keep, ready=holding.ready or found.settled, releasing=surplus)
    if surplus:
        given = {b: held[b] for b in surplus}
        await _give_back(db, name, lease, holding, given, flush)
    if len(keep) != before:
        log.info(
            "buckets held",
            node=name,
            buckets=len(keep),
            share=found.share,
            live_nodes=found.live_nodes,
            region_share=found.region_share,
            region_nodes=found.region_nodes,
            lease_seconds=math.floor(lease),
        )
    wait = lease / 3
    if found.next_expiry_seconds is not None:
        wait = min(wait, max(0.05, found.next_expiry_seconds + 0.02))
    return wait


async def _give_back(
    db: Database,
    name: str,
    lease: float,
    holding: Holding,
    given: dict[int, int],
    flush: Callable[[], Awaitable[None]] | None,
) -> None:
    """Hand buckets ``given`` (bucket to epoch, already left out of ``holding``) over: wait
    until the engine drained their actors, then until the store committed what they
    probed, then give the leases back (each wait bounded by a third of the lease; past it
    the leases go back anyway, and a result still on its way is refused by the fence)."""
    with trio.move_on_after(lease / 3):
        await holding.wait_applied(holding.version)
        if flush is not None:
            with contextlib.suppress(StoreError, trio.ClosedResourceError):
                await flush()  # a store that stopped has nothing more to write
    released = await db.transaction(leases.release_buckets, name, given, holding.region)
    log.info("buckets handed over", node=name, buckets=released)
