"""Tests of ask/tell (engine.actor).

Rules of this module: no I/O; ``autojump_clock`` for everything timed, so a test that
"waits" 5 s finishes at once and a hang shows up as a clock jump or a ``fail_after``;
every async test guards itself with ``trio.fail_after`` inside (synchronous tests
cannot wait, so they need none).
"""

from __future__ import annotations

import gc
from dataclasses import dataclass

import pytest
import trio
import trio.testing

from engine.actor import (
    ActorRef,
    ActorUnavailable,
    AskTimeout,
    Reply,
    answer,
    ask,
    open_inbox,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Add:
    amount: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Get:
    reply: Reply[int]


@dataclass(frozen=True, slots=True, kw_only=True)
class Crash:
    reply: Reply[int]

    @classmethod
    def of(cls, reply: Reply[int]) -> Crash:
        return cls(reply=reply)


Message = Add | Get | Crash


def get(reply: Reply[int]) -> Get:
    """``make_message`` for :func:`ask`: a def (or an annotated target) lets mypy infer
    the reply type, which a bare lambda cannot give it."""
    return Get(reply=reply)


async def run_counter(*, size: int = 8, task_status: trio.TaskStatus[ActorRef[Message]]) -> None:
    """A small actor: adds, answers its total, crashes on request while holding a reply."""
    ref, inbox = open_inbox[Message](size)
    total = 0
    with inbox:
        task_status.started(ref)
        async for message in inbox:
            match message:
                case Add(amount=amount):
                    total += amount
                case Get(reply=reply):
                    with reply:
                        answer(reply, total)
                case Crash(reply=reply):
                    with reply:
                        raise RuntimeError("counter crashed")


async def test_tell_then_ask_returns_the_actors_answer() -> None:
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            ref: ActorRef[Message] = await nursery.start(run_counter)
            await ref.tell(Add(amount=2))
            ref.tell_nowait(Add(amount=3))
            total: int = await ask(ref, lambda reply: Get(reply=reply), timeout_seconds=1)
            assert total == 5
            nursery.cancel_scope.cancel()


async def test_tell_applies_back_pressure(autojump_clock: trio.testing.MockClock) -> None:
    with trio.fail_after(5):
        ref, inbox = open_inbox[int](1)
        sent: list[int] = []

        async def producer() -> None:
            for number in range(3):
                await ref.tell(number)
                sent.append(number)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(producer)
            await trio.testing.wait_all_tasks_blocked()
            assert sent == [0]  # one buffered, the second tell waits for room
            assert inbox.statistics().tasks_waiting_send == 1
            assert await inbox.receive() == 0
            await trio.testing.wait_all_tasks_blocked()
            assert sent == [0, 1]
            assert [await inbox.receive(), await inbox.receive()] == [1, 2]


def test_tell_nowait_raises_would_block_when_full() -> None:
    ref, inbox = open_inbox[int](1)
    with inbox:
        ref.tell_nowait(1)
        with pytest.raises(trio.WouldBlock):
            ref.tell_nowait(2)
        assert inbox.receive_nowait() == 1


async def test_tell_to_a_closed_inbox_raises_actor_unavailable() -> None:
    with trio.fail_after(5):
        ref, inbox = open_inbox[int](1)
        assert ref.is_open()
        inbox.close()
        assert not ref.is_open()
        with pytest.raises(ActorUnavailable):
            await ref.tell(1)
        with pytest.raises(ActorUnavailable):
            ref.tell_nowait(1)
        with pytest.raises(ActorUnavailable):
            await ask(ref, lambda reply: 0, timeout_seconds=1)


def test_open_inbox_rejects_a_negative_size() -> None:
    with pytest.raises(ValueError):
        open_inbox[int](-1)


async def test_ask_times_out(autojump_clock: trio.testing.MockClock) -> None:
    with trio.fail_after(60):
        ref, inbox = open_inbox[Get](1)
        with inbox:
            start = trio.current_time()
            with pytest.raises(AskTimeout):
                await ask(ref, get, timeout_seconds=5)
            assert trio.current_time() - start == pytest.approx(5)
            message = inbox.receive_nowait()  # the actor holds the message, unanswered
            assert answer(message.reply, 1) is False  # the asker is gone: not an error


async def test_ask_timeout_covers_waiting_for_room(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(60):
        ref, inbox = open_inbox[Get](0)
        with inbox, pytest.raises(AskTimeout):
            await ask(ref, get, timeout_seconds=2)


async def test_ask_gets_actor_unavailable_when_actor_dies(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(60):
        start = trio.current_time()
        with pytest.raises(ExceptionGroup) as crashed:
            async with trio.open_nursery() as nursery:
                ref: ActorRef[Message] = await nursery.start(run_counter)
                with pytest.raises(ActorUnavailable) as unavailable:
                    await ask(ref, Crash.of, timeout_seconds=30)
                assert not isinstance(unavailable.value, AskTimeout)
        assert crashed.group_contains(RuntimeError, match="counter crashed")
        assert trio.current_time() == start  # freed at once, not by the timeout


async def test_ask_gets_actor_unavailable_when_message_is_dropped_unanswered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(60):
        ref, inbox = open_inbox[Get](4)

        async def careless_actor() -> None:
            message = await inbox.receive()
            del message  # neither answered nor closed: garbage
            gc.collect()

        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(careless_actor)
            with pytest.raises(ActorUnavailable) as unavailable:
                await ask(ref, get, timeout_seconds=30)
        assert not isinstance(unavailable.value, AskTimeout)
        assert trio.current_time() == start


async def test_ask_gets_actor_unavailable_when_actor_dies_with_the_message_queued(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(60):
        ref, inbox = open_inbox[Get](4)

        async def dying_actor() -> None:
            await trio.sleep(1)
            inbox.close()  # a crash unwinding ``with inbox:``; queued messages are dropped
            gc.collect()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(dying_actor)
            with pytest.raises(ActorUnavailable) as unavailable:
                await ask(ref, get, timeout_seconds=30)
        assert not isinstance(unavailable.value, AskTimeout)
        assert trio.current_time() == pytest.approx(1)


async def test_ask_returns_an_answer_given_before_the_reply_is_dropped() -> None:
    with trio.fail_after(5):
        ref, inbox = open_inbox[Get](4)

        async def quick_actor() -> None:
            message = await inbox.receive()
            message.reply.send_nowait(7)  # answered but never closed, then dropped
            del message
            gc.collect()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(quick_actor)
            assert await ask(ref, get, timeout_seconds=30) == 7


def test_answer_reports_a_second_answer_as_undelivered() -> None:
    reply, receive = trio.open_memory_channel[int](1)
    assert answer(reply, 1) is True
    assert answer(reply, 2) is False
    assert receive.receive_nowait() == 1
    with pytest.raises(trio.EndOfChannel):
        receive.receive_nowait()
