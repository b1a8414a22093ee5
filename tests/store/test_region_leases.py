"""Leases per region and bucket (docs/several-nodes.md, Regions; store.leases,
store.fencing, store.regions): each region's 256 buckets are claimed only by live nodes
of that region, shared fairly among them, while the any-region pool is shared by every
node as before; the fence checks an item against the lease of the pool its actor ran
under. Real Postgres; nodes are their renewals, as the lease actor makes them."""

from __future__ import annotations

import dataclasses
from typing import Any

import trio

from store import (
    CheckRecord,
    Connection,
    Database,
    StoreActor,
    StoreSettings,
    WriteCheck,
    checks,
    leases,
    new_id,
    regions,
)
from tests.store.helpers import new_monitor

T0 = 1_790_000_000


async def _sql(db: Database, query: str, *args: Any) -> list[dict[str, Any]]:
    async def fetch(connection: Connection) -> list[dict[str, Any]]:
        return [dict(r) for r in await connection.fetch(query, *args)]

    return await db.run(fetch)


async def _round(db: Database, name: str, region: str) -> leases.LeaseRound:
    """One renewal of node ``name`` of ``region``, then the hand-over of its surplus in
    both pools (as the lease actor does once their actors stopped); what it holds after."""
    found = await db.transaction(leases.renew_leases, name, 10.0, region)
    held, surplus = found.slots()
    if surplus:
        given = {slot: held[slot] for slot in surplus}
        assert await db.transaction(leases.release_buckets, name, given, region) == len(given)
    return dataclasses.replace(
        found,
        held={b: e for b, e in found.held.items() if b not in found.surplus},
        region_held={b: e for b, e in found.region_held.items() if b not in found.region_surplus},
        surplus=frozenset(),
        region_surplus=frozenset(),
    )


async def test_each_region_has_its_own_buckets_claimed_only_by_its_nodes(db: Database) -> None:
    with trio.fail_after(30):
        nodes = {"a": "eu", "b": "eu", "c": "us"}
        for name, region in nodes.items():
            await db.transaction(leases.register_node, name, 10.0, region)
        found: dict[str, leases.LeaseRound] = {}
        for _ in range(10):
            for name, region in nodes.items():
                found[name] = await _round(db, name, region)
        a, b, c = found["a"], found["b"], found["c"]
        # the any-region pool: every live node's fair share, as without regions
        assert (a.share, a.live_nodes) == (86, 3)
        assert max(len(f.held) for f in found.values()) == 86  # none above its share
        assert set(a.held) | set(b.held) | set(c.held) == set(range(256))
        # each region's pool: its own nodes' fair share
        assert (a.region_share, a.region_nodes, c.region_share, c.region_nodes) == (128, 2, 256, 1)
        assert (len(a.region_held), len(b.region_held), len(c.region_held)) == (128, 128, 256)
        assert not set(a.region_held) & set(b.region_held)
        held = await _sql(
            db,
            "SELECT region, array_agg(DISTINCT node ORDER BY node) AS nodes FROM pool_leases "
            "GROUP BY region ORDER BY region",
        )
        assert held == [
            {"region": "", "nodes": ["a", "b", "c"]},
            {"region": "eu", "nodes": ["a", "b"]},
            {"region": "us", "nodes": ["c"]},
        ]
        listed = {r.name: [n["name"] for n in r.nodes] for r in await db.run(regions.list_regions)}
        assert listed == {"eu": ["a", "b"], "us": ["c"]}

        # c (us) dies: the eu nodes take its any-region buckets, never its region's
        await _sql(
            db, "UPDATE pool_leases SET expires_at = now() - interval '1 s' WHERE node = 'c'"
        )
        await _sql(db, "UPDATE nodes SET renewed_at = now() - interval '1 min' WHERE name = 'c'")
        for _ in range(3):
            a, b = await _round(db, "a", "eu"), await _round(db, "b", "eu")
        assert (len(a.held), len(b.held)) == (128, 128)
        assert (len(a.region_held), len(b.region_held)) == (128, 128)
        us = await _sql(db, "SELECT DISTINCT node FROM pool_leases WHERE region = 'us'")
        assert us == [{"node": "c"}]  # lapsed, waiting for a node of us
        listed = {r.name: r.nodes for r in await db.run(regions.list_regions)}
        assert listed["us"] == []  # a region with no live node is listed, empty

        # a node of us joins: it claims the lapsed region's buckets at a new epoch
        await db.transaction(leases.register_node, "d", 10.0, "us")
        d = await _round(db, "d", "us")
        assert len(d.region_held) == 256 and set(d.region_held.values()) == {2}
        listed = {r.name: [n["name"] for n in r.nodes] for r in await db.run(regions.list_regions)}
        assert listed == {"eu": ["a", "b"], "us": ["d"]}

        # a graceful stop gives back both pools at once
        assert await db.transaction(leases.release_node, "a") == 128
        left = await _sql(db, "SELECT count(*) AS n FROM pool_leases WHERE node = 'a'")
        assert left == [{"n": 0}]


