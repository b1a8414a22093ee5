"""The heartbeat actor alone, on trio's MockClock (docs/heartbeats.md, States;
engine.heartbeat).

The actor's only outside world is the store actor's inbox: the test builds a real
``StoreWriter`` on a memory channel and reads what the actor hands over (pings and
status moves), so every wait is on the clock, which ``autojump_clock`` moves at once.
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
import trio
from trio.testing import MockClock

from engine import ActorUnavailable, Mailbox, Ping, run_heartbeat
from engine.heartbeat import HeartbeatConfig, HeartbeatMessage, Retune
from store import HeartbeatRecord, StoreWriter, WritePing, WriterStatistics

PERIOD, GRACE = 60, 30


def _record(**fields: object) -> HeartbeatRecord:
    values: dict[str, object] = {
        "id": "hbt_test",
        "account_id": "acct_test",
        "name": "nightly backup",
        "period_seconds": PERIOD,
        "grace_seconds": GRACE,
        "status": "pending",
        "ping_key": "0" * 32,
        "last_ping_at": None,
        "last_success_at": None,
        "auto_incidents": True,
        "incident_severity": "major",
        "run_epoch": 3,
        "created": 1_790_000_000,
        "updated": 1_790_000_000,
        "metadata": {},
    }
    values.update(fields)
    return HeartbeatRecord(**values)  # type: ignore[arg-type]


class Harness:
    """A heartbeat actor running in the test's nursery, its mailbox, and the store
    actor's inbox as the test sees it."""

    def __init__(self, nursery: trio.Nursery, record: HeartbeatRecord) -> None:
        send, self.store = trio.open_memory_channel[object](100)
        self.writer = StoreWriter(send, WriterStatistics())  # type: ignore[arg-type]
        self.mailbox: Mailbox[HeartbeatMessage] = Mailbox(16)
        nursery.start_soon(run_heartbeat, record, self.mailbox, self.writer)

    async def ping(self, kind: str) -> WritePing:
        message = Ping(kind, "127.0.0.1")
        self.mailbox.put(message)
        await message.done.wait()
        assert message.recorded
        return await self.handed()

    async def handed(self) -> WritePing:
        item = await self.store.receive()
        assert isinstance(item, WritePing)
        return item


async def test_down_after_period_plus_grace_up_on_the_next_ping(
    autojump_clock: MockClock, nursery: trio.Nursery
) -> None:
    with trio.fail_after(10_000):
        beat = Harness(nursery, _record())
        first = await beat.ping("success")
        assert first.ping is not None and first.ping.kind == "success"
        assert first.ping.source_ip == "127.0.0.1" and first.ping.duration_ms is None
        assert first.change is not None
        assert (first.change.from_status, first.change.to_status) == ("pending", "up")
        assert first.change.run_epoch == 3
        pinged = trio.current_time()
        # a second success ping before the deadline moves it, and changes no status
        await trio.sleep(50)
        again = await beat.ping("success")
        assert again.change is None
        pinged = trio.current_time()
        silence = await beat.handed()  # nothing but the deadline can come now
        assert trio.current_time() - pinged == pytest.approx(PERIOD + GRACE)
        assert silence.ping is None and silence.change is not None
        assert (silence.change.from_status, silence.change.to_status) == ("up", "down")
        assert "No ping for 90 s (period 60 s + grace 30 s)" in silence.change.detail
        # down: no deadline any more; the next ping brings it up
        await trio.sleep(3600)
        assert beat.store.statistics().current_buffer_used == 0
        back = await beat.ping("success")
        assert back.change is not None and back.change.to_status == "up"


async def test_fail_is_down_at_once_and_start_gives_the_next_ping_a_duration(
    autojump_clock: MockClock, nursery: trio.Nursery
) -> None:
    with trio.fail_after(10_000):
        beat = Harness(nursery, _record())
        started = await beat.ping("start")
        assert started.change is None  # pending stays pending
        assert started.ping is not None and started.ping.duration_ms is None
        await trio.sleep(12.5)
        failed = await beat.ping("fail")
        assert failed.ping is not None and failed.ping.duration_ms == 12_500.0
        assert failed.change is not None
        assert (failed.change.from_status, failed.change.to_status) == ("pending", "down")
        assert "/fail" in failed.change.detail
        await beat.ping("start")
        await trio.sleep(0.25)
        done = await beat.ping("success")
        assert done.ping is not None and done.ping.duration_ms == 250.0
        assert done.change is not None and done.change.to_status == "up"
        plain = await beat.ping("success")  # no start before it: no duration
        assert plain.ping is not None and plain.ping.duration_ms is None


async def test_a_pending_heartbeat_never_goes_down_by_itself(
    autojump_clock: MockClock, nursery: trio.Nursery
) -> None:
    with trio.fail_after(10_000_000):
        beat = Harness(nursery, _record())
        await trio.sleep(30 * 86_400)
        assert beat.store.statistics().current_buffer_used == 0


