"""The monitor actor: one trio task per running monitor, owning its schedule and status.

The actor's loop owns its schedule (config, next deadline). A probe runs as a child task
in the actor's nursery, so the actor keeps answering :class:`Reconfigure` while a probe
is in flight; when the probe returns, that task turns the result into a check record,
moves the state machine (:mod:`engine.health`) and hands both to the store actor (the
check and the status change it caused: one transaction there), all without a
checkpoint between reading the state and writing it, so the loop never sees it half
changed (trio switches tasks only at a checkpoint). The actor is not woken for a result:
a check costs it one wake-up, at its deadline (bench/RESULTS.md, the performance
campaign).

Schedule (docs/checks.md, When checks run; :mod:`engine.schedule`): deadlines on the grid
``phase + k * interval`` of the trio clock; a probe still running at the next deadline makes
that tick a missed one (skipped, never piled up); a created or resumed monitor checks at
once, one started by a (re)load waits for its grid point. Every probe waits for a slot of
the global ``CapacityLimiter`` (file descriptors are finite), then runs under its own
timeout inside :meth:`engine.probes.Prober.probe`.

The inbox (a :class:`~engine.mailbox.Mailbox`: a tenth of a memory channel's memory, for
an actor that waits most of its life) belongs to the engine and outlives an incarnation: a
restarted actor reads the same inbox. A probe task lives in its incarnation's nursery, so
no result outlives the incarnation that asked for it.

Back-pressure: a result the store cannot take at once (its inbox is full) is handed over
by the probe's task, which waits for room; the probe counts as in flight until then, so
the deadlines that pass meanwhile are missed ticks, never piled-up probes.

Stopping: a cancelled actor (pause, delete, a forced stop) loses the probe in flight (a
probe cut short is not a result). A :class:`Drain` (the graceful stop, docs/operations.md,
Shutdown) starts no new probe and lets the one already sent finish, bounded by its own
timeout: its check goes to the store, then the probe's task ends the actor (it cancels
the actor's nursery), which answers reconfigurations until then. A probe still waiting
for a slot of the global limiter was not sent: it is dropped.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import structlog
import trio

from store import (
    CheckRecord,
    MonitorRecord,
    StatusChange,
    StoreWriter,
    WriteCheck,
    new_check_id,
)

from .actor import ActorRef, Reply, answer
from .health import Health, after_check, starting_status
from .leases import Holding
from .mailbox import Mailbox
from .observer import CheckObserver
from .probes import (
    Prober,
    ProbeResult,
    ProbeSpec,
    TlsContexts,
    compile_assertions,
    http_fields_apply,
)
from .schedule import grid_phase, missed_between, next_deadline

log = structlog.get_logger("uptrio.engine")


@dataclass(frozen=True, slots=True, kw_only=True)
class Reconfigure:
    """Apply a new configuration from the next check on (a PATCH, committed)."""

    monitor: MonitorRecord
    reply: Reply[None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Drain:
    """Stop gracefully: start no new probe, finish the one already sent, hand its check
    to the store, then return (see the module docstring)."""


MonitorMessage = Reconfigure | Drain


class _Ticket:
    """One probe's progress, between its task and the actor's loop: ``sent`` (written by
    the task) once the probe has its limiter slot and has started; ``then`` (written by
    the loop on a :class:`Drain`) the actor's nursery scope, which the task cancels once
    the probe's check is handed to the store."""

    __slots__ = ("sent", "then")

    def __init__(self) -> None:
        self.sent = False
        self.then: trio.CancelScope | None = None


