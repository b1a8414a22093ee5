"""Tests of the one-for-one supervisor (engine.supervisor).

Rules of this module: no I/O, so every async test runs on ``autojump_clock``:
back-offs and periods of minutes pass at once and times are exact; every async test
guards itself with ``trio.fail_after`` inside (virtual seconds). Times are read relative
to the test's start (:class:`Log`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st
from trio.testing import MockClock

from engine.actor import ActorRef, open_inbox
from engine.supervisor import (
    Backoff,
    ChildInfo,
    ChildSpec,
    ChildStartError,
    Intensity,
    RestartType,
    Supervisor,
    SupervisorClosed,
    SupervisorEscalation,
    open_supervisor,
    run_supervisor,
)

FIXED = Backoff(min_seconds=1.0, max_seconds=8.0, random_factor=0.0)


class Log:
    """Start and cancellation times of a child's incarnations, in seconds from creation."""

    def __init__(self) -> None:
        self.origin = trio.current_time()
        self.starts: list[float] = []
        self.cancels: list[float] = []

    def now(self) -> float:
        return trio.current_time() - self.origin

    async def crash_after(self, seconds: float, *, task_status: trio.TaskStatus[int]) -> None:
        """Start, report started(number of starts), crash ``seconds`` later."""
        self.starts.append(self.now())
        task_status.started(len(self.starts))
        await trio.sleep(seconds)
        raise ValueError(f"crash {len(self.starts)}")

    async def run_forever(self, *, task_status: trio.TaskStatus[int]) -> None:
        self.starts.append(self.now())
        task_status.started(len(self.starts))
        try:
            await trio.sleep_forever()
        finally:
            self.cancels.append(self.now())

    async def run_with_nursery(self, *, fail: bool, task_status: trio.TaskStatus[None]) -> None:
        """A child with a nursery of its own: its cancellation arrives as a group."""

        async def helper() -> None:
            await trio.sleep(1)
            if fail:
                raise ValueError("helper failed")
            await trio.sleep_forever()

        self.starts.append(self.now())
        async with trio.open_nursery() as nursery:
            nursery.start_soon(helper)
            nursery.start_soon(trio.sleep_forever)
            task_status.started()
            await trio.sleep_forever()


def spec(
    child_id: str, start: Callable[..., Awaitable[object]], restart: str = "permanent"
) -> ChildSpec:
    return ChildSpec(child_id=child_id, start=start, restart=RestartType(restart))


def info(sup: Supervisor, child_id: str) -> ChildInfo:
    found = sup.child_info(child_id)
    assert found is not None
    return found


async def test_supervisor_restarts_crashed_child(autojump_clock: MockClock) -> None:
    with trio.fail_after(60):
        log = Log()
        async with open_supervisor("s", backoff=FIXED) as sup:
            assert await sup.start_child(spec("c", partial(log.crash_after, 5))) == 1
            await trio.sleep(6.5)  # crash at 5 s, back-off 1 s, new incarnation at 6 s
            assert (log.starts, sup.child_value("c")) == ([0, 6], 2)
            assert info(sup, "c") == ChildInfo(
                "c", "running", RestartType.PERMANENT, 1, "ValueError('crash 1')"
            )
            stats = sup.statistics()
            assert (stats.children, stats.restarts_in_period, stats.total_restarts) == (1, 1, 1)
            assert (stats.state, stats.last_failure) == ("running", "c: ValueError('crash 1')")
        assert sup.statistics().state == "closed"


async def test_supervisor_escalates_past_intensity(autojump_clock: MockClock) -> None:
    with trio.fail_after(60):
        log, sibling = Log(), Log()
        intensity = Intensity(max_restarts=3, period_seconds=60)
        with pytest.raises(SupervisorEscalation) as escalation:
            async with open_supervisor("s", intensity=intensity, backoff=FIXED) as sup:
                await sup.start_child(spec("sibling", sibling.run_forever))
                await sup.start_child(spec("c", partial(log.crash_after, 0.5)))
                await trio.sleep_forever()
        assert len(log.starts) == 4  # the first incarnation and 3 restarts; then escalation
        assert isinstance(escalation.value.__cause__, ValueError)
        assert (escalation.value.supervisor_name, escalation.value.child_id) == ("s", "c")
        assert len(sibling.cancels) == 1  # escalation cancelled the sibling too
        assert sup.statistics().state == "escalated"
        with pytest.raises(SupervisorClosed):
            await sup.start_child(spec("late", sibling.run_forever))


