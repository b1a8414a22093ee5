"""The lease actor: this node's share of the buckets (extensions part 6; issue 14,
item 1), and :class:`Holding`, what it holds as the engine and ``/metrics`` see it.

A child of the root supervisor (``web.service``), started before the engine: it
registers the node (``store.leases.register_node``), renews every third of the lease
(``store.leases.renew_leases``: extend, claim up to the fair share, give back above it),
and publishes each round in the :class:`Holding` the engine follows (it starts the
actors of gained buckets and stops those of lost ones). Every renewal has a deadline
(the lease itself); a nudge (:meth:`Holding.nudge`: another node registered or gave
buckets back, told through ``store.notify``) makes it renew at once. A node that
cannot renew (a database outage) keeps its actors running, as a lone node always did:
the fence decides at write time, and the first renewal that succeeds tells it which
buckets it lost. On a graceful stop (``request_stop``, after
the engine stopped and the store flushed) it gives every bucket back at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import structlog
import trio

from store import Database, DatabaseUnavailable, leases

__all__ = ["Holding", "LeaseSettings", "run_leases"]

log = structlog.get_logger("uptrio.leases")


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseSettings:
    """``uptrio serve --node-name --lease-seconds``.

    Attributes:
        node_name: this node's name (default host:port, set by ``web.flags``).
        lease_seconds: how long a lease lasts unrenewed, seconds (default 10); renewed
            every third of it.
    """

    node_name: str
    lease_seconds: float = 10.0


class Holding:
    """The buckets this node holds (bucket to lease epoch), shared by the lease actor
    (writer) and the engine and metrics (readers); outlives their incarnations.

    Without a lease actor (``Holding.everything()``: tests and embedders running one
    engine alone) every bucket is held at epoch 0 and ``ready`` at once.
    """

    def __init__(self) -> None:
        self.held: dict[int, int] = {}
        self.share = 0
        self.live_nodes = 0
        self.ready = False
        self.last_renewal: float | None = None
        """``trio.current_time()`` of the latest successful renewal, or None."""
        self.fenced = True
        """Whether results carry lease epochs (False for :meth:`everything`)."""
        self._changed = trio.Event()
        self._nudged = trio.Event()

    @classmethod
    def everything(cls) -> Holding:
        """Every bucket, ready: a lone engine with no lease actor."""
        holding = cls()
        holding.held = dict.fromkeys(range(leases.BUCKETS), 0)
        holding.share, holding.live_nodes, holding.ready = leases.BUCKETS, 1, True
        holding.fenced = False
        return holding

    def epoch_of(self, resource_id: str) -> int | None:
        """The lease epoch of ``resource_id``'s bucket now (the fence its actor's results
        carry): -1 when the bucket is not held (every write refused), None when not
        fenced."""
        if not self.fenced:
            return None
        return self.held.get(leases.bucket_of(resource_id), -1)

    def publish(self, held: dict[int, int], *, ready: bool | None = None) -> None:
        """Replace what is held (and wake those waiting in :meth:`wait_changed`)."""
        if ready is not None:
            self.ready = ready
        if held != self.held:
            self.held = dict(held)
            self._changed.set()
            self._changed = trio.Event()

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
    task_status: trio.TaskStatus[Holding] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Register, renew until ``stop`` is set, then give every bucket back; reports
    ``holding`` through ``task_status.started`` after the first renewal (so the engine
    starting next loads the buckets already held).

    Raises:
        store.DatabaseUnavailable: the first registration or renewal failed (the root
            supervisor restarts this actor with back-off).
    """
    name, lease = settings.node_name, settings.lease_seconds
    db = db.with_deadline(lease)
    await db.transaction(leases.register_node, name, lease)
    wait = await _renew(db, name, lease, holding)
    log.info("node registered", node=name, buckets=len(holding.held), share=holding.share)
    task_status.started(holding)
    try:
        while not stop.is_set():
            await _sleep(wait, stop, holding)
            if stop.is_set():
                break
            wait = lease / 3
            try:
                wait = await _renew(db, name, lease, holding)
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


async def _renew(db: Database, name: str, lease: float, holding: Holding) -> float:
    """One renewal, published in ``holding``; the seconds until the next: a third of the
    lease, or sooner when below its share and another node's lease expires first (a
    dead node's buckets are taken as soon as they lapse)."""
    began = trio.current_time()
    found = await db.transaction(leases.renew_leases, name, lease)
    holding.last_renewal = began
    holding.share, holding.live_nodes = found.share, found.live_nodes
    before = len(holding.held)
    holding.publish(found.held, ready=holding.ready or found.settled)
    if len(found.held) != before:
        log.info(
            "buckets held",
            node=name,
            buckets=len(found.held),
            share=found.share,
            live_nodes=found.live_nodes,
            lease_seconds=math.floor(lease),
        )
    wait = lease / 3
    if found.next_expiry_seconds is not None:
        wait = min(wait, max(0.05, found.next_expiry_seconds + 0.02))
    return wait
