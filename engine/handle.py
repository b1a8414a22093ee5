"""The engine's one handle, :class:`EngineHandle`, stable while the engine child of the
root supervisor restarts (an escalation, or ``uptrio supervisors restart engine``); the
store's counterpart is ``store.StoreActor`` (``docs/architecture.md``).

The rest of the service reaches the engine through two verbs only, which the
composition root hands to whoever needs them (the API's handlers, the listener):
:meth:`EngineHandle.apply`, the desired state of a resource, and
:meth:`EngineHandle.ping`, the actor a ping key belongs to. A change given to the handle
waits for a running incarnation and is applied again by the next one if the engine
restarted under it, so a change that committed always reaches the engine that runs its
resource (a reload reads the committed change in any case).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import trio

from .actor import ActorUnavailable
from .engine import Engine

__all__ = ["EngineHandle", "PingTarget"]


class PingTarget(Protocol):
    """What a ping key leads to: a heartbeat's actor (``engine.kinds.heartbeats``)."""

    async def ping(self, kind: str, source_ip: str | None) -> bool:
        """Record a ping of ``kind`` from ``source_ip``; True once it is in the store's
        path (or committed, with ``--ping-ack committed``), False: not taken, retry."""


class EngineHandle:
    """The engine as the rest of the service sees it (module docstring).

    Attributes:
        current: the running incarnation, or None between incarnations.
    """

    def __init__(self, wait_seconds: float = 10.0) -> None:
        """``wait_seconds``: how long a change waits for a running incarnation, seconds."""
        self.current: Engine | None = None
        self._wait_seconds = wait_seconds
        self._changed = trio.lowlevel.ParkingLot()

    async def run(
        self,
        start: Callable[..., Awaitable[None]],
        *,
        task_status: trio.TaskStatus[Engine] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """One incarnation: ``await start(task_status=...)`` (``run_engine`` with its
        arguments bound), publishing the :class:`~engine.Engine` it reports until it ends.

        Raises whatever ``start`` raises (a supervisor then restarts the incarnation).
        """
        handle = self

        class _Started:
            def started(self, value: Engine) -> None:
                handle._publish(value)
                task_status.started(value)

        try:
            await start(task_status=_Started())
        finally:
            self._publish(None)

    @classmethod
    def running(cls, engine: Engine) -> EngineHandle:
        """A handle on an incarnation already running (tests, embedders that run
        :func:`~engine.run_engine` themselves)."""
        handle = cls()
        handle._publish(engine)
        return handle

    def _publish(self, engine: Engine | None) -> None:
        self.current = engine
        self._changed.unpark_all()

    def state(self) -> str:
        """``running`` or ``starting`` (for ``/readyz``)."""
        return "running" if self.current is not None else "starting"

    async def _running(self) -> Engine:
        """The running incarnation, waiting up to ``wait_seconds`` for one.

        Raises:
            engine.ActorUnavailable: none runs within ``wait_seconds``.
        """
        with trio.move_on_after(self._wait_seconds):
            while self.current is None:
                await self._changed.park()
        engine = self.current
        if engine is None:
            raise ActorUnavailable("the engine is not running (restarting?)")
        return engine

    async def apply(self, resource_id: str, record: Any) -> None:
        """The desired state of ``resource_id``: its record (committed), or None (deleted,
        or nothing to run). Returns once in effect on the running incarnation: started,
        reconfigured or stopped as the record asks (a paused one stops).

        Raises:
            engine.ActorUnavailable: no running engine within ``wait_seconds``, or it did
                not answer.
        """
        engine = await self._running()
        try:
            await engine.apply(resource_id, record)
        except ActorUnavailable:
            if self.current is None or self.current is engine:
                raise
            await self.current.apply(resource_id, record)  # it restarted: the new one

    async def ping(self, ping_key: str) -> PingTarget | None:
        """The actor pings of ``ping_key`` go to, in memory (no query, no checkpoint
        when the engine runs), or None: no resource of this node has that key.

        Raises:
            engine.ActorUnavailable: no running engine within ``wait_seconds``.
        """
        engine = self.current
        if engine is None:
            engine = await self._running()
        for kind in engine.kinds:
            find: Callable[[str], PingTarget | None] | None = getattr(kind, "find", None)
            if find is not None and (target := find(ping_key)) is not None:
                return target
        return None

    def heard(self, resource_id: str, detail: str, wall: float) -> None:
        """As :meth:`engine.Engine.heard`, on the running incarnation (none: nothing;
        the next one loads what was stored)."""
        if self.current is not None:
            self.current.heard(resource_id, detail, wall)

    def reconcile_now(self) -> None:
        """As :meth:`engine.Engine.reconcile_now` (none running: nothing; the next
        incarnation loads from the database anyway)."""
        if self.current is not None:
            self.current.reconcile_now()