async def test_restarts_wider_apart_than_the_period_do_not_escalate(
    autojump_clock: MockClock,
) -> None:
    with trio.fail_after(600):
        log, at_once = Log(), Backoff(min_seconds=0, max_seconds=0)
        intensity = Intensity(max_restarts=2, period_seconds=10)
        async with open_supervisor("s", intensity=intensity, backoff=at_once) as sup:
            await sup.start_child(spec("c", partial(log.crash_after, 6)))
            await trio.sleep(97)  # a restart every 6 s: 2 within any 10 s, never 3
            assert sup.statistics().restarts_in_period == 2
        assert len(log.starts) == 17


async def test_cancelled_is_not_a_crash(autojump_clock: MockClock) -> None:
    with trio.fail_after(60):
        log = Log()
        with trio.CancelScope() as outside:
            async with open_supervisor("s") as sup:
                await sup.start_child(spec("c", log.run_forever))
                await sup.restart_child("c")  # our own cancellation: absorbed, not counted
                outside.cancel()  # a cancellation from outside: propagates, not counted
                await trio.sleep_forever()
        assert outside.cancelled_caught
        assert (len(log.starts), len(log.cancels)) == (2, 2)
        stats = sup.statistics()
        assert (stats.total_restarts, stats.last_failure, stats.state) == (0, None, "closed")


async def test_exception_group_of_cancelled_is_not_a_crash(autojump_clock: MockClock) -> None:
    with trio.fail_after(60):
        log = Log()
        with trio.CancelScope() as outside:
            async with open_supervisor("s") as sup:
                await sup.start_child(spec("c", partial(log.run_with_nursery, fail=False)))
                await trio.sleep(2)
                assert await sup.restart_child("c")
                assert await sup.stop_child("c")
                await sup.start_child(spec("d", partial(log.run_with_nursery, fail=False)))
                await trio.sleep(2)
                outside.cancel()
        assert outside.cancelled_caught
        assert len(log.starts) == 3
        assert (sup.statistics().total_restarts, sup.statistics().last_failure) == (0, None)


async def test_exception_group_with_a_real_error_is_a_crash(autojump_clock: MockClock) -> None:
    with trio.fail_after(60):
        log = Log()
        async with open_supervisor("s", backoff=FIXED) as sup:
            await sup.start_child(spec("c", partial(log.run_with_nursery, fail=True)))
            await trio.sleep(1.5)  # failed at 1 s, restarts at 2 s
            child = info(sup, "c")
            assert (child.state, child.restarts) == ("restarting", 1)
            assert child.last_failure is not None
            assert child.last_failure.startswith("ExceptionGroup(")
            assert "helper failed" in child.last_failure


async def test_one_crashing_child_does_not_disturb_siblings(autojump_clock: MockClock) -> None:
    with trio.fail_after(60):
        log, ticks = Log(), list[float]()

        async def ticker(*, task_status: trio.TaskStatus[None]) -> None:
            task_status.started()
            deadline = trio.current_time()
            while True:
                deadline += 1.0
                await trio.sleep_until(deadline)
                ticks.append(log.now())

        fast = Backoff(min_seconds=0.1, max_seconds=0.2, random_factor=0.5)
        intensity = Intensity(max_restarts=1000, period_seconds=60)
        async with open_supervisor("s", intensity=intensity, backoff=fast) as sup:
            await sup.start_child(spec("ticker", ticker))
            await sup.start_child(spec("crasher", partial(log.crash_after, 0.3)))
            await trio.sleep(10.5)
            assert (info(sup, "ticker").restarts, info(sup, "ticker").last_failure) == (0, None)
        assert ticks == [float(second) for second in range(1, 11)]
        assert len(log.starts) > 15


