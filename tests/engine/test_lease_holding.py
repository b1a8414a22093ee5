"""May this node probe? (``engine.leases.Holding.may_probe``; docs/several-nodes.md, A node
probes only what it knows it holds): a lease is known held for ``lease_seconds`` after the
renewal that extended it started, on the monotonic clock; past that only while the database
is unreachable and the lease actor keeps trying; never after a pause that outlived both; and
only for a bucket held at the epoch its actor runs under. Pure: ``autojump_clock`` drives
trio's clock."""

from __future__ import annotations

import trio

from engine import Holding

LEASE = 6.0


def _renewed(at: float) -> Holding:
    holding = Holding()
    holding.held = {7: 3}
    holding.lease_seconds = LEASE
    holding.last_renewal = holding.attempt_started = at
    holding.attempt_entitled = True
    return holding


async def test_a_lease_is_known_held_until_a_lease_after_its_renewal_started(
    autojump_clock: trio.testing.MockClock,
) -> None:
    holding = _renewed(trio.current_time())
    assert holding.may_probe(7, 3, trio.current_time())
    await trio.sleep(LEASE - 0.01)
    assert holding.may_probe(7, 3, trio.current_time())
    assert not holding.may_probe(7, 2, trio.current_time())  # lost and claimed again
    assert not holding.may_probe(8, 3, trio.current_time())  # not held (or given back)
    await trio.sleep(0.02)  # a pause outlived it, with a healthy database
    assert not holding.may_probe(7, 3, trio.current_time())


async def test_an_outage_keeps_probing_while_the_lease_actor_keeps_trying(
    autojump_clock: trio.testing.MockClock,
) -> None:
    holding = _renewed(trio.current_time())
    for _ in range(6):  # an attempt every third of the lease, each refused
        await trio.sleep(LEASE / 3)
        _attempt(holding)
        await trio.sleep(0.1)
        assert holding.may_probe(7, 3, trio.current_time())
    for _ in range(3):  # each attempt hangs up to its deadline (the lease), then fails
        await trio.sleep(LEASE - 0.1)
        assert holding.may_probe(7, 3, trio.current_time())
        await trio.sleep(LEASE / 3)
        assert holding.may_probe(7, 3, trio.current_time())
        _attempt(holding)
    # a pause past that (no attempt for one and a half leases): not any more, and the
    # attempt that follows the pause does not make it so while it waits
    await trio.sleep(LEASE * 1.5)
    assert not holding.may_probe(7, 3, trio.current_time())
    _attempt(holding)
    assert not holding.may_probe(7, 3, trio.current_time())


async def test_a_renewal_after_a_pause_is_no_licence_while_it_waits(
    autojump_clock: trio.testing.MockClock,
) -> None:
    holding = _renewed(trio.current_time())
    await trio.sleep(LEASE + 1)  # paused (SIGSTOP) past the lease, the database fine
    _attempt(holding)  # the renewal right after SIGCONT, not answered yet
    assert not holding.may_probe(7, 3, trio.current_time())
    holding.last_renewal, holding.attempt_failed = holding.attempt_started, False
    assert holding.may_probe(7, 3, trio.current_time())  # it answered: still held


def _attempt(holding: Holding) -> None:
    """A renewal attempt starts now (as ``engine.leases`` marks it) and does not answer."""
    now = trio.current_time()
    holding.attempt_entitled = holding.entitled(now)
    holding.attempt_started, holding.attempt_failed = now, True


async def test_a_lone_engine_always_probes(autojump_clock: trio.testing.MockClock) -> None:
    holding = Holding.everything()
    await trio.sleep(3600)
    assert holding.may_probe(7, None, trio.current_time())
