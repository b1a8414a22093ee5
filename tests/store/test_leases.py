"""Bucket leases in the store (docs/several-nodes.md, Buckets and Leases): the bucket Python
computes is the one SQL stores, fair shares as nodes come and go, epochs that grow with
every claim, expiry by the database's clock, and a graceful stop giving back at once."""

from __future__ import annotations

import dataclasses
from typing import Any

from store import Database, leases, monitors
from tests.store.helpers import new_heartbeat, new_monitor


async def _sql(db: Database, query: str, *args: Any) -> list[dict[str, Any]]:
    async def fetch(connection: Any) -> list[dict[str, Any]]:
        return [dict(r) for r in await connection.fetch(query, *args)]

    return await db.run(fetch)


async def test_python_and_sql_agree_on_buckets_and_loads_filter(db: Database) -> None:
    made = [await new_monitor(db, created=1_790_000_000) for _ in range(40)]
    rows = await _sql(db, "SELECT id, bucket FROM monitors")
    assert {r["id"]: r["bucket"] for r in rows} == {m.id: leases.bucket_of(m.id) for m in made}
    assert len({leases.bucket_of(m.id) for m in made}) > 10  # spread, not constant
    some = sorted({leases.bucket_of(m.id) for m in made})[:5]
    loaded = await db.run(monitors.load_active_monitors, some)
    assert {m.id for m in loaded} == {m.id for m in made if leases.bucket_of(m.id) in some}


async def _round(db: Database, name: str) -> leases.LeaseRound:
    """One renewal of node ``name``, then the hand-over of its surplus, as the lease
    actor does once their actors stopped (``engine.leases``); what it holds after it."""
    found = await db.transaction(leases.renew_leases, name, 10.0)
    given = {b: found.held[b] for b in found.surplus}
    if given:
        assert await db.transaction(leases.release_buckets, name, given) == len(given)
    held = {b: e for b, e in found.held.items() if b not in given}
    return dataclasses.replace(found, held=held, surplus=frozenset())


async def test_shares_move_as_nodes_join_expire_and_stop(db: Database) -> None:
    await db.transaction(leases.register_node, "a", 10.0)
    first = await db.transaction(leases.renew_leases, "a", 10.0)
    assert len(first.held) == 256 and first.settled and first.share == 256
    assert set(first.held.values()) == {1}
    # an outage longer than the lease: nobody claimed them, so the same epochs go on
    await _sql(db, "UPDATE bucket_leases SET expires_at = now() - interval '1 s'")
    again = await db.transaction(leases.renew_leases, "a", 10.0)
    assert again.held == first.held

    await db.transaction(leases.register_node, "b", 10.0)
    joined = await db.transaction(leases.renew_leases, "b", 10.0)
    assert joined.held == {} and joined.share == 128 and joined.settled  # nothing free yet
    named = await db.transaction(leases.renew_leases, "a", 10.0)
    assert len(named.held) == 256 and len(named.surplus) == leases.RELEASE_PER_ROUND
    stale = dict.fromkeys(named.surplus, 99)  # not held at that epoch: left alone
    assert await db.transaction(leases.release_buckets, "a", stale) == 0
    gave = await _round(db, "a")
    assert len(gave.held) == 256 - leases.RELEASE_PER_ROUND  # gradually
    took = await db.transaction(leases.renew_leases, "b", 10.0)
    assert len(took.held) == leases.RELEASE_PER_ROUND
    assert not set(took.held) & set(gave.held)
    assert set(took.held.values()) == {2}  # a second claim of those buckets
    for _ in range(8):
        a = await _round(db, "a")
        b = await _round(db, "b")
    assert (len(a.held), len(b.held)) == (128, 128)

    # b stops renewing: its leases expire by the database's clock, a takes them back
    await _sql(db, "UPDATE bucket_leases SET expires_at = now() - interval '1 s' WHERE node = 'b'")
    await _sql(db, "UPDATE nodes SET renewed_at = now() - interval '1 min' WHERE name = 'b'")
    back = await db.transaction(leases.renew_leases, "a", 10.0)
    assert len(back.held) == 256 and back.share == 256
    assert all(back.held[bucket] == 3 for bucket in b.held)
    listed = {n.name: n for n in await db.run(leases.list_nodes)}
    assert (listed["a"].state, listed["a"].buckets) == ("live", 256)
    assert (listed["b"].state, listed["b"].buckets) == ("expired", 0)

    assert await db.transaction(leases.release_node, "a") == 256
    free = await _sql(db, "SELECT count(*) AS n FROM bucket_leases WHERE node IS NULL")
    assert free == [{"n": 256}]
    assert {n.name: n.state for n in await db.run(leases.list_nodes)}["a"] == "stopped"


async def test_nodes_list_counts_the_active_monitors_and_heartbeats_each_node_runs(
    db: Database,
) -> None:
    made = [await new_monitor(db, created=1_790_000_000) for _ in range(12)]
    await _sql(db, "UPDATE monitors SET status = 'paused' WHERE id = $1", made[0].id)
    beat = await new_heartbeat(db, created=1_790_000_000)
    await db.transaction(leases.register_node, "a", 10.0)
    await db.transaction(leases.renew_leases, "a", 10.0)
    await db.transaction(leases.register_node, "b", 10.0)
    for _ in range(8):
        a = await _round(db, "a")
        b = await _round(db, "b")
    listed = {n.name: n for n in await db.run(leases.list_nodes)}
    active = made[1:]
    for node, held in (("a", a.held), ("b", b.held)):
        runs = sum(leases.bucket_of(m.id) in held for m in active)
        assert listed[node].monitors == runs
        assert listed[node].heartbeats == int(leases.bucket_of(beat.id) in held)
    assert listed["a"].monitors + listed["b"].monitors == 11  # the paused one runs nowhere