async def test_backoff_grows_and_resets(autojump_clock: MockClock) -> None:
    with trio.fail_after(600):
        log, run_seconds = Log(), [0, 0, 0, 0, 0, 25, 0]  # then the last one runs forever

        async def child(*, task_status: trio.TaskStatus[None]) -> None:
            log.starts.append(log.now())
            task_status.started()
            if len(log.starts) > len(run_seconds):
                await trio.sleep_forever()
            await trio.sleep(run_seconds[len(log.starts) - 1])
            raise ValueError("crash")

        backoff = Backoff(min_seconds=1, max_seconds=8, random_factor=0, reset_after_seconds=20)
        intensity = Intensity(max_restarts=100, period_seconds=60)
        async with open_supervisor("s", intensity=intensity, backoff=backoff) as sup:
            await sup.start_child(spec("c", child))
            await trio.sleep(100)
        # delays 1, 2, 4, 8, 8 (capped); then a 25 s run resets the count: 1, 2
        assert log.starts == [0, 1, 3, 7, 15, 23, 49, 51]


def test_backoff_delay_follows_akka_formula() -> None:
    backoff = Backoff(min_seconds=0.1, max_seconds=30.0, random_factor=0.2)
    assert backoff.delay_seconds(0, 0.0) == pytest.approx(0.1)
    assert backoff.delay_seconds(3, 0.0) == pytest.approx(0.8)
    assert backoff.delay_seconds(3, 0.5) == pytest.approx(0.8 * 1.1)
    assert backoff.delay_seconds(20, 0.0) == pytest.approx(30.0)
    assert backoff.delay_seconds(10_000, 0.99) == pytest.approx(30.0 * 1.198)


@given(
    min_seconds=st.floats(0, 10),
    spread=st.floats(0, 1000),
    random_factor=st.floats(0, 1),
    attempt=st.integers(0, 200),
    random_value=st.floats(0, 1, exclude_max=True),
)
def test_backoff_delay_is_bounded_and_grows(
    min_seconds: float, spread: float, random_factor: float, attempt: int, random_value: float
) -> None:
    maximum = min_seconds + spread
    backoff = Backoff(min_seconds=min_seconds, max_seconds=maximum, random_factor=random_factor)
    delay = backoff.delay_seconds(attempt, random_value)
    assert min_seconds <= delay <= maximum * (1 + random_factor)
    assert delay <= backoff.delay_seconds(attempt + 1, random_value)


@pytest.mark.parametrize(
    "make",
    [
        partial(Intensity, max_restarts=-1),
        partial(Intensity, period_seconds=0),
        partial(Backoff, min_seconds=2, max_seconds=1),
        partial(Backoff, min_seconds=-1),
        partial(Backoff, random_factor=-0.1),
    ],
)
def test_intensity_and_backoff_reject_nonsense(make: Callable[[], object]) -> None:
    with pytest.raises(ValueError):
        make()


async def test_restart_child_is_not_counted(autojump_clock: MockClock) -> None:
    with trio.fail_after(60):
        log = Log()
        async with open_supervisor("s", intensity=Intensity(max_restarts=0)) as sup:
            await sup.start_child(spec("c", log.run_forever))
            for _ in range(3):  # an intensity of 0 would escalate at the first crash
                assert await sup.restart_child("c")
            assert log.now() == 0  # at once: no back-off
            assert (len(log.starts), len(log.cancels), sup.child_value("c")) == (4, 3, 4)
            assert sup.statistics().total_restarts == 0
            assert not await sup.restart_child("unknown")


async def test_restart_child_cuts_a_backoff_short(autojump_clock: MockClock) -> None:
    with trio.fail_after(60):
        log, slow = Log(), Backoff(min_seconds=100, max_seconds=100, random_factor=0)
        async with open_supervisor("s", backoff=slow) as sup:
            await sup.start_child(spec("c", partial(log.crash_after, 1)))
            await trio.sleep(2)
            assert info(sup, "c").state == "restarting"
            assert await sup.restart_child("c")
            assert (log.now(), log.starts, sup.child_value("c")) == (2, [0, 2], 2)


