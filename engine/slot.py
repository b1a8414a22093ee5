"""The engine's restart-stable handle, :class:`EngineSlot` (the store's counterpart is
``store.StoreActor``).

The root supervisor may restart the engine child (an escalation, or ``uptrio supervisors
restart engine``); the web layer keeps one handle for the life of the process. A command
given to the slot waits for a running incarnation and is told again to the next one if
the engine restarted under it, so a mutation that committed always reaches the engine
that runs its monitor (the reload reads the committed change in any case).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from store import HeartbeatRecord, MonitorRecord

from .actor import ActorUnavailable
from .engine import Engine
from .heartbeat_group import HeartbeatHandle

__all__ = ["EngineSlot"]


class EngineSlot:
    """The engine as the web layer sees it (``web``'s ``MonitorEngine`` protocol), stable
    while the engine child restarts.

    Attributes:
        current: the running incarnation, or None between incarnations.
    """

    def __init__(self, wait_seconds: float = 10.0) -> None:
        """``wait_seconds``: how long a command waits for a running incarnation, seconds."""
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
        slot = self

        class _Started:
            def started(self, value: Engine) -> None:
                slot._publish(value)
                task_status.started(value)

        try:
            await start(task_status=_Started())
        finally:
            self._publish(None)

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

    async def _call(self, command: Callable[[Engine], Awaitable[None]]) -> None:
        engine = await self._running()
        try:
            await command(engine)
        except ActorUnavailable:
            if self.current is None or self.current is engine:
                raise
            await command(self.current)  # it restarted meanwhile: tell the new one

    async def monitor_saved(self, monitor: MonitorRecord) -> None:
        """As :meth:`engine.Engine.monitor_saved`, on the running incarnation.

        Raises:
            engine.ActorUnavailable: no running engine within ``wait_seconds``, or it did
                not answer.
        """
        await self._call(lambda engine: engine.monitor_saved(monitor))

    async def monitor_deleted(self, monitor_id: str) -> None:
        """As :meth:`engine.Engine.monitor_deleted`, on the running incarnation.

        Raises:
            engine.ActorUnavailable: as :meth:`monitor_saved`.
        """
        await self._call(lambda engine: engine.monitor_deleted(monitor_id))

    async def heartbeat_saved(self, heartbeat: HeartbeatRecord) -> None:
        """As :meth:`engine.Engine.heartbeat_saved`, on the running incarnation.

        Raises:
            engine.ActorUnavailable: as :meth:`monitor_saved`.
        """
        await self._call(lambda engine: engine.heartbeat_saved(heartbeat))

    async def heartbeat_deleted(self, heartbeat_id: str) -> None:
        """As :meth:`engine.Engine.heartbeat_deleted`, on the running incarnation.

        Raises:
            engine.ActorUnavailable: as :meth:`monitor_saved`.
        """
        await self._call(lambda engine: engine.heartbeat_deleted(heartbeat_id))

    async def find_heartbeat(self, ping_key: str) -> HeartbeatHandle | None:
        """As :meth:`engine.Engine.find_heartbeat`, on the running incarnation (waiting
        for one while the engine restarts; no wait when it runs).

        Raises:
            engine.ActorUnavailable: no running engine within ``wait_seconds``.
        """
        engine = self.current
        if engine is None:
            engine = await self._running()
        return await engine.find_heartbeat(ping_key)

    def pinged_elsewhere(self, heartbeat_id: str, kind: str, wall: float) -> None:
        """As :meth:`engine.Engine.pinged_elsewhere`, on the running incarnation (none:
        nothing; the next one loads the stored ping)."""
        if self.current is not None:
            self.current.pinged_elsewhere(heartbeat_id, kind, wall)

    def reconcile_now(self) -> None:
        """As :meth:`engine.Engine.reconcile_now` (none running: nothing; the next
        incarnation loads from the database anyway)."""
        if self.current is not None:
            self.current.reconcile_now()
