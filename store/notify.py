"""Changes told to every node (docs/several-nodes.md, Changes made through another node): Postgres
``NOTIFY`` on one channel, :data:`CHANNEL`, and one dedicated connection that
``LISTEN``\\s to it (:func:`open_listener`).

What is told (a notification's payload, a few dozen bytes):

* ``<id>``: monitor or heartbeat ``<id>`` (``mon_``/``hbt_``) was created, updated,
  paused, resumed or deleted (:func:`notify_change`, written by :mod:`store.evented`
  inside the change's own transaction, so it is delivered exactly when the change
  commits, and never for one rolled back);
* ``<id> <kind> <seconds>``: a ping of heartbeat ``<id>`` (``success``, ``fail``,
  ``start``) received by a node that does not run its actor was stored at epoch
  ``<seconds>`` (a float) (:func:`store_ping_elsewhere`);
* ``leases <node>``: node ``<node>`` registered or gave buckets back
  (:func:`notify_leases`, from :mod:`store.leases`): the others renew at once, so a
  joining node learns its share and a bucket given back is claimed without waiting for
  the next renewal (the handover leaves no monitor unprobed for long).

Postgres delivers a notification to every session listening when the transaction
commits; one that arrives while a listener is disconnected is lost (``NOTIFY`` keeps
nothing), so a listener is a fast path only: the engine's reconciliation, run on
every (re)connection and every 5 s, is what guarantees the change arrives.

The listening connection is not one of the pool's (a pooled connection is shared and
``LISTEN`` is per session). It runs on the asyncio side of trio-asyncio, through a
:class:`~store.bridge.Bridge` of its own, so each wait on it has a deadline that holds
whatever the server does (a crossing abandoned on its deadline terminates the
connection). asyncpg calls the listener's callback on the loop, which trio-asyncio runs
inside the trio run: the callback puts the payload in a trio memory channel.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg
import trio

from .bridge import Bridge, Work
from .database import Connection
from .errors import DatabaseUnavailable
from .pings import write_ping_batch
from .records import PingRecord

__all__ = [
    "APPLICATION",
    "CHANNEL",
    "Listener",
    "Notification",
    "notify_change",
    "notify_leases",
    "notify_resources",
    "open_listener",
    "parse_notification",
    "store_ping_elsewhere",
]

CHANNEL = "uptrio_changes"
"""The one ``NOTIFY`` channel of the service (docs/several-nodes.md)."""

APPLICATION = "uptrio-listener"
"""The listening connection's ``application_name`` (as ``pg_stat_activity`` shows it)."""


async def notify_change(connection: Connection, resource_id: str) -> None:
    """Tell every node that monitor or heartbeat ``resource_id`` changed; call inside the
    change's transaction (delivered when it commits). Asyncio side."""
    await connection.execute("SELECT pg_notify($1, $2)", CHANNEL, resource_id)


async def notify_resources(connection: Connection, resource_ids: Iterable[str]) -> None:
    """Tell every node that each of ``resource_ids`` (``mon_``/``hbt_`` ids) changed
    (one ``NOTIFY`` each, in one statement; :func:`notify_change`): their engines read them
    again and start or stop pausing their checks. Inside the change's transaction."""
    ids = sorted(set(resource_ids))
    if ids:
        await connection.execute(
            "SELECT pg_notify($1, id) FROM unnest($2::text[]) AS id", CHANNEL, ids
        )


async def notify_leases(connection: Connection, node: str) -> None:
    """Tell every node that node ``node`` registered or gave buckets back; call inside
    that transaction. Asyncio side."""
    await connection.execute("SELECT pg_notify($1, $2)", CHANNEL, f"leases {node}")


async def store_ping_elsewhere(connection: Connection, ping: PingRecord, wall: float) -> bool:
    """Store ``ping``, received by a node that does not run its heartbeat's actor, as the
    owner would (:func:`store.pings.write_ping_batch`: the row, ``last_ping_at``,
    ``last_success_at``), and tell the owner (``<id> <kind> <wall>``, ``wall`` epoch
    seconds, a float); no status move here: the owner's actor decides those. Call inside
    a transaction. False (nothing stored, nothing told) when the heartbeat is gone."""
    if not await write_ping_batch(connection, [ping], ()):
        return False
    payload = f"{ping.heartbeat_id} {ping.kind} {wall:.3f}"
    await connection.execute("SELECT pg_notify($1, $2)", CHANNEL, payload)
    return True