async def test_stop_child_removes_it(autojump_clock: MockClock) -> None:
    with trio.fail_after(600):
        log, crasher = Log(), Log()
        slow = Backoff(min_seconds=100, max_seconds=100, random_factor=0)
        async with open_supervisor("s", backoff=slow) as sup:
            await sup.start_child(spec("a", log.run_forever))
            await sup.start_child(spec("b", log.run_forever))
            await sup.start_child(spec("crasher", partial(crasher.crash_after, 1)))
            assert sup.child_ids() == ["a", "b", "crasher"]
            assert await sup.stop_child("a")
            assert (sup.has_child("a"), sup.child_info("a"), len(log.cancels)) == (False, None, 1)
            await trio.sleep(2)
            assert await sup.stop_child("crasher")  # during its back-off: at once
            assert (log.now(), sup.child_ids()) == (2, ["b"])
            await trio.sleep(200)
            assert (len(log.starts), len(crasher.starts)) == (2, 1)  # none restarted
            assert not await sup.stop_child("a")
            await sup.start_child(spec("a", log.run_forever))  # the id is free again
            assert sup.statistics().total_restarts == 1  # the crasher's, before its stop


async def test_stop_and_restart_ask_nicely_then_cancel(autojump_clock: MockClock) -> None:
    with trio.fail_after(60):
        log, endings = Log(), list[str]()

        async def actor(
            name: str, *, obeys: bool, task_status: trio.TaskStatus[ActorRef[str]]
        ) -> None:
            ref, inbox = open_inbox[str](4)
            with inbox:
                task_status.started(ref)
                try:
                    async for message in inbox:
                        if message == "stop" and obeys:
                            endings.append(f"{name} stopped politely")
                            return
                except trio.Cancelled:
                    endings.append(f"{name} cancelled")
                    raise

        def tell_stop(ref: ActorRef[str]) -> None:
            ref.tell_nowait("stop")

        async with open_supervisor("s") as sup:
            for name, obeys in (("polite", True), ("stubborn", False)):
                start = partial(actor, name, obeys=obeys)
                child = ChildSpec(
                    child_id=name, start=start, shutdown=tell_stop, shutdown_seconds=3
                )
                await sup.start_child(child)
            old_ref = sup.child_value("polite")
            assert await sup.restart_child("polite")
            assert sup.child_value("polite") is not old_ref
            assert await sup.stop_child("polite")
            assert log.now() == 0
            assert await sup.stop_child("stubborn")
            assert log.now() == 3
        assert endings == ["polite stopped politely"] * 2 + ["stubborn cancelled"]


async def test_stop_at_once_skips_the_polite_stop(autojump_clock: MockClock) -> None:
    """A pause stops its monitor actor at once (OTP's brutal_kill), and a hook that
    returns False (it could not ask) falls back to cancelling at once too."""
    with trio.fail_after(60):
        log, asked = Log(), list[str]()

        def polite(name: str, answer: bool, _value: object) -> bool:
            asked.append(name)
            return answer

        async with open_supervisor("s") as sup:
            for name, answer in (("brutal", True), ("unaskable", False)):
                hook = partial(polite, name, answer)
                await sup.start_child(
                    ChildSpec(
                        child_id=name, start=log.run_forever, shutdown=hook, shutdown_seconds=30
                    )
                )
            assert await sup.stop_child("brutal", at_once=True)
            assert await sup.stop_child("unaskable")
            assert (log.now(), asked, len(log.cancels)) == (0, ["unaskable"], 2)


