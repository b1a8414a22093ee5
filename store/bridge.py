"""The crossing from trio into asyncio, with a deadline that holds whatever the server
does (docs/operations.md, A database outage).

asyncpg runs on asyncio; Uptrio runs on trio, with trio-asyncio running the asyncio loop
inside the trio run. ``trio_asyncio.aio_as_trio`` waits, when it is cancelled, until the
asyncio task has finished cancelling, and asyncpg cancels a running query with a round
trip to the server (a CancelRequest on a new connection, then the old connection's
acknowledgement) and resets a connection with another before the pool takes it back. So
a call on a server that hangs instead of refusing (its processes stopped, a network cut,
a full disk) waited for the server, not for its deadline: 14.8 s for a 2 s deadline with
Postgres stopped for 15 s.

:class:`Bridge` runs each unit of work as an asyncio task and waits for it as
trio-asyncio does (``trio.lowlevel.wait_task_rescheduled``, woken by the task's done
callback), except when that wait is cancelled (by the unit's deadline or by the caller's
own cancel scope): it then **abandons** the unit at once, with no round trip:

* the connection the unit holds (:attr:`Work.connection`) is terminated (asyncpg's
  ``Connection.terminate()``: the socket is closed; the server rolls back whatever was
  open when it notices; the pool's slot reconnects on its next use). An abandoned
  connection is never handed back to the pool in an unknown state;
* the asyncio task is cancelled.

The task then ends within a few turns of the loop (whatever it waited for failed with
the connection), but the caller does not wait for that: the bridge keeps the task, and
:meth:`Bridge.aclose`, run when the pool closes and so before the trio-asyncio loop
does, waits for every abandoned task under a deadline of its own. No asyncio task
outlives the loop (structured concurrency, one level down).

A unit of work that finished before its wait was cancelled is not abandoned: its result
is returned (the cancellation is then seen at the caller's next checkpoint).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog
import trio
import trio_asyncio

from .errors import DatabaseUnavailable

__all__ = ["Bridge", "BridgeStatistics", "Work"]

T = TypeVar("T")

log = structlog.get_logger("uptrio.store")


class Work:
    """What one unit of work holds while it runs on the asyncio side.

    Attributes:
        connection: the asyncpg connection (or pool proxy) the unit uses, set by the unit
            as soon as it has one; abandoning the unit terminates it. None while the unit
            has none (waiting for the pool, connecting).
    """

    __slots__ = ("connection",)

    def __init__(self) -> None:
        self.connection: Any = None


@dataclass(frozen=True, slots=True)
class BridgeStatistics:
    """Counters of a :class:`Bridge` since it was made.

    Attributes:
        abandoned: units of work given up on (their deadline, or their caller's cancel
            scope, came first).
        terminated: connections terminated by abandoning their unit.
        abandoned_running: abandoned units whose asyncio task has not finished yet.
    """

    abandoned: int
    terminated: int
    abandoned_running: int


class Bridge:
    """Runs asyncio units of work for trio callers; see the module docstring. One per
    pool, shared by every :class:`store.Database` view of that pool. Must be used inside
    ``trio_asyncio.open_loop()``."""

    def __init__(self) -> None:
        self._running: set[asyncio.Future[Any]] = set()
        self._abandoned = 0
        self._terminated = 0
        self._reaped: trio.Event | None = None

    def statistics(self) -> BridgeStatistics:
        """A snapshot of the counters."""
        return BridgeStatistics(self._abandoned, self._terminated, len(self._running))

    async def cross(self, fn: Callable[[Work], Awaitable[T]], deadline_seconds: float | None) -> T:
        """Run asyncio coroutine function ``fn(work)`` on the loop and return its result.

        ``deadline_seconds`` (seconds, None for none) bounds the whole unit. A cancelled
        wait (the deadline, or the caller's cancel scope) abandons the unit at once (the
        module docstring).

        Raises:
            DatabaseUnavailable: no result within ``deadline_seconds``, or the task was
                cancelled on the asyncio side.
            trio.Cancelled: the caller's cancel scope (after abandoning the unit).
            Exception: whatever ``fn`` raised.
        """
        work = Work()
        coroutine = fn(work)
        try:
            future = asyncio.ensure_future(coroutine, loop=trio_asyncio.current_loop.get())
        except BaseException:
            coroutine.close()  # type: ignore[attr-defined]  # never awaited: no warning
            raise
        waiter = trio.lowlevel.current_task()
        waiting = True

        def finished(_: object) -> None:
            if waiting:
                trio.lowlevel.reschedule(waiter)

        def abort(_: object) -> trio.lowlevel.Abort:
            nonlocal waiting
            if future.done():  # finished: `finished` is already scheduled to wake us
                return trio.lowlevel.Abort.FAILED
            waiting = False
            future.remove_done_callback(finished)
            self._abandon(future, work)
            return trio.lowlevel.Abort.SUCCEEDED

        future.add_done_callback(finished)
        if deadline_seconds is None:
            await trio.lowlevel.wait_task_rescheduled(abort)
        else:
            with trio.move_on_after(deadline_seconds) as scope:
                await trio.lowlevel.wait_task_rescheduled(abort)
            if scope.cancelled_caught:
                raise DatabaseUnavailable(
                    f"no answer from the database within {deadline_seconds} s"
                )
        waiting = False
        if future.cancelled():
            raise DatabaseUnavailable("the database call was cancelled on the asyncio side")
        return future.result()

    def _abandon(self, future: asyncio.Future[Any], work: Work) -> None:
        self._abandoned += 1
        connection = work.connection
        if connection is not None:
            try:
                connection.terminate()  # synchronous: closes the socket, no round trip
            except Exception as exc:  # a proxy already released: nothing of ours to end
                log.debug("abandoned work's connection not terminated", error=repr(exc))
            else:
                self._terminated += 1
        future.cancel()
        self._running.add(future)
        future.add_done_callback(self._reap)

    def _reap(self, future: asyncio.Future[Any]) -> None:
        self._running.discard(future)
        if not future.cancelled():
            future.exception()  # retrieved: asyncio does not log it as never retrieved
        if not self._running and self._reaped is not None:
            self._reaped.set()

    async def aclose(self, seconds: float) -> None:
        """Cancel every abandoned unit still running and wait for them, at most
        ``seconds`` seconds; those left are logged (an error: they outlive the pool)."""
        for future in list(self._running):
            future.cancel()
        with trio.move_on_after(seconds):
            while self._running:
                self._reaped = trio.Event()
                await self._reaped.wait()
        if self._running:
            log.error("abandoned database work still running", tasks=len(self._running))
