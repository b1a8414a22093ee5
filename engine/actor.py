"""Actors: a trio task that owns its state and is reached only through its inbox.

An actor creates its bounded inbox with :class:`open_inbox`, hands the :class:`ActorRef`
to the world (usually through ``task_status.started(ref)``) and loops over the receive
side. Two ways to reach it:

* **tell** (:meth:`ActorRef.tell`, :meth:`ActorRef.tell_nowait`): send a message, expect
  nothing back. The inbox is bounded, so a slow actor slows its producers down
  (back-pressure) instead of growing memory.
* **ask** (:func:`ask`): send a message carrying a one-shot reply channel
  (:data:`Reply`) and wait, under a timeout in seconds, for one value. The actor answers
  with :func:`answer`. Expected outcomes (not found, already paused) are reply *values*;
  exceptions never cross tasks.

The actor side of an ask, by convention::

    case Get(reply=reply):
        with reply:  # closed on any unwind: a crash here frees the asker at once
            answer(reply, self.state)

Error hierarchy::

    ActorUnavailable      the inbox is closed, or the actor closed or dropped the reply
     └── AskTimeout       no reply within ``timeout_seconds``

An asker is freed at once, with :class:`ActorUnavailable`, when the reply channel is
closed unanswered *or* dropped unanswered: a message still queued in the inbox of an
actor that died is garbage, and so is its reply channel. Dropping is detected through a
``weakref.finalize`` on the reply channel (immediate on CPython's reference counting;
elsewhere at the next garbage collection, with the timeout as the backstop).
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeAlias, TypeVar

import trio

__all__ = [
    "ActorRef",
    "ActorUnavailable",
    "AskTimeout",
    "Inbox",
    "Reply",
    "answer",
    "ask",
    "open_inbox",
]

M = TypeVar("M")
M_in = TypeVar("M_in", contravariant=True)
T = TypeVar("T")

Reply: TypeAlias = trio.MemorySendChannel[T]
"""The one-shot reply channel an ask carries: buffer 1, owned by the message only."""


class ActorUnavailable(Exception):
    """The actor's inbox is closed, or it closed or dropped the reply without answering.

    Raised by :meth:`ActorRef.tell`, :meth:`ActorRef.tell_nowait` and :func:`ask`. The
    actor is gone (stopped, crashed, or between two incarnations under a supervisor); a
    caller may look the actor up again and retry.
    """


class AskTimeout(ActorUnavailable):
    """No reply arrived within the ask's ``timeout_seconds``.

    A subclass of :class:`ActorUnavailable`, so callers that only care whether they got
    an answer catch one type; callers that want to tell "slow" from "gone" catch this
    one first.
    """


class Inbox(Protocol[M_in]):
    """What an :class:`ActorRef` sends through: the send side of a trio memory channel
    (:class:`open_inbox`), or an :class:`~engine.mailbox.Mailbox` (the inbox of actors
    that are many and mostly idle: a tenth of a channel's memory)."""

    async def send(self, value: M_in, /) -> None:
        """Send, waiting for room."""

    def send_nowait(self, value: M_in, /) -> None:
        """Send now, or raise ``trio.WouldBlock``."""


@dataclass(frozen=True, slots=True)
class ActorRef(Generic[M]):
    """The address of an actor: the send side of its bounded inbox.

    Cheap to copy and share; it never closes the inbox (only the actor's own loop
    owns the receive side, and its death is what makes the ref unavailable).
    Create one with :class:`open_inbox`, or around a :class:`~engine.mailbox.Mailbox`.
    """

    inbox: Inbox[M]

    async def tell(self, message: M) -> None:
        """Send ``message``, waiting for room in the inbox (back-pressure).

        Raises:
          ActorUnavailable: the actor's inbox is closed (the actor is gone).
        """
        try:
            await self.inbox.send(message)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise ActorUnavailable(f"actor inbox is closed: {self!r}") from exc

    def tell_nowait(self, message: M) -> None:
        """Send ``message`` if the inbox has room, without waiting.

        Raises:
          trio.WouldBlock: the inbox is full; the message was not sent.
          ActorUnavailable: the actor's inbox is closed (the actor is gone).
        """
        try:
            self.inbox.send_nowait(message)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise ActorUnavailable(f"actor inbox is closed: {self!r}") from exc

    def is_open(self) -> bool:
        """Whether the actor still holds its inbox open (a snapshot, not a promise); a
        mailbox's: until it is closed."""
        inbox = self.inbox
        if isinstance(inbox, trio.MemorySendChannel):
            return inbox.statistics().open_receive_channels > 0
        return not getattr(inbox, "closed", False)


class open_inbox(tuple[ActorRef[M], trio.MemoryReceiveChannel[M]]):
    """Open a bounded inbox: ``ref, receive = open_inbox[Message](size)``.

    Written as a class, like ``trio.open_memory_channel``, so the message type can be
    given at the call site. ``size`` is the number of messages buffered before
    :meth:`ActorRef.tell` waits; 0 makes every tell wait for the actor to take the
    message. The actor owns ``receive`` and closes it (``with receive:``) when it ends.

    Raises:
      ValueError: ``size`` is negative.
    """

    def __new__(  # type: ignore[misc]  # returns a plain tuple, as trio's does
        cls, size: int
    ) -> tuple[ActorRef[M], trio.MemoryReceiveChannel[M]]:
        if size < 0:
            raise ValueError(f"inbox size must be >= 0, got {size}")
        send, receive = trio.open_memory_channel[M](size)
        return ActorRef(send), receive

    def __init__(self, size: int) -> None:
        """Typing only; the work happens in ``__new__``."""


def _cancel_soon(token: trio.lowlevel.TrioToken, scope: trio.CancelScope) -> None:
    # Runs from a weakref finalizer, which may fire in the middle of any trio code:
    # defer the cancel to the run loop through the token (safe from any context).
    with contextlib.suppress(trio.RunFinishedError):
        token.run_sync_soon(scope.cancel)


async def ask(
    ref: ActorRef[M],
    make_message: Callable[[Reply[T]], M],
    *,
    timeout_seconds: float,
) -> T:
    """Send ``make_message(reply)`` to ``ref`` and wait for one value on ``reply``.

    ``reply`` is a fresh one-shot channel (buffer 1). Only the message holds its send
    side: the asker keeps no handle, so the actor closing it (``with reply:`` on a
    crash) or dropping it unanswered frees the asker at once. The whole ask, queueing
    for room in the inbox included, runs under ``trio.fail_after(timeout_seconds)``.

    Typing: mypy infers ``T`` from ``make_message``'s parameter, which a bare lambda
    does not annotate; give the target a type (``total: int = await ask(ref, lambda
    reply: Get(reply=reply), timeout_seconds=1.0)``) or pass a def or a classmethod.

    Raises:
      AskTimeout: no reply within ``timeout_seconds`` seconds.
      ActorUnavailable: the inbox is closed, or the reply channel was closed or
        garbage-collected without an answer (the actor crashed or dropped the message).
    """
    reply_send, reply_receive = trio.open_memory_channel[T](1)
    message = make_message(reply_send)
    dropped = trio.CancelScope()
    finalizer = weakref.finalize(
        reply_send, _cancel_soon, trio.lowlevel.current_trio_token(), dropped
    )
    finalizer.atexit = False
    del reply_send  # our own reference would keep a dropped reply channel alive
    with reply_receive:
        try:
            with trio.fail_after(timeout_seconds):
                with dropped:
                    await ref.tell(message)
                    del message
                    return await reply_receive.receive()
                # The reply channel was garbage-collected; an answer may still be buffered.
                try:
                    return reply_receive.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel):
                    raise ActorUnavailable(
                        f"actor dropped the reply channel without answering: {ref!r}"
                    ) from None
        except trio.EndOfChannel:
            raise ActorUnavailable(
                f"actor closed the reply channel without answering: {ref!r}"
            ) from None
        except trio.TooSlowError:
            raise AskTimeout(f"no reply within {timeout_seconds} s from {ref!r}") from None
        finally:
            finalizer.detach()


def answer(reply: Reply[T], value: T) -> bool:
    """Send ``value`` on a one-shot ``reply`` channel and close it; never blocks.

    Returns True if the value was delivered, False if the asker is gone (it timed out
    or was cancelled) or the reply was already answered: both are normal for an actor
    and are not errors.
    """
    with reply:
        try:
            reply.send_nowait(value)
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.WouldBlock):
            return False
        return True