async def test_request_close_stops_a_run_supervisor_with_its_ladder(
    autojump_clock: MockClock,
) -> None:
    """A shard's polite stop: ``request_close`` makes ``run_supervisor`` stop every child
    with its shutdown hook and return, so the parent sees a normal end."""
    with trio.fail_after(60):
        endings = list[str]()

        async def worker(*, task_status: trio.TaskStatus[ActorRef[str]]) -> None:
            ref, inbox = open_inbox[str](4)
            with inbox:
                task_status.started(ref)
                async for message in inbox:
                    if message == "drain":
                        await trio.sleep(2)  # finishing what it had started
                        endings.append("worker drained")
                        return

        def tell_drain(ref: ActorRef[str]) -> None:
            ref.tell_nowait("drain")

        inner = partial(
            run_supervisor,
            "inner",
            children=[
                ChildSpec(child_id="w", start=worker, shutdown=tell_drain, shutdown_seconds=5)
            ],
        )
        async with open_supervisor("outer") as sup:
            await sup.start_child(
                ChildSpec(
                    child_id="inner",
                    start=inner,
                    shutdown=Supervisor.request_close,
                    shutdown_seconds=10,
                )
            )
            began = trio.current_time()
            assert await sup.stop_child("inner")
            assert trio.current_time() - began == 2
        assert endings == ["worker drained"]


async def test_nested_supervisor_restarts_child_supervisor(autojump_clock: MockClock) -> None:
    with trio.fail_after(60):
        log = Log()
        inner = partial(
            run_supervisor,
            "inner",
            children=[spec("worker", partial(log.crash_after, 2))],
            intensity=Intensity(max_restarts=1, period_seconds=60),
            backoff=FIXED,
        )
        async with open_supervisor("outer", backoff=FIXED) as outer:
            first = await outer.start_child(spec("inner", inner))
            assert isinstance(first, Supervisor)
            assert first.child_ids() == ["worker"]
            # worker: starts 0, crashes 2, restarts 3, crashes 5: inner escalates;
            # outer restarts the inner supervisor after 1 s, which restarts the worker
            await trio.sleep(6.5)
            assert log.starts == [0, 3, 6]
            second = outer.child_value("inner")
            assert isinstance(second, Supervisor)
            assert second is not first
            assert first.statistics().state == "escalated"
            assert second.statistics().state == "running"
            child = info(outer, "inner")
            assert child.restarts == outer.statistics().total_restarts == 1
            assert child.last_failure is not None
            assert child.last_failure.startswith("SupervisorEscalation(")


async def returning(log: Log, *, fail: bool, task_status: trio.TaskStatus[None]) -> None:
    log.starts.append(log.now())
    task_status.started()
    await trio.sleep(1)
    if fail:
        raise ValueError("crash")


@pytest.mark.parametrize(
    ("restart", "fail", "restarted"),
    [
        ("permanent", False, True),
        ("permanent", True, True),
        ("transient", False, False),
        ("transient", True, True),
        ("temporary", False, False),
        ("temporary", True, False),
    ],
)
async def test_restart_type_decides_what_is_restarted(
    autojump_clock: MockClock, restart: str, fail: bool, restarted: bool
) -> None:
    with trio.fail_after(60):
        log = Log()
        async with open_supervisor("s", backoff=FIXED) as sup:
            await sup.start_child(spec("c", partial(returning, log, fail=fail), restart))
            await trio.sleep(2.5)  # ended at 1 s; a restart would begin at 2 s
            assert sup.has_child("c") is restarted
            assert len(log.starts) == (2 if restarted else 1)
            assert sup.statistics().total_restarts == (1 if restarted else 0)
            assert (sup.statistics().last_failure is not None) is fail


async def test_child_that_fails_before_started_is_a_start_error(autojump_clock: MockClock) -> None:
    with trio.fail_after(60):

        async def broken(*, task_status: trio.TaskStatus[None]) -> None:
            await trio.sleep(1)
            raise ValueError("cannot start")

        async def silent(*, task_status: trio.TaskStatus[None]) -> None:
            await trio.sleep(1)

        async with open_supervisor("s") as sup:
            with pytest.raises(ChildStartError) as error:
                await sup.start_child(spec("broken", broken))
            assert isinstance(error.value.__cause__, ValueError)
            assert error.value.child_id == "broken"
            with pytest.raises(ChildStartError):
                await sup.start_child(spec("silent", silent))
            assert (sup.child_ids(), sup.statistics().total_restarts) == ([], 0)
            await sup.start_child(spec("ok", Log().run_forever))
            with pytest.raises(ValueError):
                await sup.start_child(spec("ok", Log().run_forever))


