"""Monitors as a kind (``engine.kind``; ``docs/architecture.md``, "Kinds"): one
supervised actor per monitor that is not paused (:func:`engine.monitor.run_monitor`),
one_for_one under its shard's supervisor, with the shard's restart intensity and back-off.

The desired state of a monitor is its record: a paused one (or None: deleted, or
another node's) runs nothing; a running actor whose run epoch changed (a resume, a
restart asked for) is restarted and checks at once; one whose settings changed is
reconfigured in place (its grid kept); the same settings ask nothing
(:func:`same_settings`: this node's own change, notified back).

Reconciliation compares per bucket first: how many monitors and the sum of their
settings digests, against the same over the running actors (one aggregate query,
``store.monitors.settings_digests``); only the buckets that differ are read again
(reading all 20,000 monitors every 5 s stalled a node 0.3 to 0.4 s: bench/RESULTS.md,
"Several nodes").
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import structlog
import trio

from store import Database, DatabaseUnavailable, MonitorRecord, monitors

from ..actor import ActorRef, ActorUnavailable, Reply, ask
from ..kind import Apply, EngineContext, Runner, ShardContext
from ..leases import Holding
from ..loading import load_when_available
from ..mailbox import Mailbox
from ..monitor import Drain, MonitorDeps, MonitorMessage, Reconfigure, run_monitor
from ..supervisor import ChildSpec, RestartType, Supervisor

__all__ = ["DRAIN_SECONDS", "HAND_OVER_DRAIN_SECONDS", "MonitorKind", "same_settings"]

log = structlog.get_logger("uptrio.engine")

DRAIN_SECONDS = 65.0
"""Grace of a graceful stop for each monitor actor, seconds: the longest probe timeout
(60 s) plus a margin; the caller's grace (``--shutdown-seconds``) is the tighter bound in
practice."""

HAND_OVER_DRAIN_SECONDS = 2.0
"""Grace of the monitor actors of buckets this node gives back, seconds: a probe already
sent that takes longer is cancelled (not a result; the node taking the bucket probes that
grid point again)."""


def same_settings(running: MonitorRecord, stored: MonitorRecord) -> bool:
    """Whether ``stored`` asks nothing new of an actor running ``running`` (the same
    settings and run; status and times aside)."""
    return _settings_of(running) == _settings_of(stored)


def _settings_of(record: MonitorRecord) -> MonitorRecord:
    """``record`` without what the store changes on its own (status, times, why an
    episode was held back, whether a window covers it) and what only the alerting reads
    (``escalation_policy``, ``depends_on``): what an actor runs by, with when a window
    pauses its checks until."""
    return dataclasses.replace(
        record,
        status="",
        updated=0,
        last_checked_at=None,
        suppressed_by=None,
        in_maintenance=False,
        escalation_policy=None,
        depends_on=[],
        settings_digest=0,
    )


_SHARED_FIELDS = ("account_id", "type", "status", "method", "incident_severity")
"""The text fields many monitors hold alike (one account, a handful of values each)."""


def shared_strings(record: MonitorRecord) -> MonitorRecord:
    """``record`` with its :data:`_SHARED_FIELDS` interned (``sys.intern``): the engine
    holds a record per running monitor, and rows read from the database come with strings
    of their own (some 280 bytes a monitor, measured by ``bench.memory_micro``); one
    string per distinct value serves them all. Equal to ``record``."""
    changes: dict[str, Any] = {
        name: sys.intern(value)
        for name in _SHARED_FIELDS
        if isinstance(value := getattr(record, name), str) and sys.intern(value) is not value
    }
    return dataclasses.replace(record, **changes) if changes else record


@dataclass(slots=True)
class _Entry:
    """A running monitor's handle: its inbox (stable across restarts of its actor), the
    latest record known, and how its next incarnation starts."""

    record: MonitorRecord
    ref: ActorRef[MonitorMessage]
    inbox: Mailbox[MonitorMessage]
    check_now: bool
    bucket: int
    """Its lease slot (``engine.leases.Holding.slot_of``: its bucket, in the any-region
    pool or this node's region's), kept so reconciliation need not hash."""
    fresh: bool = True
    catch_up: bool = False
    """Taken over from another node: the first incarnation probes a grid point missed in
    the hand-over at once (``engine.monitor.run_monitor``)."""


class MonitorKind:
    """The monitors kind of one engine incarnation (module docstring)."""

    prefix = "mon"

    def __init__(self, context: EngineContext) -> None:
        holding = context.holding
        self.context = context
        self.deps = MonitorDeps(
            prober=context.prober,
            writer=context.writer,
            limiter=trio.CapacityLimiter(context.settings.max_probes_in_flight),
            stats=context.stats,
            observer=context.observer,
            holding=holding if holding.fenced else None,
            region=context.settings.region,
        )

    def runner(self, shard: ShardContext) -> MonitorRunner:
        """The monitor actors of ``shard``."""
        return MonitorRunner(self, shard)

    async def load(
        self,
        buckets: Sequence[int] | None,
        ids: Sequence[str] | None = None,
        *,
        db: Database | None = None,
    ) -> list[MonitorRecord]:
        """The monitors that are not paused, of lease slots ``buckets`` of this node's
        region or ``ids`` (``store.monitors.load_active_monitors``).

        Raises:
            store.DatabaseUnavailable: the database did not answer.
        """
        return await (db or self.context.db).run(
            monitors.load_active_monitors, buckets, ids, self.context.holding.region
        )

    async def reconcile(self, runners: Sequence[Runner], held: Sequence[int], apply: Apply) -> None:
        """The per-bucket comparison of the module docstring; counts the buckets read
        again in ``reconciled_buckets``.

        Raises:
            store.DatabaseUnavailable: the database did not answer.
        """
        mine = [r for r in runners if isinstance(r, MonitorRunner)]
        digests = await self.context.db.run(
            monitors.settings_digests, held, self.context.holding.region
        )
        sums: dict[int, tuple[int, int]] = {}
        for runner in mine:
            for entry in runner.entries.values():
                n, total = sums.get(entry.bucket, (0, 0))
                sums[entry.bucket] = (n + 1, total + entry.record.settings_digest)
        stale = [b for b in held if digests.get(b, (0, 0)) != sums.get(b, (0, 0))]
        self.context.stats.reconciled_buckets += len(stale)
        if not stale:
            return
        stored = {r.id: r for r in await self.load(stale)}
        read = set(stale)
        running = {
            monitor_id: entry.record
            for runner in mine
            for monitor_id, entry in runner.entries.items()
            if entry.bucket in read
        }
        for monitor_id in running.keys() - stored.keys():
            await _reconciled(apply, monitor_id, None)
        for record in stored.values():
            known = running.get(record.id)
            if known is None or not same_settings(known, record):
                await _reconciled(apply, record.id, record)

    def heard(self, runners: Sequence[Runner], resource_id: str, detail: str, wall: float) -> None:
        """Monitors hear nothing from other nodes but changes (applied as such)."""


async def _reconciled(apply: Apply, resource_id: str, record: MonitorRecord | None) -> None:
    log.info("reconciled", resource=resource_id, removed=record is None)
    await apply(resource_id, record)


class MonitorRunner:
    """The monitor actors of one shard (module docstring)."""

    def __init__(self, kind: MonitorKind, shard: ShardContext) -> None:
        self.kind = kind
        self.shard = shard
        self.supervisor: Supervisor | None = None
        self.entries: dict[str, _Entry] = {}
        self.touched: set[str] | None = None
        """While the shard loads from the database: the monitors a change reached
        meanwhile (newer than the load's read, so the load leaves them alone)."""

    async def populate(self, supervisor: Supervisor) -> None:
        """Start an actor per monitor of the shard's buckets, each on its grid point."""
        for entry in self.entries.values():
            _close(entry.inbox)
        self.entries.clear()
        self.supervisor = supervisor
        self.touched = set()
        try:
            loaded = await load_when_available(
                partial(self.kind.load, self.shard.buckets()), self.shard.name
            )
            for record in loaded:
                if record.id not in self.touched and record.id not in self.entries:
                    await self._start(record, check_now=False)
        finally:
            self.touched = None

    async def apply(self, resource_id: str, record: MonitorRecord | None) -> None:
        """Start, restart, reconfigure or stop the monitor's actor (module docstring). A
        monitor this shard does not run (its ``regions`` leave this node's region out, or
        put it in a pool whose lease it does not hold) is stopped; one whose
        ``regions`` changed is restarted under its new lease (docs/several-nodes.md,
        Regions)."""
        if record is not None and _slot(self.kind.context.holding, record) not in set(
            self.shard.buckets()
        ):
            record = None  # another node's (or another region's) to run
        elif record is not None:
            record = shared_strings(record)
        if self.touched is not None:
            self.touched.add(resource_id)
        if self.supervisor is None:
            return  # the shard is (re)loading from the database, which has the change
        entry = self.entries.get(resource_id)
        running = entry is not None and self.supervisor.has_child(resource_id)
        if record is None or record.status == "paused":
            if entry is not None or running:
                await self._stop(resource_id)
        elif (
            entry is None
            or not running
            or entry.record.run_epoch != record.run_epoch
            or entry.record.regions != record.regions
        ):
            await self._stop(resource_id)
            if not self.kind.context.stopping.is_set():  # else the next load starts it
                await self._start(record, check_now=True)
        elif same_settings(entry.record, record):
            entry.record = record  # nothing new (this node's own change, notified)
        else:
            entry.record = record

            def make(reply: Reply[None]) -> Reconfigure:
                return Reconfigure(monitor=record, reply=reply)

            # When it is restarting, its next incarnation reads the stored config.
            with contextlib.suppress(ActorUnavailable):
                await ask(
                    entry.ref, make, timeout_seconds=self.kind.context.settings.ask_timeout_seconds
                )

    async def lose(self, buckets: set[int], *, drain: bool) -> None:
        """Stop the actors of ``buckets`` at once (another node runs them now; a result
        still in flight would be refused), or, with ``drain``, let each finish the probe
        it sent and hand its check to the store first, all at once, within
        :data:`HAND_OVER_DRAIN_SECONDS`."""
        going = [m for m, e in self.entries.items() if e.bucket in buckets]
        if drain and self.supervisor is not None:
            supervisor = self.supervisor
            with trio.move_on_after(HAND_OVER_DRAIN_SECONDS):
                async with trio.open_nursery() as nursery:
                    for monitor_id in going:
                        nursery.start_soon(supervisor.stop_child, monitor_id)
        for monitor_id in going:
            await self._stop(monitor_id)

    async def gain(self, records: Sequence[MonitorRecord]) -> None:
        """Start an actor for each of ``records`` not already running, on its grid point,
        catching up a grid point the hand-over missed (so a bucket that moves leaves no
        grid point unprobed). Between incarnations the next load reads them."""
        for record in records:
            if self.touched is not None:
                self.touched.add(record.id)
            if self.supervisor is not None and record.id not in self.entries:
                await self._start(record, check_now=False, catch_up=True)

    async def _start(
        self, record: MonitorRecord, *, check_now: bool, catch_up: bool = False
    ) -> None:
        """Start an actor for ``record`` (not paused) under the shard's supervisor;
        ``catch_up``: taken over from another node (:meth:`gain`)."""
        assert self.supervisor is not None
        record = shared_strings(record)
        # not Mailbox[...](...): a subscripted call costs every instance 64 bytes more
        inbox: Mailbox[MonitorMessage] = Mailbox(self.kind.context.settings.monitor_inbox_size)
        ref = ActorRef(inbox)
        entry = _Entry(
            record=record,
            ref=ref,
            inbox=inbox,
            check_now=check_now,
            bucket=_slot(self.kind.context.holding, record),
            catch_up=catch_up,
        )
        self.entries[record.id] = entry
        await self.supervisor.start_child(
            ChildSpec(
                child_id=record.id,
                start=partial(self._incarnation, entry),
                restart=RestartType.TRANSIENT,
                shutdown=_tell_drain,  # one function for all: it gets the started ref
                shutdown_seconds=DRAIN_SECONDS,
            )
        )

    async def _stop(self, monitor_id: str) -> None:
        """Stop a monitor's actor at once (cancelled, in-flight probe included: a pause
        or a delete) and forget it."""
        entry = self.entries.pop(monitor_id, None)
        if self.supervisor is not None:
            await self.supervisor.stop_child(monitor_id, at_once=True)
        if entry is not None:
            _close(entry.inbox)

    def _incarnation(
        self, entry: _Entry, *, task_status: trio.TaskStatus[ActorRef[MonitorMessage] | None]
    ) -> Coroutine[Any, Any, None]:
        """One incarnation of ``entry``'s actor, as the coroutine the supervisor awaits:
        the first runs the record it was started with; a restart reads the record again
        first (:meth:`_restarted`). Not itself a coroutine function, so that the first
        incarnation (nearly every actor's only one) keeps no frame of its own while it
        waits (some 300 bytes an actor, ``bench.memory_micro``)."""
        if not entry.fresh:
            return self._restarted(entry, task_status)
        entry.fresh = False
        return self._run(entry, entry.check_now, entry.catch_up, task_status)

    async def _restarted(
        self, entry: _Entry, task_status: trio.TaskStatus[ActorRef[MonitorMessage] | None]
    ) -> None:
        """A restart: the database has the latest config and status (an outage: the last
        known); a monitor paused or gone meanwhile runs nothing."""
        try:
            stored = await self.kind.context.db.run(monitors.get_monitor, None, entry.record.id)
        except DatabaseUnavailable:  # an outage: the last config and status known
            stored = entry.record
        if stored is None or stored.status == "paused":
            task_status.started(None)
            return
        entry.record = shared_strings(stored)
        await self._run(entry, False, False, task_status)

    def _run(
        self,
        entry: _Entry,
        check_now: bool,
        catch_up: bool,
        task_status: trio.TaskStatus[ActorRef[MonitorMessage] | None],
    ) -> Coroutine[Any, Any, None]:
        return run_monitor(
            entry.record,
            entry.ref,
            entry.inbox,
            self.kind.deps,
            check_now=check_now,
            catch_up=catch_up,
            task_status=task_status,
        )


def _slot(holding: Holding, record: MonitorRecord) -> int:
    """``record``'s lease slot on this node (``Holding.slot_of``; -1: none, never held)."""
    slot = holding.slot_of(record.id, record.regions)
    return -1 if slot is None else slot


def _tell_drain(ref: ActorRef[MonitorMessage] | None) -> bool:
    """A monitor actor's ``shutdown`` hook, called with what its incarnation started with
    (its ref; None: an incarnation that found its monitor paused or gone and returns at
    once): tell it to drain; False (then it is cancelled at once) when there is no ref or
    its inbox is full or closed."""
    if ref is None:
        return False
    try:
        ref.tell_nowait(Drain())
    except (trio.WouldBlock, ActorUnavailable):
        return False
    return True


def _close(inbox: Mailbox[MonitorMessage]) -> None:
    """Close a monitor's inbox once no actor reads it: the askers of the reconfigurations
    still in it are freed at once (``ActorUnavailable``); results of probes are dropped
    (their actor is gone: not a result)."""
    for message in inbox.close():
        if isinstance(message, Reconfigure):
            message.reply.close()
