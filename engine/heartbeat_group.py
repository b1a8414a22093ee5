"""The heartbeat actors of one shard, and every ping key in memory (docs/heartbeats.md).

Each shard of the engine (:mod:`engine.shard`) supervises, beside its monitor actors, one
more child: its :class:`HeartbeatGroup`, whose incarnation loads the shard's heartbeats
from the database and runs one trio task per heartbeat that is not paused
(:func:`engine.heartbeat.run_heartbeat`) in its own nursery::

    shard-3 (supervisor, one_for_one)
    ├── mon_... (a monitor actor per child)
    └── heartbeats (this group: one child)
        └── hbt_... (a heartbeat actor per task)

Why one child for all of a shard's heartbeats rather than one child each: memory. A child of
a supervisor costs about 3 KB more than a task in a nursery (its bookkeeping, its cancel
scope, two more frames; measured with tracemalloc), and a node should hold 10,000 heartbeats
at 5 KB each (docs/heartbeats.md, Supervision). What it costs: a heartbeat actor that
crashes (a bug: it does no I/O) takes its group's other actors with it; the shard's
supervisor restarts the group with back-off and its restart intensity, and the new
incarnation reloads them from the database (status, run and last success: their deadlines
are recomputed, no ping that was acknowledged is lost, a start mark is).

**The keys.** Every heartbeat, paused or not, has a :class:`HeartbeatHandle` in the
engine's ``keys`` map (ping key to handle, shared by the shards' groups), so a ping is
found in memory without a query (:meth:`HeartbeatHandle.ping`). A paused heartbeat has
no actor: its pings go to the store as they are (recorded, status unchanged).

Commands (the engine's :meth:`HeartbeatGroup.save` and :meth:`HeartbeatGroup.remove`)
are synchronous: they close a mailbox (the actor returns once it has handed over what
it holds) and start a task. A command that arrives while the group loads is applied at
once and the load leaves that heartbeat alone; one that arrives between incarnations is
left to the next load, which reads the committed change.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import trio

from store import (
    Database,
    HeartbeatRecord,
    PingRecord,
    StoreError,
    StoreWriter,
    WritePing,
    heartbeats,
    new_id,
)

from .actor import ActorUnavailable
from .heartbeat import HeartbeatConfig, HeartbeatMessage, Ping, Retune, run_heartbeat
from .loading import load_when_available
from .mailbox import Mailbox

__all__ = ["HeartbeatGroup", "HeartbeatHandle"]


@dataclass(slots=True, eq=False)
class HeartbeatHandle:
    """A heartbeat as the engine holds it: what it keeps of its latest record, its group,
    its actor's mailbox (None while paused: no actor), and ``seen_success``, the latest
    stored success (epoch seconds) its actor was told of (its record's when it started,
    then those stored by other nodes: :meth:`HeartbeatGroup.stored_elsewhere`)."""

    config: HeartbeatConfig
    group: HeartbeatGroup
    mailbox: Mailbox[HeartbeatMessage] | None
    seen_success: float = 0.0

    @property
    def heartbeat_id(self) -> str:
        """The ``hbt_`` id."""
        return self.config.id

    async def ping(self, kind: str, source_ip: str | None) -> bool:
        """Hand a ping of ``kind`` (success, fail, start) from ``source_ip`` to the
        heartbeat's actor and wait until it is in the store's path (True), at most the
        engine's ``ping_timeout_seconds``; with the engine's ``ping_ack_committed``, until
        the batch holding it is committed (group commit: ``StoreWriter.flush``). False:
        not taken (the actor is gone or restarting, its mailbox is full, or the store did
        not take it, or commit it, in time); the sender should retry. A paused
        heartbeat's ping goes to the store directly."""
        group = self.group
        with trio.move_on_after(group.ping_timeout_seconds):
            if not await self._hand_over(kind, source_ip):
                return False
            if group.ping_ack_committed:
                try:
                    await group.writer.flush(group.ping_timeout_seconds)
                except (TimeoutError, StoreError):
                    return False
            return True
        return False

    async def _hand_over(self, kind: str, source_ip: str | None) -> bool:
        """The ping to the actor (or, paused, to the store); True once the store has it."""
        group = self.group
        mailbox = self.mailbox
        if mailbox is None:
            record = PingRecord(
                id=new_id("png"),
                heartbeat_id=self.config.id,
                kind=kind,
                created=int(time.time()),
                duration_ms=None,
                source_ip=source_ip,
            )
            await group.writer.write(WritePing(ping=record))
            return True
        message = Ping(kind, source_ip)
        try:
            mailbox.put(message)
        except (trio.WouldBlock, ActorUnavailable):
            return False
        await message.done.wait()
        return message.recorded


