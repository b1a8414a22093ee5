"""The heartbeat actor: one trio task per heartbeat that is not paused, owning its status
and its deadline (docs/heartbeats.md).

A heartbeat is a job that calls us: its actor waits for pings in its
:class:`~engine.mailbox.Mailbox` until its deadline (trio clock: ``trio.move_on_at``, so
``MockClock`` drives its tests). Rules (docs/heartbeats.md, States):

* **success** (``/ping/<key>``): the heartbeat is ``up``; the deadline becomes now +
  ``period_seconds`` + ``grace_seconds``.
* **fail** (``/ping/<key>/fail``): ``down`` at once; no deadline while down.
* **start** (``/ping/<key>/start``): marks a job's start; the next success or fail
  records its duration (``duration_ms``, milliseconds, on that ping). No status change;
  the deadline does not move.
* **no success ping** until the deadline: ``down``. A ``pending`` heartbeat (created or
  resumed, never pinged since) has no deadline: like Healthchecks.io's new checks, it
  cannot go down before its first ping, only by a ``/fail``.

Each ping becomes a :class:`~store.PingRecord` handed to the store actor with the move it
caused (one message, one transaction there: the move's incident and events with it);
the ping's sender is told once the store has it (:class:`Ping`'s ``done``), which is
when its HTTP answer may go. A move the deadline causes goes to the store alone.

Restarts: the status, ``run_epoch`` and ``last_success_at`` come from the stored record
(:func:`run_heartbeat`); the deadline of an ``up`` heartbeat is recomputed from
``last_success_at``, so a restart neither forgives a silent job nor blames a punctual
one. A start mark lives in memory only: a restart between a start and its success
loses that duration (the success is recorded, ``duration_ms`` null).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import structlog
import trio

from store import (
    HeartbeatChange,
    HeartbeatRecord,
    PingRecord,
    StoreWriter,
    WritePing,
    new_id,
    pings,
)

from .mailbox import Mailbox

__all__ = ["PING_KINDS", "HeartbeatConfig", "HeartbeatState", "Ping", "Retune", "run_heartbeat"]

log = structlog.get_logger("uptrio.engine")

PING_KINDS = ("success", "fail", "start")
"""The kinds of ping (docs/heartbeats.md, The ping endpoints)."""


@dataclass(slots=True, eq=False)
class Ping:
    """A ping to hand to the store: ``kind`` (success, fail, start), the sender's
    address; ``done`` is set once the actor handed it to the store (``recorded`` True)
    or gave it up (``recorded`` False: the actor stopped first).

    ``stored_at`` (epoch seconds) marks a ping another node received and stored already
    (docs/several-nodes.md, Pings on any node; ``store.notify``), or the stored
    ``last_success_at`` the reconciliation found newer than what the actor knows: the actor
    applies it as of that time and hands only the move it causes to the store. A stored
    success older than the actor's latest is ignored (unless the heartbeat is
    ``pending``)."""

    kind: str
    source_ip: str | None
    done: trio.Event = field(default_factory=trio.Event)
    recorded: bool = False
    stored_at: float | None = None

    def settle(self, recorded: bool) -> None:
        """Tell the sender: the ping is in the store's path (True) or was not taken."""
        self.recorded = recorded
        self.done.set()


@dataclass(frozen=True, slots=True)
class HeartbeatConfig:
    """What the engine keeps of a heartbeat's record: no more than its actor and its ping
    key need (the engine holds one per heartbeat; the name, metadata and times of the
    full record cost some 300 bytes more). Periods in seconds."""

    id: str
    ping_key: str
    period_seconds: int
    grace_seconds: int
    run_epoch: int
    paused_until: int | None = None
    """When (epoch seconds) a maintenance window with ``pause_checks`` covering it ends,
    or None: until then no deadline takes it down (docs/maintenance.md, "Paused
    checks"); after it, it has a whole period and grace to ping."""
    lease_epoch: int | None = None
    """The lease epoch of its bucket when its actor started (the fence every move it hands
    to the store carries: docs/several-nodes.md, Heartbeat fencing; ``store.fencing``), or
    None: not fenced (a lone engine)."""

    @classmethod
    def of(cls, record: HeartbeatRecord, lease_epoch: int | None = None) -> HeartbeatConfig:
        """The config of ``record``, its moves fenced at ``lease_epoch`` (None: not)."""
        return cls(
            record.id,
            record.ping_key,
            record.period_seconds,
            record.grace_seconds,
            record.run_epoch,
            record.maintenance_paused_until,
            lease_epoch,
        )