async def test_a_restarted_actor_keeps_the_deadline_of_the_stored_last_success(
    autojump_clock: MockClock, nursery: trio.Nursery
) -> None:
    with trio.fail_after(10_000):
        last = time.time() - 50  # 50 s ago: 40 s of period + grace left
        began = trio.current_time()
        beat = Harness(nursery, _record(status="up", last_success_at=int(last)))
        moved = await beat.handed()
        assert moved.change is not None and moved.change.to_status == "down"
        assert trio.current_time() - began == pytest.approx(40, abs=1.5)


async def test_retune_moves_the_deadline_and_closing_ends_the_actor(
    autojump_clock: MockClock, nursery: trio.Nursery
) -> None:
    with trio.fail_after(10_000):
        record = _record()
        beat = Harness(nursery, record)
        await beat.ping("success")
        pinged = trio.current_time()
        retuned = replace(record, period_seconds=600, grace_seconds=0)
        beat.mailbox.put(Retune(HeartbeatConfig.of(retuned)))
        moved = await beat.handed()
        assert trio.current_time() - pinged == pytest.approx(600)
        assert moved.change is not None and moved.change.to_status == "down"
        # closing the mailbox ends the actor; pings still in it are settled unrecorded
        waiting = Ping("success", None)
        beat.mailbox.put(waiting)
        for message in beat.mailbox.close():
            assert isinstance(message, Ping)
            message.settle(False)
        assert waiting.done.is_set() and not waiting.recorded
        with pytest.raises(trio.EndOfChannel):
            await beat.mailbox.receive()


async def test_the_mailbox_refuses_when_full_or_closed_and_wakes_its_receiver(
    autojump_clock: MockClock, nursery: trio.Nursery
) -> None:
    with trio.fail_after(10):
        mailbox: Mailbox[int] = Mailbox(2)
        got: list[int] = []

        async def receiver() -> None:
            while True:
                try:
                    got.append(await mailbox.receive())
                except trio.EndOfChannel:
                    got.append(-1)
                    return

        nursery.start_soon(receiver)
        await trio.sleep(1)  # parked, waiting
        mailbox.put(1)
        mailbox.put(2)
        with pytest.raises(trio.WouldBlock):
            mailbox.put(3)  # full: refused at once, not queued
        await trio.sleep(1)
        assert got == [1, 2] and len(mailbox) == 0
        mailbox.put(4)
        assert mailbox.close() == [4]  # undelivered, handed back
        with pytest.raises(ActorUnavailable):
            mailbox.put(5)
        await trio.sleep(1)
        assert got == [1, 2, -1]


async def test_a_full_mailbox_makes_send_wait_for_room_and_close_frees_the_waiting_senders(
    autojump_clock: MockClock, nursery: trio.Nursery
) -> None:
    # A monitor actor's inbox: tell (send) waits for room, as a memory channel's send does.
    with trio.fail_after(10):
        mailbox: Mailbox[int] = Mailbox(1)
        sent: list[int] = []
        refused: list[int] = []

        async def sender(value: int) -> None:
            try:
                await mailbox.send(value)
                sent.append(value)
            except ActorUnavailable:
                refused.append(value)

        with pytest.raises(trio.WouldBlock):
            mailbox.receive_nowait()
        mailbox.send_nowait(1)
        nursery.start_soon(sender, 2)
        await trio.sleep(1)
        assert sent == [] and len(mailbox) == 1  # parked: no room
        assert mailbox.receive_nowait() == 1  # makes room: the sender goes on
        await trio.sleep(1)
        assert sent == [2] and await mailbox.receive() == 2
        mailbox.put(3)
        nursery.start_soon(sender, 4)
        await trio.sleep(1)
        assert mailbox.close() == [3] and sent == [2]
        await trio.sleep(1)
        assert refused == [4]  # closed while it waited: told, nothing added
        with pytest.raises(trio.EndOfChannel):
            mailbox.receive_nowait()


async def test_a_maintenance_pause_holds_the_deadline_until_a_period_after_its_end(
    autojump_clock: MockClock, nursery: trio.Nursery
) -> None:
    """docs/maintenance.md, "Paused checks": no deadline passes inside a window with
    ``pause_checks``; after its end the heartbeat has a whole period and grace."""
    with trio.fail_after(10_000):
        paused_until = int(time.time()) + 600
        beat = Harness(nursery, _record(maintenance_paused_until=paused_until))
        await beat.ping("success")
        started = trio.current_time()
        silence = await beat.handed()
        waited = trio.current_time() - started
        # not at 90 s: at the pause's end (600 s from the wall clock's now) plus 90 s
        assert waited == pytest.approx(600 + PERIOD + GRACE, abs=2)
        assert silence.change is not None and silence.change.to_status == "down"