async def test_nodes_list_shows_regions_and_the_monitors_each_node_runs(db: Database) -> None:
    with trio.fail_after(30):
        anywhere = await new_monitor(db, created=T0)
        regional = await new_monitor(db, created=T0)
        await _sql(db, "UPDATE monitors SET regions = '{eu,us}' WHERE id = $1", regional.id)
        for name, region in (("a", "eu"), ("c", "us")):
            await db.transaction(leases.register_node, name, 10.0, region)
        for _ in range(6):
            await _round(db, "a", "eu")
            await _round(db, "c", "us")
        listed = {n.name: n for n in await db.run(leases.list_nodes)}
        assert (listed["a"].region, listed["a"].region_buckets) == ("eu", 256)
        assert (listed["c"].region, listed["c"].region_buckets) == ("us", 256)
        assert listed["a"].buckets + listed["c"].buckets == 256
        # the regional monitor runs on both, the other on one of them
        assert listed["a"].monitors + listed["c"].monitors == 3
        assert min(listed["a"].monitors, listed["c"].monitors) >= 1
        assert anywhere.id != regional.id


def _check(monitor_id: str, created: int) -> CheckRecord:
    return CheckRecord(
        id=new_id("chk"),
        monitor_id=monitor_id,
        status="up",
        response_time_ms=1.0,
        status_code=None,
        error_code=None,
        error_message=None,
        created=created,
    )


async def test_the_fence_checks_the_lease_of_the_pool_the_actor_ran_under(
    db: Database, nursery: trio.Nursery
) -> None:
    """Node ``a`` (eu) holds a bucket in the any-region pool and node ``b`` (eu) the same
    bucket in eu's pool, both at the same epoch: a check ``a``'s actor made under the eu
    lease is refused, one made under the any-region lease is stored."""
    with trio.fail_after(10):
        monitor = await new_monitor(db, created=T0)
        bucket = leases.bucket_of(monitor.id)
        for name in ("a", "b"):
            await db.transaction(leases.register_node, name, 10.0, "eu")
        await _sql(
            db,
            "UPDATE pool_leases SET node = CASE region WHEN '' THEN 'a' ELSE 'b' END, "
            "epoch = 5, expires_at = now() + interval '10 s' WHERE bucket = $1",
            bucket,
        )
        await db.run(checks.ensure_partitions, T0, T0 + 100, 86_400)
        actor = StoreActor(db, StoreSettings(batch_age_seconds=0.01), fence_node="a")
        writer = await nursery.start(actor.run)
        theirs = WriteCheck(check=_check(monitor.id, T0 + 10), lease_epoch=5, lease_region="eu")
        await writer.write(theirs)
        await writer.write(WriteCheck(check=_check(monitor.id, T0 + 20), lease_epoch=5))
        await writer.flush()
        stored = await _sql(db, "SELECT created FROM checks WHERE monitor_id = $1", monitor.id)
        assert stored == [{"created": T0 + 20}]
        assert actor.statistics.fenced_refused == 1
        writer.close()