async def test_cancelled_start_child_drops_a_child_not_yet_started(
    autojump_clock: MockClock,
) -> None:
    with trio.fail_after(60):

        async def cancels_its_starter(
            scope: trio.CancelScope, *, first: bool, task_status: trio.TaskStatus[None]
        ) -> None:
            if first:
                scope.cancel()
            task_status.started()
            scope.cancel()
            await trio.sleep_forever()

        async with open_supervisor("s") as sup:
            for first in (True, False):
                with trio.CancelScope() as starter:
                    child = partial(cancels_its_starter, starter, first=first)
                    await sup.start_child(spec(f"first={first}", child))
                assert starter.cancelled_caught is first
            # cancelled before started: gone with its start_child; after: kept
            assert sup.child_ids() == ["first=False"]
            assert info(sup, "first=False").state == "running"
            assert sup.statistics().total_restarts == 0


async def test_leaving_open_supervisor_cancels_children_with_cleanup(
    autojump_clock: MockClock,
) -> None:
    with trio.fail_after(60):
        log, cleaned = Log(), list[float]()

        async def tidy(*, task_status: trio.TaskStatus[None]) -> None:
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                with trio.CancelScope(shield=True):
                    await trio.sleep(1)  # for example, flush a batch
                    cleaned.append(log.now())

        async with open_supervisor("s") as sup:
            await sup.start_child(spec("a", tidy))
            await sup.start_child(spec("b", tidy))
        assert (cleaned, sup.statistics().children) == ([1, 1], 0)
        with pytest.raises(SupervisorClosed):
            await sup.start_child(spec("c", tidy))
        with pytest.raises(ExceptionGroup) as error:
            async with open_supervisor("s") as sup:
                await sup.start_child(spec("a", tidy))
                raise KeyError("body failed")
        assert error.group_contains(KeyError)
        assert cleaned == [1, 1, 2]


async def test_on_restart_hook_reports_each_restart(autojump_clock: MockClock) -> None:
    with trio.fail_after(60):
        reported: list[tuple[str, str]] = []

        def on_restart(child_id: str, exc: Exception | None) -> None:
            reported.append((child_id, repr(exc)))
            raise RuntimeError("a broken metrics hook is logged, not fatal")

        async with open_supervisor("s", backoff=FIXED, on_restart=on_restart) as sup:
            await sup.start_child(spec("c", partial(Log().crash_after, 1)))
            await trio.sleep(4.5)  # crashes at 1 and 3 (restarted at 2 and 4)
        assert reported == [("c", "ValueError('crash 1')"), ("c", "ValueError('crash 2')")]


async def test_restarts_in_period_decay(autojump_clock: MockClock) -> None:
    with trio.fail_after(600):
        log, intensity = Log(), Intensity(max_restarts=5, period_seconds=30)

        async def crash_twice(*, task_status: trio.TaskStatus[None]) -> None:
            log.starts.append(log.now())
            task_status.started()
            await trio.sleep(0.5)
            if len(log.starts) <= 2:
                raise ValueError("crash")
            await trio.sleep_forever()

        async with open_supervisor("s", intensity=intensity, backoff=FIXED) as sup:
            await sup.start_child(spec("c", crash_twice))
            await trio.sleep(5)
            assert sup.statistics().restarts_in_period == 2
            await trio.sleep(30)
            stats = sup.statistics()
            assert (stats.restarts_in_period, stats.total_restarts) == (0, 2)


async def test_ten_thousand_children_start_and_stop(autojump_clock: MockClock) -> None:
    with trio.fail_after(60):
        count, log = 10_000, Log()
        async with open_supervisor("big", intensity=Intensity(max_restarts=0)) as sup:
            for number in range(count):
                await sup.start_child(spec(f"mon_{number}", log.run_forever))
            assert sup.statistics().children == len(sup.child_ids()) == count
            for number in range(0, count, 2):
                assert await sup.stop_child(f"mon_{number}")
            assert (sup.statistics().children, len(log.cancels)) == (count // 2, count // 2)
        assert (len(log.starts), len(log.cancels)) == (count, count)
        assert sup.statistics().total_restarts == 0
