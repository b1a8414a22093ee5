"""A small inbox for actors that are many and mostly idle: heartbeat and monitor actors.

A :class:`Mailbox` does for an actor what a trio memory channel does: a bounded FIFO that
producers put messages in and one actor takes them from, parking until one arrives. It
exists for memory alone: a heartbeat actor waits for a ping a minute or a day, a monitor
actor for its next deadline, and a node holds tens of thousands of them (the goals: 4 KB a
heartbeat, 10 KB an http monitor; bench/RESULTS.md). A memory channel costs about 2 KB
before its first message (its state with a deque and two ordered dicts, two channel
objects with a set each; measured with ``bench.memory_micro``); a mailbox costs about 100
bytes (five slots and an empty list), because it serves exactly one receiver.

Putting: :meth:`Mailbox.put` (and :meth:`Mailbox.send_nowait`, the same) never waits: a
full mailbox refuses at once (:class:`trio.WouldBlock`), and whoever put the message
answers for it (a ping gets a 500 and its sender retries). :meth:`Mailbox.send` waits for
room instead (back-pressure, as a channel's ``send``): what an
:class:`~engine.actor.ActorRef`'s ``tell`` does; its parking lot is made the first time
a sender has to wait.

Closing (:meth:`Mailbox.close`) wakes the receiver with :class:`trio.EndOfChannel` and
the senders waiting for room with :class:`~engine.actor.ActorUnavailable`, and hands the
undelivered messages back to the closer, who tells their senders; a closed mailbox
refuses messages with :class:`~engine.actor.ActorUnavailable`.

Scheduling: :meth:`Mailbox.receive` and :meth:`Mailbox.send` are checkpoints like a
channel's (they yield even when they need not wait, so a busy actor cannot starve the
others), built on trio's low-level parking (``wait_task_rescheduled``, ``reschedule``,
``ParkingLot``).
"""

from __future__ import annotations

from typing import Generic, TypeVar

import trio

from .actor import ActorUnavailable

__all__ = ["Mailbox"]

M = TypeVar("M")


class Mailbox(Generic[M]):
    """A bounded single-receiver inbox (module docstring).

    Raises:
        ValueError: ``size`` below 1.
    """

    __slots__ = ("_closed", "_items", "_senders", "_size", "_waiter")

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a mailbox holds at least 1 message, not {size}")
        self._items: list[M] = []
        self._waiter: trio.lowlevel.Task | None = None
        self._closed = False
        self._size = size
        self._senders: trio.lowlevel.ParkingLot | None = None

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __len__(self) -> int:
        """Messages waiting."""
        return len(self._items)

    def put(self, message: M) -> None:
        """Add ``message`` at the back and wake the receiver; never waits.

        Raises:
            trio.WouldBlock: the mailbox is full (nothing was added).
            ActorUnavailable: it is closed (the actor is gone).
        """
        if self._closed:
            raise ActorUnavailable("the actor's mailbox is closed")
        if len(self._items) >= self._size:
            raise trio.WouldBlock
        self._items.append(message)
        self._wake()

    def send_nowait(self, message: M) -> None:
        """:meth:`put` under a channel's name (an :class:`~engine.actor.ActorRef`'s
        ``tell_nowait``). Raises as :meth:`put`."""
        self.put(message)

    async def send(self, message: M) -> None:
        """Add ``message`` at the back, waiting while the mailbox is full (a checkpoint
        either way).

        Raises:
            ActorUnavailable: it is closed, or was closed while this waited (nothing was
                added).
            trio.Cancelled: as any checkpoint (nothing was added).
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            try:
                self.put(message)
            except trio.WouldBlock:
                if self._senders is None:
                    self._senders = trio.lowlevel.ParkingLot()
                await self._senders.park()
                continue
            await trio.lowlevel.cancel_shielded_checkpoint()
            return

    def receive_nowait(self) -> M:
        """The oldest message, without waiting.

        Raises:
            trio.WouldBlock: it is empty.
            trio.EndOfChannel: it is closed.
        """
        if self._items:
            return self._take()
        if self._closed:
            raise trio.EndOfChannel
        raise trio.WouldBlock

    async def receive(self) -> M:
        """The oldest message, parking until one arrives (a checkpoint either way).

        Raises:
            trio.EndOfChannel: the mailbox is closed (messages still in it were handed
                to the closer).
            trio.Cancelled: as any checkpoint.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        while not self._items:
            if self._closed:
                raise trio.EndOfChannel
            self._waiter = trio.lowlevel.current_task()
            await trio.lowlevel.wait_task_rescheduled(self._abort)
        message = self._take()
        await trio.lowlevel.cancel_shielded_checkpoint()
        return message

    def _take(self) -> M:
        message = self._items.pop(0)
        if self._senders is not None:
            self._senders.unpark()  # room for one more
        return message

    def close(self) -> list[M]:
        """Close: the receiver gets ``EndOfChannel``, senders ``ActorUnavailable``.
        Returns the messages not delivered (oldest first); closing twice returns []."""
        self._closed = True
        undelivered, self._items = self._items, []
        self._wake()
        if self._senders is not None:
            self._senders.unpark_all()
        return undelivered

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None:
            trio.lowlevel.reschedule(waiter)

    def _abort(self, _raise_cancel: object) -> trio.lowlevel.Abort:
        self._waiter = None  # cancelled while parked: nobody waits any more
        return trio.lowlevel.Abort.SUCCEEDED
