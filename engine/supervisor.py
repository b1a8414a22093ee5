"""One-for-one supervisors for trio, built from Erlang/OTP's rules (``sup_princ``).

A supervisor runs children (:class:`ChildSpec`) and restarts the one that fails without
touching its siblings (OTP ``one_for_one``): :func:`open_supervisor`, or
:func:`run_supervisor` to nest one under another. Rules and their origins:
:class:`RestartType`, :class:`Intensity` (OTP), :class:`Backoff` (Akka
``BackoffSupervisor``), the shutdown ladder of :class:`ChildSpec` (OTP's shutdown
timeout, tractor's stop-then-cancel). Past the intensity the supervisor *escalates*: it
cancels every child and raises :class:`SupervisorEscalation` ``from`` the child's
exception into its parent, which decides (a parent supervisor counts one crash).

A **crash** is an incarnation raising an ``Exception`` (``ExceptionGroup`` included).
``trio.Cancelled`` is never a crash and never swallowed: a cancellation the supervisor
asked for (stop, restart) is absorbed by the incarnation's own cancel scope, even inside
exception groups (trio splits them with ``eg.split(Cancelled)``); anything else carrying
a ``Cancelled`` is a ``BaseExceptionGroup``, not an ``Exception``, and propagates, as do
``KeyboardInterrupt`` and ``SystemExit``. A supervisor cancelled from outside cancels
every child at once; children bound their own shielded clean-up.

Scale: one trio task per child, running its incarnations inline; no timer while a child
runs; O(1) amortised work per crash (a deque of at most ``max_restarts`` restart times).
Size the intensity for the number of children, or shard them across supervisors.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import structlog
import trio

from .supervision import (
    Backoff,
    ChildInfo,
    ChildSpec,
    ChildStartError,
    ChildState,
    Intensity,
    RestartType,
    SupervisorClosed,
    SupervisorError,
    SupervisorEscalation,
    SupervisorState,
    SupervisorStatistics,
)

__all__ = [
    "Backoff",
    "ChildInfo",
    "ChildSpec",
    "ChildStartError",
    "Intensity",
    "OnRestart",
    "RestartType",
    "Supervisor",
    "SupervisorClosed",
    "SupervisorError",
    "SupervisorEscalation",
    "SupervisorStatistics",
    "open_supervisor",
    "run_supervisor",
]

log = structlog.get_logger("uptrio.supervisor")


OnRestart = Callable[[str, Exception | None], object]
"""``on_restart(child_id, exc or None)`` before each automatic restart; errors are logged."""


@dataclass(eq=False, slots=True)
class _Child:
    spec: ChildSpec
    state: ChildState = "starting"
    scope: trio.CancelScope | None = None  # the current phase: an incarnation or a back-off
    start_status: trio.TaskStatus[object] | None = None  # start_child's, until started
    started: bool = False  # the current incarnation called started()
    value: object = None  # ... with this value
    incarnation: int = 0
    restarts: int = 0  # automatic restarts, in total
    consecutive: int = 0  # automatic restarts since the last reset: the back-off exponent
    last_failure: str | None = None
    stop_requested: bool = False
    restart_requested: bool = False
    gone: bool = False
    changed: trio.lowlevel.ParkingLot | None = None  # made once someone waits (memory)

    def notify(self) -> None:
        if self.changed is not None:
            self.changed.unpark_all()

    async def wait_changed(self) -> None:
        if self.changed is None:
            self.changed = trio.lowlevel.ParkingLot()
        await self.changed.park()


@dataclass(slots=True)
class _IncarnationStatus:  # one incarnation's task_status; the first started() goes on
    child: _Child
    incarnation: int

    def started(self, value: object = None) -> None:
        child = self.child
        if child.started or child.incarnation != self.incarnation or child.gone:
            raise RuntimeError("task_status.started() called twice or after the incarnation")
        child.started, child.value = True, value
        if child.state == "starting":
            child.state = "running"
        outer, child.start_status = child.start_status, None
        if outer is not None:
            outer.started(value)
        child.notify()


class Supervisor:
    """A running supervisor, made by :func:`open_supervisor` or :func:`run_supervisor`."""

    def __init__(
        self, name: str, nursery: trio.Nursery, intensity: Intensity, backoff: Backoff
    ) -> None:
        self.name = name
        self.on_restart: OnRestart | None = None
        self._nursery, self._intensity, self._backoff = nursery, intensity, backoff
        self._rng = random.Random()
        self._children: dict[str, _Child] = {}
        self._restart_times: deque[float] = deque()
        self._total_restarts = 0
        self._last_failure: str | None = None
        self._state: SupervisorState = "running"
        self._escalation: SupervisorEscalation | None = None
        self._all_gone = trio.lowlevel.ParkingLot()
        self._close_requested = trio.Event()

    async def start_child(self, spec: ChildSpec) -> object:
        """Start a child; wait until its first incarnation calls
        ``task_status.started(value)`` and return that value. Raises ValueError if
        ``spec.child_id`` exists, :class:`SupervisorClosed`, or :class:`ChildStartError`
        if the child raised, returned or was stopped before it started."""
        where = {"supervisor_name": self.name, "child_id": spec.child_id}
        if self._state != "running":
            raise SupervisorClosed(f"supervisor {self.name!r} is {self._state}", **where)
        if spec.child_id in self._children:
            raise ValueError(f"supervisor {self.name!r} already has child {spec.child_id!r}")
        child = self._children[spec.child_id] = _Child(spec)
        try:
            return await self._nursery.start(self._supervise, child)
        except BaseException as exc:
            if child.incarnation == 0:  # never ran (else it forgets itself when it ends)
                self._forget(child)
            if isinstance(exc, Exception):
                raise ChildStartError(f"child {spec.child_id!r} failed to start", **where) from exc
            raise

    async def stop_child(self, child_id: str, *, at_once: bool = False) -> bool:
        """Stop a child (the :class:`ChildSpec` ladder, or a cancellation ``at_once``) and
        wait until it is gone. Not a crash, not restarted. Returns False if ``child_id``
        is unknown."""
        child = self._children.get(child_id)
        if child is None:
            await trio.lowlevel.checkpoint()
            return False
        self._request_stop(child, at_once=at_once)
        while not child.gone:
            await child.wait_changed()
        return True

    async def restart_child(self, child_id: str) -> bool:
        """Operator restart: end the current incarnation (the :class:`ChildSpec` ladder;
        a back-off wait is cut short) and start a new one at once, without back-off and
        without counting toward the intensity. Waits until the new incarnation called
        ``started`` or ended. Returns False if ``child_id`` is unknown or stopping."""
        child = self._children.get(child_id)
        if child is None or child.stop_requested:
            await trio.lowlevel.checkpoint()
            return False
        target = child.incarnation + 1
        child.restart_requested = True
        self._end_phase(child)
        while not child.gone and (child.incarnation < target or child.state == "starting"):
            await child.wait_changed()
        return not child.gone

    async def close(self) -> None:
        """Stop every child with its shutdown ladder and wait until all are gone; from now
        on the supervisor takes no new child (:class:`SupervisorClosed`)."""
        await self._close_gracefully()

    def request_close(self) -> None:
        """Ask a supervisor run by :func:`run_supervisor` to stop every child with its
        shutdown ladder and return (a polite stop: usable as the ``shutdown`` hook of the
        :class:`ChildSpec` that runs it). Does nothing for one of :func:`open_supervisor`,
        whose body decides when it ends."""
        self._close_requested.set()

    def has_child(self, child_id: str) -> bool:
        """Whether ``child_id`` is a live child (in any state)."""
        return child_id in self._children

    def child_ids(self) -> list[str]:
        """The live children's ids, in start order."""
        return list(self._children)

    def child_info(self, child_id: str) -> ChildInfo | None:
        """A snapshot of one child, or None if unknown."""
        c = self._children.get(child_id)
        if c is None:
            return None
        return ChildInfo(child_id, c.state, c.spec.restart, c.restarts, c.last_failure)

    def child_value(self, child_id: str) -> object:
        """What the current incarnation passed to ``task_status.started`` (say, the new
        :class:`~engine.actor.ActorRef` after a restart); None if unknown or in between."""
        child = self._children.get(child_id)
        return None if child is None else child.value

    def statistics(self) -> SupervisorStatistics:
        """A frozen snapshot; ``restarts_in_period`` is counted at ``trio.current_time()``."""
        cutoff = trio.current_time() - self._intensity.period_seconds
        in_period = sum(1 for when in self._restart_times if when > cutoff)
        children, total, last = len(self._children), self._total_restarts, self._last_failure
        state = "closed" if self._state == "closing" and not children else self._state
        return SupervisorStatistics(self.name, state, children, in_period, total, last)

    async def _supervise(self, child: _Child, *, task_status: trio.TaskStatus[object]) -> None:
        child.start_status = task_status
        # The child keeps it until started; this frame must not: trio's start() leaves
        # its first nursery (a cancel status and three sets, some 0.9 KB) hanging on it.
        del task_status
        delay_seconds = 0.0
        try:
            while True:
                if delay_seconds > 0:
                    child.state = "restarting"
                    child.notify()
                    with self._open_phase(child):
                        await trio.sleep(delay_seconds)
                    if child.stop_requested or self._state != "running":
                        return
                crash, ran_seconds = await self._run_incarnation(child)
                if crash is not None:
                    child.last_failure = repr(crash)
                    self._last_failure = f"{child.spec.child_id}: {crash!r}"
                if child.stop_requested or self._state != "running":
                    return
                if child.restart_requested:
                    delay_seconds = 0.0  # operator restart: at once, not counted
                    continue
                restart = child.spec.restart  # never started: start_child reports it
                if child.start_status is not None or restart is RestartType.TEMPORARY:
                    return
                if crash is None and restart is RestartType.TRANSIENT:
                    return
                if not self._count_restart(trio.current_time()):
                    self._escalate(child, crash)
                    return
                if ran_seconds >= self._backoff.reset_after_seconds:
                    child.consecutive = 0
                delay_seconds = self._backoff.delay_seconds(child.consecutive, self._rng.random())
                child.consecutive += 1
                child.restarts += 1
                self._total_restarts += 1
                self._report_restart(child, crash, delay_seconds)
        finally:
            self._forget(child)

    async def _run_incarnation(self, child: _Child) -> tuple[Exception | None, float]:
        """Run one incarnation inline; return (its crash or None, seconds it ran)."""
        child.restart_requested, child.incarnation = False, child.incarnation + 1
        child.state = "stopping" if child.stop_requested else "starting"
        status, began = _IncarnationStatus(child, child.incarnation), trio.current_time()
        crash: Exception | None = None
        child.notify()
        try:
            with self._open_phase(child):
                await child.spec.start(task_status=status)
        except Exception as exc:
            if child.start_status is not None:
                raise  # the first incarnation never started: nursery.start raises it
            crash = exc
        finally:
            child.started, child.value = False, None
        return crash, trio.current_time() - began

    def _open_phase(self, child: _Child) -> trio.CancelScope:
        child.scope = scope = trio.CancelScope()
        if child.stop_requested:
            scope.cancel()
        return scope

    def _request_stop(self, child: _Child, *, at_once: bool = False) -> None:
        if not child.stop_requested:
            child.stop_requested, child.state = True, "stopping"
            self._end_phase(child, at_once=at_once)
        elif at_once and child.scope is not None:
            child.scope.cancel()

    def _end_phase(self, child: _Child, *, at_once: bool = False) -> None:
        """Ask the current phase to end: shutdown hook plus grace, or cancel now."""
        scope, hook, grace_seconds = child.scope, child.spec.shutdown, child.spec.shutdown_seconds
        if scope is None:
            return  # the task has not run yet; it sees the flags when it opens a phase
        if not at_once and child.started and hook is not None and grace_seconds > 0:
            try:
                asked = hook(child.value)
            except Exception:
                log.exception(
                    "shutdown hook failed", supervisor=self.name, child=child.spec.child_id
                )
            else:
                if asked is not False:
                    scope.deadline = min(scope.deadline, trio.current_time() + grace_seconds)
                    return
        scope.cancel()

    def _forget(self, child: _Child) -> None:
        if self._children.get(child.spec.child_id) is child:
            del self._children[child.spec.child_id]
        child.gone, child.scope = True, None
        child.notify()
        if not self._children:
            self._all_gone.unpark_all()

    def _count_restart(self, now: float) -> bool:
        """OTP intensity: record a restart at ``now`` unless it would exceed the limit."""
        times, cutoff = self._restart_times, now - self._intensity.period_seconds
        while times and times[0] <= cutoff:
            times.popleft()
        if len(times) >= self._intensity.max_restarts:
            return False
        times.append(now)
        return True

    def _escalate(self, child: _Child, crash: Exception | None) -> None:
        if self._escalation is None:
            limit, child_id = self._intensity, child.spec.child_id
            self._escalation = SupervisorEscalation(
                f"supervisor {self.name!r}: child {child_id!r} ended ({crash!r}), over "
                f"{limit.max_restarts} restarts within {limit.period_seconds} s",
                supervisor_name=self.name,
                child_id=child_id,
            )
            self._escalation.__cause__ = crash  # as `raise ... from crash` would
            self._escalation.__suppress_context__, self._state = True, "escalated"
        self._nursery.cancel_scope.cancel()

    def _report_restart(self, child: _Child, crash: Exception | None, delay: float) -> None:
        log.warning(
            "restarting child",
            supervisor=self.name,
            child=child.spec.child_id,
            delay_seconds=round(delay, 3),
            restart=child.restarts,
            exc_info=crash,
        )
        if self.on_restart is not None:
            try:
                self.on_restart(child.spec.child_id, crash)
            except Exception:
                log.exception("on_restart hook failed", supervisor=self.name)

    async def _close_gracefully(self) -> None:  # stop every child with its ladder
        self._state = "closing"
        for child in list(self._children.values()):
            self._request_stop(child)
        while self._children:
            await self._all_gone.park()