@dataclass(slots=True)
class EngineStatistics:
    """Counters every monitor actor adds to (read by metrics and the benchmark).

    Lateness is a probe's start (after a limiter slot was had) minus its deadline, in
    seconds; the most recent samples are kept (at most ``max_samples``).

    Attributes:
        statuses: the in-memory status (pending, up, down) of every running monitor
            actor, by monitor id; it keeps moving while the database is down
            (``uptrio_monitors{status}`` counts it when scraped).
        supervisor_restarts: automatic restarts each engine supervisor made (``engine``,
            ``shard-N``), by supervisor name, since start.
        reconciled_buckets: buckets whose monitors a reconciliation read again because
            their settings digests differed from the actors' (``engine.reconcile``): a
            change that reached this node by no notification, or not yet.
        withheld: grid points not probed because this node could not know it still held
            the monitor's bucket (``engine.leases.Holding.may_probe``: paused past its
            lease).
    """

    checks: int = 0
    failures: int = 0
    missed: int = 0
    status_changes: int = 0
    lateness_samples: list[float] = field(default_factory=list)
    max_samples: int = 200_000
    statuses: dict[str, str] = field(default_factory=dict)
    supervisor_restarts: dict[str, int] = field(default_factory=dict)
    reconciled_buckets: int = 0
    withheld: int = 0

    def record_lateness(self, seconds: float) -> None:
        """Keep one lateness sample (seconds)."""
        if len(self.lateness_samples) >= self.max_samples:
            del self.lateness_samples[: self.max_samples // 2]
        self.lateness_samples.append(seconds)


@dataclass(frozen=True, slots=True, kw_only=True)
class MonitorDeps:
    """What every monitor actor shares: the prober, the store actor's writer, the global
    probe limiter, the statistics and the observer (metrics) if any."""

    prober: Prober
    writer: StoreWriter
    limiter: trio.CapacityLimiter
    stats: EngineStatistics
    observer: CheckObserver | None = None
    holding: Holding | None = None
    """This node's leases, or None: not fenced, always probing. With them a monitor's
    actor runs under the lease of its slot (``Holding.slot_of``: its bucket in the
    any-region pool, or in this node's region's for a monitor with ``regions``) at the
    epoch it had when the actor started: every result it hands to the store carries that
    epoch and pool (docs/several-nodes.md, Fencing and Regions), and it asks
    ``Holding.may_probe`` before every probe."""
    region: str = "default"
    """This node's region (``EngineSettings.region``): every check records it; on a
    monitor with ``regions`` the actor's status is that region's view (docs/regions.md)."""


def probe_spec(monitor: MonitorRecord, tls: TlsContexts) -> ProbeSpec:
    """What to probe for ``monitor``: built once per configuration (start, Reconfigure),
    never per check: assertions compiled here (``probes._assertions``), and the
    `ssl.SSLContext` of its ``tls_verify`` and ``tls_ca_bundle`` taken from ``tls`` (shared
    with every monitor of the same setting; docs/checks.md, Private certificate
    authorities)."""
    return ProbeSpec(
        type=monitor.type,
        url=monitor.url,
        timeout_seconds=float(monitor.timeout_seconds),
        method=monitor.method,
        expected_status_code=monitor.expected_status_code,
        request_headers=tuple((monitor.request_headers or {}).items()),
        request_body=monitor.request_body,
        assertions=compile_assertions(monitor.assertions or ()),
        tls_expiry_days=monitor.tls_expiry_days,
        ssl_context=tls.context(monitor.tls_verify, monitor.tls_ca_bundle)
        if http_fields_apply(monitor.type)
        else None,
    )


async def _probe(state: _Monitor, deadline: float, ticket: _Ticket) -> None:
    """One probe of ``state``'s monitor for ``deadline`` (trio clock, seconds), then its
    check (and the status change it caused) handed to the store (module docstring)."""
    # The fast paths (a free slot, room in the store's inbox: nearly always) skip the
    # scheduler round trip that `async with limiter` and `write` make even when they need
    # not wait; the probe itself is the checkpoint.
    deps = state.deps
    limiter = deps.limiter
    try:
        limiter.acquire_nowait()
    except trio.WouldBlock:
        await limiter.acquire()
    try:
        ticket.sent = True
        lateness_seconds = trio.current_time() - deadline
        deps.stats.record_lateness(lateness_seconds)
        if deps.observer is not None:
            deps.observer.probe_started(lateness_seconds)
        started_wall = time.time()
        result = await deps.prober.probe(state.spec)
    finally:
        limiter.release()
    item = state.item(*state.record(result, started_wall))  # no checkpoint since the probe
    if not deps.writer.write_nowait(item):
        await deps.writer.write(item)  # back-pressure: still in flight meanwhile
    state.in_flight = None
    if ticket.then is not None:
        ticket.then.cancel()  # drained: the actor may go


class _Monitor:
    """The state of one incarnation: its methods are called from the actor's loop, and
    :meth:`record` and :meth:`item` from its probe's task (module docstring)."""

    __slots__ = (
        "clock_offset",
        "config",
        "deps",
        "health",
        "in_flight",
        "lease_epoch",
        "lease_region",
        "phase",
        "slot",
        "spec",
    )

    def __init__(self, monitor: MonitorRecord, deps: MonitorDeps) -> None:
        self.config = monitor
        self.spec = probe_spec(monitor, deps.prober.tls)
        self.deps = deps
        status = starting_status(monitor, deps.region)
        self.health = Health(status)
        deps.stats.statuses[monitor.id] = status
        self.clock_offset = trio.current_time() - time.time()
        self.phase = grid_phase(monitor.id, monitor.interval_seconds, self.clock_offset)
        self.in_flight: _Ticket | None = None
        holding, regions = deps.holding, monitor.regions
        slot = None if holding is None else holding.slot_of(monitor.id, regions)
        self.slot = -1 if slot is None else slot  # its lease slot; -1: none of this node's
        self.lease_epoch = None if holding is None else holding.held.get(self.slot, -1)
        self.lease_region = None if holding is None or regions is None else holding.region

    @property
    def view(self) -> str | None:
        """The region view this actor keeps: this node's region on a monitor with
        ``regions``, else None (its status is the monitor's)."""
        return None if self.config.regions is None else self.deps.region

    def item(self, check: CheckRecord, change: StatusChange | None) -> WriteCheck:
        """A check and the move it caused as the store takes them: under this actor's
        lease (its epoch and pool: ``store.fencing``), in its region's view."""
        return WriteCheck(
            check=check,
            change=change,
            lease_epoch=self.lease_epoch,
            lease_region=self.lease_region,
            region=self.view,
        )

    def reconfigure(self, monitor: MonitorRecord, now: float, deadline: float) -> float:
        """Take the new config; returns the next deadline (moved onto the new grid when
        the interval changed). New ``regions`` or ``region_quorum`` start the actor's
        status again: from ``pending`` on a monitor with regions, so that its region's
        next decision is a region move and the quorum is decided again under the new
        settings (docs/regions.md); from the monitor's status on one without."""
        old_interval = self.config.interval_seconds
        if (monitor.regions, monitor.region_quorum) != (
            self.config.regions,
            self.config.region_quorum,
        ):
            status = "pending" if monitor.regions else starting_status(monitor, "")
            self.health = Health(status)
            self.deps.stats.statuses[monitor.id] = status
        self.config = monitor
        self.spec = probe_spec(monitor, self.deps.prober.tls)
        if monitor.interval_seconds != old_interval:
            self.phase = grid_phase(monitor.id, monitor.interval_seconds, self.clock_offset)
            return next_deadline(now, self.phase, monitor.interval_seconds)
        return deadline

    def record(
        self, result: ProbeResult, started_wall: float
    ) -> tuple[CheckRecord, StatusChange | None]:
        """Turn a probe's result (the probe started at ``started_wall``, epoch seconds)
        into a check and maybe a status change."""
        config = self.config
        created = int(started_wall)
        check = CheckRecord(
            id=new_check_id(created),
            monitor_id=config.id,
            status="up" if result.ok else "down",
            response_time_ms=result.response_time_ms,
            status_code=result.status_code,
            error_code=result.error_code,
            error_message=result.error_message,
            created=created,
            tls_expires_at=result.tls_expires_at,
            region=self.deps.region,
        )
        before = self.health.status
        self.health = after_check(
            self.health,
            result.ok,
            failure_threshold=config.failure_threshold,
            success_threshold=config.success_threshold,
        )
        stats = self.deps.stats
        stats.checks += 1
        stats.failures += not result.ok
        if self.deps.observer is not None:
            self.deps.observer.check_finished(
                config.type, result.ok, result.response_time_ms / 1000
            )
        change = None
        if self.health.status != before:
            stats.status_changes += 1
            stats.statuses[config.id] = self.health.status
            change = StatusChange(
                monitor_id=config.id,
                check_id=check.id,
                from_status=before,
                to_status=self.health.status,
                run_epoch=config.run_epoch,
                created=check.created,
                lease_epoch=self.lease_epoch,
                region=self.view,
                lease_region=self.lease_region,
            )
            log.info(
                "monitor status changed",
                monitor=config.id,
                from_status=before,
                to_status=self.health.status,
                error_code=result.error_code,
            )
        return check, change


def _missed_in_hand_over(state: _Monitor, latest: float, now: float) -> bool:
    """Whether grid point ``latest`` (trio clock, seconds) of a monitor just taken over,
    less than a third of an interval before ``now``, has no stored check while the one
    before it has one: its newest check (``last_checked_at``, epoch seconds, stamped to
    the second a probe started) is older than the point's second and at most two intervals
    (plus that second) older. A probe now must also fall in another second than the next
    grid point's (checks are stamped to the second: two in one second read as a duplicate),
    which rules out a few catch-ups of 1 s intervals. (Later than a third of an interval
    after the point, the next one is near: no catch-up, so two probes are never closer
    than two thirds of an interval.)"""
    last, interval = state.config.last_checked_at, state.config.interval_seconds
    if last is None or now - latest >= interval / 3:
        return False
    wall, now_wall = latest - state.clock_offset, now - state.clock_offset
    if math.floor(now_wall) == math.floor(wall + interval):
        return False
    return last + 1 <= wall <= last + 2 * interval + 1


async def run_monitor(
    monitor: MonitorRecord,
    ref: ActorRef[MonitorMessage],
    inbox: Mailbox[MonitorMessage],
    deps: MonitorDeps,
    *,
    check_now: bool,
    catch_up: bool = False,
    task_status: trio.TaskStatus[ActorRef[MonitorMessage]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run ``monitor`` until cancelled (pause, delete, shutdown) or its inbox closes.

    ``ref`` is the send side of ``inbox``, the value given to ``task_status.started`` (a
    supervisor's shutdown hook gets it).
    ``check_now`` runs the first check at once (create, resume) instead of at the grid
    point. ``catch_up`` (a bucket taken over from another node) runs it at once when the
    latest grid point has no stored check and the newest one (``last_checked_at``) is at
    most two intervals older: a grid point missed in a hand-over is probed late rather
    than never (:func:`_missed_in_hand_over`).

    Raises only for bugs (a probe that raises crashes the actor; its supervisor restarts
    it); ``trio.Cancelled`` propagates (a probe's result is handed to the store without a
    checkpoint after the probe, so a cancellation loses only a probe cut short, or a
    check still waiting for room in the store).
    """
    state = _Monitor(monitor, deps)
    interval = float(monitor.interval_seconds)
    now = trio.current_time()
    deadline = now if check_now else next_deadline(now, state.phase, interval)
    latest = deadline - interval  # the latest grid point, at or before now
    if catch_up and not check_now and _missed_in_hand_over(state, latest, now):
        deadline = now
    # After an immediate first check the grid resumes at least half an interval later,
    # so a new monitor is not checked twice in quick succession.
    off_grid = check_now
    try:
        async with trio.open_nursery() as nursery:
            task_status.started(ref)
            while True:
                # One cancel scope per deadline, not per message: reconfigurations are
                # handled inside it.
                with trio.move_on_at(deadline) as waiting:
                    while True:
                        try:
                            message = await inbox.receive()
                        except trio.EndOfChannel:
                            return
                        match message:
                            case Reconfigure(monitor=new, reply=reply):
                                with reply:
                                    now = trio.current_time()
                                    moved = state.reconfigure(new, now, deadline)
                                    if deadline != math.inf:  # not draining
                                        deadline = waiting.deadline = moved
                                    answer(reply, None)
                            case Drain():
                                ticket = state.in_flight
                                if ticket is None or not ticket.sent:
                                    nursery.cancel_scope.cancel()  # a probe not sent yet
                                    return
                                ticket.then = nursery.cancel_scope  # its task ends us
                                deadline = waiting.deadline = math.inf
                now = trio.current_time()  # the deadline has come
                interval = float(state.config.interval_seconds)
                earliest = deadline + interval / 2 if off_grid else max(now, deadline)
                following = next_deadline(earliest, state.phase, interval)
                paused_until = state.config.maintenance_paused_until
                if paused_until is not None and now - state.clock_offset < paused_until:
                    pass  # a maintenance window pauses its checks (docs/maintenance.md)
                elif state.in_flight is not None:
                    deps.stats.missed += 1
                elif deps.holding is not None and not deps.holding.may_probe(
                    state.slot, state.lease_epoch, now
                ):
                    deps.stats.withheld += 1  # the bucket may be another node's now
                else:
                    ticket = state.in_flight = _Ticket()
                    nursery.start_soon(_probe, state, deadline, ticket)
                if not off_grid:
                    deps.stats.missed += missed_between(deadline, following, interval)
                off_grid = False
                deadline = following
    except BaseException:
        # Askers of reconfigurations still in the inbox are freed at once (a cancellation
        # comes out of the nursery wrapped in a BaseExceptionGroup, so this catches
        # everything, and re-raises it).
        while True:
            try:
                message = inbox.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
            if isinstance(message, Reconfigure):
                message.reply.close()
        raise
    finally:
        deps.stats.statuses.pop(monitor.id, None)
