"""A small inbox for actors that are many and mostly idle: heartbeat actors.

A :class:`Mailbox` is what a trio memory channel is to a monitor actor (engine.actor): a
bounded FIFO that producers put messages in without waiting and one actor takes them from,
parking until one arrives. It exists for memory alone: a heartbeat actor waits for a ping a
minute or a day, and a node holds tens of thousands of them (the goal: 10,000 heartbeats at
5 KB each; bench/RESULTS.md, Heartbeats). A memory channel costs about 2 KB before its first
message (its state, two channel objects, their bookkeeping; measured with tracemalloc); a
mailbox costs about 100 bytes (four slots and an empty list), because it serves exactly one
receiver and never makes a sender wait: a full mailbox refuses at once
(:class:`trio.WouldBlock`), and whoever put the message answers for it (a ping gets a 500
and its sender retries).

Closing (:meth:`Mailbox.close`) wakes the receiver with :class:`trio.EndOfChannel` and
hands the undelivered messages back to the closer, who tells their senders; a closed
mailbox refuses messages with :class:`~engine.actor.ActorUnavailable`.

Scheduling: :meth:`Mailbox.receive` is a checkpoint like a channel's receive (it yields
even when a message waits, so a busy actor cannot starve the others), built on trio's
low-level parking (``wait_task_rescheduled``, ``reschedule``).
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

    __slots__ = ("_closed", "_items", "_size", "_waiter")

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a mailbox holds at least 1 message, not {size}")
        self._items: list[M] = []
        self._waiter: trio.lowlevel.Task | None = None
        self._closed = False
        self._size = size

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
        message = self._items.pop(0)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return message

    def close(self) -> list[M]:
        """Close: the receiver gets ``EndOfChannel``, senders ``ActorUnavailable``.
        Returns the messages not delivered (oldest first); closing twice returns []."""
        self._closed = True
        undelivered, self._items = self._items, []
        self._wake()
        return undelivered

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None:
            trio.lowlevel.reschedule(waiter)

    def _abort(self, _raise_cancel: object) -> trio.lowlevel.Abort:
        self._waiter = None  # cancelled while parked: nobody waits any more
        return trio.lowlevel.Abort.SUCCEEDED
