"""May this node probe? (``engine.leases.Holding.may_probe``; README: Several nodes): a
lease is known held for ``lease_seconds`` after the renewal that extended it started, on
the monotonic clock; past that only while the database is unreachable and the lease actor
keeps trying; never after a pause that outlived both; and only for a bucket held at the
epoch its actor runs under. Pure: ``autojump_clock`` drives
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
        holding.attempt_started, holding.attempt_failed = trio.current_time(), True
        await trio.sleep(0.1)
        assert holding.may_probe(7, 3, trio.current_time())
    # the attempt in progress hangs up to its deadline (the lease): still probing
    await trio.sleep(LEASE)
    assert holding.may_probe(7, 3, trio.current_time())
    # a pause past that (no attempt for over a lease and a third): not any more
    await trio.sleep(LEASE / 3)
    assert not holding.may_probe(7, 3, trio.current_time())


async def test_a_lone_engine_always_probes(autojump_clock: trio.testing.MockClock) -> None:
    holding = Holding.everything()
    await trio.sleep(3600)
    assert holding.may_probe(7, None, trio.current_time())