@dataclass(frozen=True, slots=True)
class Retune:
    """The heartbeat was updated (committed; same run): take its new settings."""

    config: HeartbeatConfig


HeartbeatMessage = Ping | Retune


class HeartbeatState:
    """One heartbeat's status and deadline, moved by pings and time (module docstring).

    Pure but for new ids: times come in as arguments (``now``: trio clock seconds;
    ``wall``: epoch seconds), so the rules are tested without a clock. ``deadline`` is
    trio clock seconds (``math.inf``: none).
    """

    __slots__ = ("config", "deadline", "last_success", "offset", "started", "status")

    def __init__(
        self,
        record: HeartbeatRecord,
        now: float,
        wall: float,
        config: HeartbeatConfig | None = None,
    ) -> None:
        self.config = HeartbeatConfig.of(record) if config is None else config
        self.offset = now - wall
        """The trio clock minus the wall clock, seconds (a pause's end is wall time)."""
        # the literals, not the record's own strings: one object for every heartbeat
        self.status = {"up": "up", "down": "down"}.get(record.status, "pending")
        self.started: float | None = None
        # the latest success on the trio clock (from the stored one, epoch seconds)
        success_at = record.last_success_at
        self.last_success = now if success_at is None else now - (wall - success_at)
        self.deadline = self._deadline()

    def _deadline(self) -> float:
        if self.status != "up":
            return math.inf
        return self.last_success + self.config.period_seconds + self.config.grace_seconds

    def ping(
        self, kind: str, source_ip: str | None, now: float, wall: float
    ) -> tuple[PingRecord, HeartbeatChange | None]:
        """A ping of ``kind`` at ``now``: its record, and the move it causes (or None)."""
        duration_ms = None
        if kind == "start":
            self.started = now
        elif self.started is not None:
            duration_ms = round((now - self.started) * 1000, 3)
            self.started = None
        ping = PingRecord(
            id=new_id("png"),
            heartbeat_id=self.config.id,
            kind=kind,
            created=int(wall),
            duration_ms=duration_ms,
            source_ip=source_ip,
        )
        change = None
        if kind == "success":
            self.last_success = now
            change = self._move("up", wall, "")
        elif kind == "fail":
            change = self._move("down", wall, pings.FAIL_DESCRIPTION)
        return ping, change

    def deadline_passed(self, wall: float) -> HeartbeatChange | None:
        """The deadline came without a success ping: the move into ``down``; or, inside
        a maintenance window that pauses its checks, no move and a new deadline a period
        and grace after the window's end (``config.paused_until``)."""
        config = self.config
        late = config.period_seconds + config.grace_seconds
        if config.paused_until is not None:
            resumed = config.paused_until + self.offset + late  # on the trio clock
            if self.deadline < resumed:
                self.deadline = resumed
                return None
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(wall - late))
        return self._move(
            "down",
            wall,
            f"No ping for {late} s (period {config.period_seconds} s + grace "
            f"{config.grace_seconds} s) since the last success ping, at {since}.",
        )

    def retune(self, config: HeartbeatConfig) -> None:
        """New settings of the same run: the deadline follows the new period and grace
        (it may lie in the past: then the heartbeat goes down at once)."""
        self.config = config
        self.deadline = self._deadline()

    def _move(self, to: str, wall: float, detail: str) -> HeartbeatChange | None:
        before = self.status
        self.status = to
        self.deadline = self._deadline()
        if before == to:
            return None
        log.info(
            "heartbeat status changed", heartbeat=self.config.id, from_status=before, to_status=to
        )
        return HeartbeatChange(
            heartbeat_id=self.config.id,
            move_id=new_id("hbm"),
            from_status=before,
            to_status=to,
            run_epoch=self.config.run_epoch,
            created=int(wall),
            detail=detail,
            lease_epoch=self.config.lease_epoch,
        )