@dataclass(frozen=True, slots=True)
class Notification:
    """A parsed payload: ``resource_id`` changed (``kind`` None), or was pinged with
    ``kind`` at ``wall`` (epoch seconds) on another node; or (``leases_of`` set, no
    resource) node ``leases_of`` registered or gave buckets back."""

    resource_id: str
    kind: str | None = None
    wall: float = 0.0
    leases_of: str | None = None


def parse_notification(payload: str) -> Notification | None:
    """The :class:`Notification` of ``payload``, or None when it is not one of ours."""
    parts = payload.split(" ")
    if len(parts) == 1 and parts[0]:
        return Notification(parts[0])
    if len(parts) >= 2 and parts[0] == "leases":
        return Notification("", leases_of=payload[len("leases ") :])
    if len(parts) == 3:
        try:
            wall = float(parts[2])
        except ValueError:
            return None
        if math.isfinite(wall):
            return Notification(parts[0], parts[1], wall)
    return None


_BROKEN = (
    OSError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
)
"""What asyncpg raises on a connection that broke or was ended (the server's
termination may leave its protocol mid-operation: ``InternalClientError``)."""


class Listener:
    """One connection listening on :data:`CHANNEL` (made by :func:`open_listener`).

    Attributes:
        overflowed: notifications were dropped because the queue was full (the caller
            then reconciles); reset by the caller.
    """

    def __init__(self, connection: Any, bridge: Bridge, capacity: int) -> None:
        self._connection = connection
        self._bridge = bridge
        self._send, self._receive = trio.open_memory_channel[str](capacity)
        self.overflowed = False
        self.lost = False

    def _on_notification(self, _connection: Any, _pid: int, _channel: str, payload: str) -> None:
        try:
            self._send.send_nowait(payload)
        except trio.WouldBlock:
            self.overflowed = True
        except trio.ClosedResourceError:
            pass

    def _on_termination(self, _connection: Any) -> None:
        self.lost = True
        self._send.close()

    async def receive(self) -> list[str]:
        """Wait for the next payloads (at least one, every one queued).

        Raises:
            store.DatabaseUnavailable: the connection ended.
        """
        try:
            payloads = [await self._receive.receive()]
        except trio.EndOfChannel:
            raise DatabaseUnavailable("the listening connection ended") from None
        while True:
            try:
                payloads.append(self._receive.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel):
                return payloads

    async def check(self, deadline_seconds: float) -> None:
        """Prove the connection alive: ``SELECT 1`` within ``deadline_seconds`` seconds.

        Raises:
            store.DatabaseUnavailable: no answer in time, or the connection broke.
        """
        connection = self._connection

        async def select_one(work: Work) -> None:
            work.connection = connection
            await connection.fetchval("SELECT 1")

        if self.lost:
            raise DatabaseUnavailable("the listening connection ended")
        try:
            await self._bridge.cross(select_one, deadline_seconds)
        except _BROKEN as exc:
            raise DatabaseUnavailable(f"the listening connection broke: {exc!r}") from exc


@asynccontextmanager
async def open_listener(
    url: str, *, deadline_seconds: float, capacity: int = 10_000
) -> AsyncIterator[Listener]:
    """Connect to ``url`` and ``LISTEN`` on :data:`CHANNEL`, both within
    ``deadline_seconds`` seconds; close the connection on exit (shielded, bounded by the
    same deadline). At most ``capacity`` payloads wait; past that they are dropped
    (:attr:`Listener.overflowed`). Must run inside ``trio_asyncio.open_loop()``.

    Raises:
        store.DatabaseUnavailable: the server could not be reached or refused.
    """
    bridge = Bridge()
    holder: list[Listener] = []

    async def connect(work: Work) -> Any:
        connection = await asyncpg.connect(
            url, timeout=deadline_seconds, server_settings={"application_name": APPLICATION}
        )
        work.connection = connection
        listener = Listener(connection, bridge, capacity)
        holder.append(listener)
        connection.add_termination_listener(listener._on_termination)
        await connection.add_listener(CHANNEL, listener._on_notification)
        return connection

    try:
        connection = await bridge.cross(connect, deadline_seconds)
    except _BROKEN as exc:
        raise DatabaseUnavailable(f"could not listen: {exc!r}") from exc

    async def close(work: Work) -> None:
        work.connection = connection
        await connection.close()

    try:
        yield holder[0]
    finally:
        with trio.CancelScope(shield=True):
            with contextlib.suppress(DatabaseUnavailable, *_BROKEN):
                await bridge.cross(close, deadline_seconds)
            await bridge.aclose(deadline_seconds)