@asynccontextmanager
async def open_supervisor(
    name: str,
    *,
    intensity: Intensity = Intensity(),
    backoff: Backoff = Backoff(),
    on_restart: OnRestart | None = None,
) -> AsyncIterator[Supervisor]:
    """Open a one-for-one supervisor named ``name``; its children live in its own nursery.

    Leaving the body normally stops every child with its shutdown ladder; leaving by an
    exception or a cancellation cancels them at once (trio's rule: a body's exception
    comes out in an ``ExceptionGroup``). Raises :class:`SupervisorEscalation`, bare, when
    the restart intensity is exceeded, after cancelling the body and every child."""
    async with trio.open_nursery() as nursery:
        supervisor = Supervisor(name, nursery, intensity, backoff)
        supervisor.on_restart = on_restart
        try:
            yield supervisor
            await supervisor._close_gracefully()
        finally:
            if supervisor._state != "escalated":
                supervisor._state = "closing"  # reported as closed once no child is left
            nursery.cancel_scope.cancel()
    if supervisor._escalation is not None:
        raise supervisor._escalation


async def run_supervisor(
    name: str,
    *,
    children: Iterable[ChildSpec] = (),
    populate: Callable[[Supervisor], Awaitable[object]] | None = None,
    intensity: Intensity = Intensity(),
    backoff: Backoff = Backoff(),
    on_restart: OnRestart | None = None,
    task_status: trio.TaskStatus[Supervisor] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run a supervisor until cancelled, or until :meth:`Supervisor.request_close` (then
    every child is stopped with its shutdown ladder and this returns); usable as a
    :class:`ChildSpec` ``start``, with ``Supervisor.request_close`` as its ``shutdown``.

    Starts ``children`` in order, awaits ``populate(supervisor)`` (for example: start the
    monitors this node owns, read from the store), then ``task_status.started(supervisor)``;
    every incarnation does this afresh, so a restarted supervisor reloads its children.
    Raises :class:`SupervisorEscalation` past its intensity (a parent supervisor counts a
    crash), or an ``ExceptionGroup`` if a child (``ChildStartError``) or ``populate``
    fails before ``started``."""
    async with open_supervisor(
        name, intensity=intensity, backoff=backoff, on_restart=on_restart
    ) as supervisor:
        for spec in children:
            await supervisor.start_child(spec)
        if populate is not None:
            await populate(supervisor)
        task_status.started(supervisor)
        await supervisor._close_requested.wait()