async def run_heartbeat(
    record: HeartbeatRecord,
    mailbox: Mailbox[HeartbeatMessage],
    writer: StoreWriter,
    config: HeartbeatConfig | None = None,
) -> None:
    """Run one heartbeat (module docstring) until its mailbox is closed (pause, delete,
    stop); what is still in it is given back to the closer, who settles the pings.
    Hands pings and moves to ``writer`` (the store actor), waiting when its inbox is full
    (back-pressure; pings then wait in the mailbox or are refused when it is full).

    ``config`` is the record's :class:`HeartbeatConfig` when the caller keeps one (then
    both share it). Raises only for bugs (its group's supervisor restarts it);
    ``trio.Cancelled`` propagates (a ping taken but not yet handed over is settled as not
    recorded).

    Memory (docs/heartbeats.md, Supervision: a node holds 10,000 of these waiting): one
    cancel scope per deadline, not per message (a success ping moves the scope's deadline),
    so a ping leaves no new long-lived object behind; and nothing of a handled message stays
    referenced while the actor waits for the next.
    """
    state = HeartbeatState(record, trio.current_time(), time.time(), config)
    del record, config  # the state holds what it needs
    while True:
        unwritten: _Unwritten | None = None
        try:
            if state.deadline == math.inf:
                unwritten = _handle(state, await mailbox.receive(), writer)
            else:
                with trio.move_on_at(state.deadline) as waiting:
                    # Only a ping the store cannot take at once leaves the scope early,
                    # so that waiting for room there is never cut short by the deadline.
                    while unwritten is None and state.deadline != math.inf:
                        unwritten = _handle(state, await mailbox.receive(), writer)
                        waiting.deadline = state.deadline
                if waiting.cancelled_caught:  # the deadline came
                    change = state.deadline_passed(time.time())
                    unwritten = _Unwritten(None, change, None)
        except trio.EndOfChannel:
            return
        if unwritten is not None:
            await unwritten.hand_over(writer)


@dataclass(slots=True)
class _Unwritten:
    """A ping or a move the store's inbox had no room for; its ping message, if any,
    waits to be settled."""

    ping: PingRecord | None
    change: HeartbeatChange | None
    message: Ping | None

    async def hand_over(self, writer: StoreWriter) -> None:
        """Wait for room in the store's inbox, then settle the ping message (not
        recorded when this is cancelled first)."""
        handed = False
        try:
            if self.ping is not None or self.change is not None:
                await writer.write(WritePing(ping=self.ping, change=self.change))
            handed = True
        finally:
            if self.message is not None:
                self.message.settle(handed)


def _handle(
    state: HeartbeatState, message: HeartbeatMessage, writer: StoreWriter
) -> _Unwritten | None:
    """Apply ``message`` to the state and hand what it causes to the store; what the
    store had no room for is returned, to be handed over outside the deadline's scope."""
    if isinstance(message, Retune):
        state.retune(message.config)
        return None
    now, wall = trio.current_time(), time.time()
    if message.stored_at is not None:  # stored by another node: only the move is ours
        now, wall = now - max(0.0, wall - message.stored_at), message.stored_at
        if message.kind == "success" and state.status != "pending" and now <= state.last_success:
            message.settle(True)
            return None  # no news
        _, change = state.ping(message.kind, message.source_ip, now, wall)
        if change is not None and not writer.write_nowait(WritePing(ping=None, change=change)):
            return _Unwritten(None, change, message)
        message.settle(True)
        return None
    ping, change = state.ping(message.kind, message.source_ip, now, wall)
    if not writer.write_nowait(WritePing(ping=ping, change=change)):
        return _Unwritten(ping, change, message)
    message.settle(True)
    return None