class HeartbeatGroup:
    """The heartbeat actors of one shard (module docstring).

    ``buckets()`` gives the buckets whose heartbeats are its own (those of its shard this
    node holds: docs/several-nodes.md, Buckets); ``keys`` is the engine's shared map of ping keys;
    ``lease_epoch(heartbeat_id)`` the lease epoch of its bucket, which an actor started
    now carries in its moves (``store.fencing``; None: nothing fenced).
    """

    def __init__(
        self,
        *,
        name: str,
        buckets: Callable[[], list[int]],
        db: Database,
        writer: StoreWriter,
        keys: dict[str, HeartbeatHandle],
        inbox_size: int,
        ping_timeout_seconds: float,
        ping_ack_committed: bool = False,
        lease_epoch: Callable[[str], int | None] | None = None,
    ) -> None:
        self.name = name
        self.lease_epoch = lease_epoch
        self.writer = writer
        self.keys = keys
        self.ping_timeout_seconds = ping_timeout_seconds
        self.ping_ack_committed = ping_ack_committed
        self.handles: dict[str, HeartbeatHandle] = {}
        self._buckets = buckets
        self._db = db
        self._inbox_size = inbox_size
        self._nursery: trio.Nursery | None = None
        self._touched: set[str] | None = None
        self._closing = trio.Event()

    def running(self) -> int:
        """Heartbeat actors running now."""
        return sum(1 for h in self.handles.values() if h.mailbox is not None)

    async def run(self, *, task_status: trio.TaskStatus[HeartbeatGroup]) -> None:
        """One incarnation: load the group's heartbeats, run their actors, report
        started (with the group), and run until :meth:`request_close` (then every actor
        stops and this returns) or cancelled.

        Raises whatever an actor raises (a bug): the shard's supervisor restarts the
        group."""
        self._closing = trio.Event()
        for handle in self.handles.values():  # an earlier incarnation's
            self._stop(handle)
            if self.keys.get(handle.config.ping_key) is handle:
                del self.keys[handle.config.ping_key]
        self.handles.clear()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery, self._touched = nursery, set()
                try:
                    await self._start_loaded()
                finally:
                    self._touched = None
                task_status.started(self)
                await self._closing.wait()
                for handle in self.handles.values():
                    self._stop(handle)
        finally:
            self._nursery = None
            for handle in self.handles.values():
                self._stop(handle)

    def request_close(self) -> None:
        """Stop every actor and end the incarnation (the graceful stop: each actor
        returns once it has handed over the ping it holds)."""
        self._closing.set()

    def save(self, record: HeartbeatRecord) -> None:
        """A heartbeat was created, updated, paused or resumed (committed): run it with
        this record, or keep only its key when paused."""
        if self._touched is not None:
            self._touched.add(record.id)
        if self._nursery is None or self._closing.is_set():
            return  # between incarnations: the next load reads the committed change
        handle = self.handles.get(record.id)
        if (
            handle is not None
            and handle.mailbox is not None
            and record.status != "paused"
            and handle.config.run_epoch == record.run_epoch
        ):
            handle.config = HeartbeatConfig.of(record, handle.config.lease_epoch)
            try:
                handle.mailbox.put(Retune(handle.config))
                return
            except (trio.WouldBlock, ActorUnavailable):
                pass  # full or gone: start it afresh with this record
        if handle is not None:
            self._stop(handle)
        self._start(record)

    def stored_elsewhere(self, heartbeat_id: str, kind: str, wall: float) -> None:
        """A ping of ``kind`` (or a success found by the reconciliation) of heartbeat
        ``heartbeat_id`` was stored at ``wall`` (epoch seconds) by another node
        (docs/several-nodes.md, Pings on any node): tell its actor, if it runs here, without
        waiting (a full mailbox drops it; the reconciliation catches the success up)."""
        handle = self.handles.get(heartbeat_id)
        if handle is None or handle.mailbox is None:
            return  # paused (the ping is stored as it is) or not ours
        try:
            handle.mailbox.put(Ping(kind, None, stored_at=wall))
        except (trio.WouldBlock, ActorUnavailable):
            return
        if kind == "success":
            handle.seen_success = max(handle.seen_success, wall)

    def remove(self, heartbeat_id: str) -> None:
        """A heartbeat was deleted (committed): stop its actor and forget its key."""
        if self._touched is not None:
            self._touched.add(heartbeat_id)
        handle = self.handles.pop(heartbeat_id, None)
        if handle is not None:
            self._stop(handle)
            if self.keys.get(handle.config.ping_key) is handle:
                del self.keys[handle.config.ping_key]

    def _start(self, record: HeartbeatRecord) -> None:
        assert self._nursery is not None
        # not Mailbox[...](...): a subscripted call costs every instance 64 bytes more
        mailbox: Mailbox[HeartbeatMessage] | None = (
            None if record.status == "paused" else Mailbox(self._inbox_size)
        )
        epoch = None if self.lease_epoch is None else self.lease_epoch(record.id)
        config = HeartbeatConfig.of(record, epoch)
        handle = HeartbeatHandle(config, self, mailbox, float(record.last_success_at or 0))
        self.handles[record.id] = handle
        self.keys[config.ping_key] = handle
        if mailbox is not None:
            self._nursery.start_soon(run_heartbeat, record, mailbox, self.writer, config)

    @staticmethod
    def _stop(handle: HeartbeatHandle) -> None:
        if handle.mailbox is not None:
            for message in handle.mailbox.close():
                if isinstance(message, Ping):
                    message.settle(False)

    async def _start_loaded(self) -> None:
        """Load the heartbeats and start the group's own (a function of its own, so the
        list of everything loaded is not kept in the incarnation's frame)."""
        for record in await load_when_available(self._load, self.name):
            touched = self._touched
            if touched is not None and record.id not in touched:
                self._start(record)

    async def _load(self) -> list[HeartbeatRecord]:
        return await self._db.run(heartbeats.load_heartbeats, self._buckets())
