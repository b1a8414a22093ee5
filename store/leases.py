"""Nodes and their bucket leases (docs/several-nodes.md, Buckets and Leases).

Monitors and heartbeats are split into :data:`BUCKETS` buckets by :func:`bucket_of` (the
first byte of the md5 of the id; the ``bucket`` column of migration 0008 computes the same).
Every node registers itself (:func:`register_node`) and, every third of its lease, renews
(:func:`renew_leases`): it extends the leases it holds, claims free or expired buckets up to
its fair share (``ceil(256 / live nodes)``; each claim bumps the bucket's ``epoch``) and
names, a few at a time, those above it, which it gives back once their actors have stopped
and their checks are stored (:func:`release_buckets`), so a joining node gets some. A
graceful stop gives everything back at once (:func:`release_node`). A registration and every
give-back ``NOTIFY`` the other nodes (:func:`store.notify.notify_leases`), which renew at
once. Every time is the database's clock (``now()``), so nodes' clocks never meet.

Leases are held per pool and bucket (``pool_leases``; docs/several-nodes.md, Regions): the
any-region pool (region :data:`ANY_REGION`), shared by every live node, and one pool per
region, shared by that region's live nodes; a node renews, claims and gives back in both
of its pools with the same rules, and names its leases by slot (:func:`slot_of`).

Query functions (asyncio side), run each with :meth:`store.Database.transaction`. A node
that is not live is taken off the list by hand (:func:`forget_node`, ``uptrio nodes
forget``) or, three days after its last renewal, by the maintenance round
(:func:`prune_nodes`).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Container
from dataclasses import dataclass, field

from .database import Connection
from .notify import notify_leases

__all__ = [
    "ANY_REGION",
    "BUCKETS",
    "REGION_NAME",
    "LeaseRound",
    "NodeRecord",
    "bucket_of",
    "forget_node",
    "held_in_either",
    "list_nodes",
    "prune_nodes",
    "register_node",
    "release_buckets",
    "release_node",
    "renew_leases",
    "slot_of",
    "split_slot",
]

BUCKETS = 256
"""The fixed number of buckets (docs/several-nodes.md, Buckets; fixed, so a bucket's monitors
never move between buckets; 256 leaves a fair share for up to 256 nodes)."""

RELEASE_PER_ROUND = 32
"""At most this many buckets above its share a node gives back per renewal: a joining
node gets buckets within a few renewals, and no node drops half its work at once."""


REGION_NAME = re.compile(r"[a-z0-9-]{1,32}")
"""What a region's name may be (``fullmatch``): ``a-z 0-9 -``, 1 to 32 characters
(docs/several-nodes.md, Regions)."""

ANY_REGION = ""
"""The region of the any-region pool's lease rows (``pool_leases.region``): monitors
without ``regions`` and every heartbeat, run by one node of any region (docs/several-nodes.md,
Regions)."""


def slot_of(bucket: int, regional: bool) -> int:
    """A node's key for one of its leases: ``bucket`` (0 to 255) in the any-region pool,
    ``256 + bucket`` in its own region's pool (a node holds leases in those two pools only,
    so one int names each; docs/several-nodes.md, Regions)."""
    return bucket + BUCKETS if regional else bucket


def split_slot(slot: int, region: str) -> tuple[str, int]:
    """``(pool region, bucket)`` of ``slot`` (:func:`slot_of`) for a node of ``region``:
    :data:`ANY_REGION` for slots below 256."""
    return (region, slot - BUCKETS) if slot >= BUCKETS else (ANY_REGION, slot)


def held_in_either(bucket: int, slots: Container[int]) -> bool:
    """Whether ``slots`` (:func:`slot_of`) has ``bucket`` in either pool."""
    return bucket in slots or bucket + BUCKETS in slots


def bucket_of(resource_id: str) -> int:
    """The bucket (0 to 255) of a monitor's or heartbeat's id: the first byte of its md5,
    as the ``bucket`` column computes it in SQL (``get_byte(decode(md5(id), 'hex'), 0)``)."""
    return hashlib.md5(resource_id.encode()).digest()[0]


@dataclass(frozen=True, slots=True)
class LeaseRound:
    """What one renewal found.

    Attributes:
        held: bucket to lease epoch, every bucket the node holds now in the any-region
            pool (``surplus`` included).
        surplus: buckets of the any-region pool above its share, at most
            :data:`RELEASE_PER_ROUND`, to give back (:func:`release_buckets`) once their
            actors stopped and their results are stored.
        share: its fair share of the any-region pool, ``ceil(256 / live nodes)``.
        live_nodes: nodes renewing (this one included), not stopping.
        settled: True when it holds its share of both pools or no bucket was left to
            claim (the others hold the rest, and give back what is above their share).
        next_expiry_seconds: seconds until the next lease of another node in either of
            its pools expires (the earliest moment a bucket may be claimed, and the share
            may grow: a node that stopped renewing is no longer live then), None when no
            other node holds one.
        region_held, region_surplus, region_share: the same in its region's pool, whose
            share is ``ceil(256 / live nodes of the region)``.
        region_nodes: live nodes of its region (this one included).
    """

    held: dict[int, int]
    share: int
    live_nodes: int
    settled: bool
    next_expiry_seconds: float | None = None
    surplus: frozenset[int] = frozenset()
    region_held: dict[int, int] = field(default_factory=dict)
    region_surplus: frozenset[int] = frozenset()
    region_share: int = 0
    region_nodes: int = 0

    def slots(self) -> tuple[dict[int, int], frozenset[int]]:
        """``(held, surplus)`` of both pools by slot (:func:`slot_of`)."""
        held = self.held | {slot_of(b, True): e for b, e in self.region_held.items()}
        surplus = self.surplus | {slot_of(b, True) for b in self.region_surplus}
        return held, surplus


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """A row of ``uptrio nodes list``: times in epoch seconds (the database's clock);
    ``state`` is ``live``, ``stopped`` (gave its buckets back) or ``expired`` (stopped
    renewing: its leases lapse); ``buckets``: the unexpired leases it holds in the
    any-region pool, ``region_buckets`` in its region's; ``monitors`` and ``heartbeats``:
    the active (not paused) ones it runs under them."""

    name: str
    started: float
    renewed_at: float
    buckets: int
    state: str
    monitors: int = 0
    heartbeats: int = 0
    region: str = "default"
    region_buckets: int = 0


async def register_node(
    connection: Connection, name: str, lease_seconds: float, region: str = "default"
) -> None:
    """Register node ``name`` of ``region`` (a new start: whatever an earlier process of
    that name still held, in any pool, is freed first, so every bucket it claims gets a
    new epoch), making the region's 256 lease rows if it is the region's first node. Run
    in a transaction."""
    await connection.execute(
        "UPDATE pool_leases SET node = NULL, expires_at = now() WHERE node = $1", name
    )
    await connection.execute(
        "INSERT INTO pool_leases (region, bucket) SELECT $1, generate_series(0, $2 - 1) "
        "ON CONFLICT DO NOTHING",
        region,
        BUCKETS,
    )
    await connection.execute(
        "INSERT INTO nodes (name, started, renewed_at, lease_seconds, region) "
        "VALUES ($1, now(), now(), $2, $3) ON CONFLICT (name) DO UPDATE SET "
        "started = now(), renewed_at = now(), lease_seconds = $2, stopping = false, "
        "region = $3",
        name,
        lease_seconds,
        region,
    )
    await notify_leases(connection, name)  # the others renew now: a fair share sooner


_LIVE = "NOT stopping AND renewed_at + make_interval(secs => lease_seconds) > now()"
"""A row of ``nodes`` that is live, in SQL."""


async def renew_leases(
    connection: Connection, name: str, lease_seconds: float, region: str = "default"
) -> LeaseRound:
    """One renewal of node ``name`` of ``region`` (module docstring), in the any-region
    pool and in its region's pool alike: extend its leases to ``now() + lease_seconds``,
    then in each pool claim up to its share there (the any-region pool shared by every
    live node, the region's by the live nodes of the region) or name the surplus above it
    (at most :data:`RELEASE_PER_ROUND` a pool, given back later by
    :func:`release_buckets`). A lease of its own that expired (a database outage) and that
    no node claimed meanwhile is extended at the same epoch: nobody else wrote for that
    bucket, so the results the node buffered meanwhile are still its to store. Run in a
    transaction."""
    await connection.execute(
        "INSERT INTO nodes (name, started, renewed_at, lease_seconds, region) "
        "VALUES ($1, now(), now(), $2, $3) ON CONFLICT (name) DO UPDATE SET "
        "renewed_at = now(), lease_seconds = $2, stopping = false, region = $3",
        name,
        lease_seconds,
        region,
    )
    pools = (ANY_REGION, region)
    # Rows locked in (region, bucket) order, as the store actor's fence takes them
    # (store.fencing); a plain UPDATE locks in the table's physical order and deadlocked
    # with a batch of this node's once in a 10-minute run at 40,000.
    rows = await connection.fetch(
        "WITH mine AS (SELECT region, bucket FROM pool_leases WHERE node = $1 "
        "AND region = ANY($3::text[]) ORDER BY region, bucket FOR UPDATE) "
        "UPDATE pool_leases b SET expires_at = now() + make_interval(secs => $2) "
        "FROM mine WHERE b.region = mine.region AND b.bucket = mine.bucket AND b.node = $1 "
        "RETURNING b.region, b.bucket, b.epoch",
        name,
        lease_seconds,
        list(pools),
    )
    held: dict[str, dict[int, int]] = {pool: {} for pool in pools}
    for r in rows:
        held[r["region"]][r["bucket"]] = r["epoch"]
    counts = await connection.fetchrow(
        f"SELECT count(*) AS live, count(*) FILTER (WHERE region = $1) AS here "
        f"FROM nodes WHERE {_LIVE}",
        region,
    )
    live, here = max(1, int(counts["live"])), max(1, int(counts["here"]))
    shares = {ANY_REGION: math.ceil(BUCKETS / live), region: math.ceil(BUCKETS / here)}
    settled = True
    surplus: dict[str, frozenset[int]] = {}
    for pool in pools:
        mine, share = held[pool], shares[pool]
        surplus[pool] = (
            frozenset(sorted(mine)[-min(RELEASE_PER_ROUND, len(mine) - share) :])
            if len(mine) > share
            else frozenset()
        )
        if len(mine) < share:
            claimed = await _claim(connection, name, lease_seconds, pool, share - len(mine))
            settled = settled and (
                len(claimed) == share - len(mine)
                or not await connection.fetchval(
                    "SELECT EXISTS (SELECT 1 FROM pool_leases WHERE region = $1 "
                    "AND (node IS NULL OR expires_at <= now()))",
                    pool,
                )
            )
            mine.update(claimed)
    next_expiry = await connection.fetchval(
        "SELECT extract(epoch FROM min(expires_at) - now())::float8 FROM pool_leases "
        "WHERE node <> $1 AND expires_at > now() AND region = ANY($2::text[])",
        name,
        list(pools),
    )
    return LeaseRound(
        held=held[ANY_REGION],
        share=shares[ANY_REGION],
        live_nodes=live,
        settled=settled,
        next_expiry_seconds=next_expiry,
        surplus=surplus[ANY_REGION],
        region_held=held[region],
        region_surplus=surplus[region],
        region_share=shares[region],
        region_nodes=here,
    )


async def _claim(
    connection: Connection, name: str, lease_seconds: float, pool: str, wanted: int
) -> dict[int, int]:
    """Claim up to ``wanted`` free or expired buckets of ``pool`` (a region, or
    :data:`ANY_REGION`) for node ``name``, each at a new epoch; returns bucket to epoch."""
    claimed = await connection.fetch(
        "UPDATE pool_leases b SET node = $1, epoch = b.epoch + 1, "
        "expires_at = now() + make_interval(secs => $2) WHERE b.region = $3 AND b.bucket IN ("
        " SELECT bucket FROM pool_leases WHERE region = $3 "
        " AND (node IS NULL OR expires_at <= now())"
        " ORDER BY bucket LIMIT $4 FOR UPDATE SKIP LOCKED) RETURNING bucket, epoch",
        name,
        lease_seconds,
        pool,
        wanted,
    )
    return {r["bucket"]: r["epoch"] for r in claimed}


async def release_buckets(
    connection: Connection, name: str, buckets: dict[int, int], region: str = "default"
) -> int:
    """Give back the leases of node ``name`` of ``region`` on ``buckets`` (slot,
    :func:`slot_of`, to the epoch it holds it at; a lease it no longer holds at that epoch
    is left alone) and tell the other nodes, which claim them at once. Returns the leases
    given back. Run in a transaction."""
    keys = [split_slot(slot, region) for slot in buckets]
    released = await connection.fetch(
        "WITH gone AS (SELECT b.region, b.bucket FROM pool_leases b "
        "JOIN unnest($2::text[], $3::smallint[], $4::bigint[]) AS g(region, bucket, epoch) "
        "ON g.region = b.region AND g.bucket = b.bucket AND g.epoch = b.epoch "
        "WHERE b.node = $1 ORDER BY b.region, b.bucket FOR UPDATE OF b) "
        "UPDATE pool_leases b SET node = NULL, expires_at = now() "
        "FROM gone WHERE b.region = gone.region AND b.bucket = gone.bucket RETURNING b.bucket",
        name,
        [pool for pool, _ in keys],
        [bucket for _, bucket in keys],
        list(buckets.values()),
    )
    if released:
        await notify_leases(connection, name)  # claimed at once by a node below its share
    return len(released)


async def release_node(connection: Connection, name: str) -> int:
    """A graceful stop: give back every lease node ``name`` holds, in both its pools, at
    once, and mark it stopping (no longer counted in the others' share). Returns the
    buckets of the any-region pool given back (its region's go back with them). Run in a
    transaction."""
    released = await connection.fetch(
        "UPDATE pool_leases SET node = NULL, expires_at = now() WHERE node = $1 RETURNING region",
        name,
    )
    await connection.execute(
        "UPDATE nodes SET stopping = true, renewed_at = now() WHERE name = $1", name
    )
    await notify_leases(connection, name)
    return sum(r["region"] == ANY_REGION for r in released)


_STATE = (
    "CASE WHEN n.stopping THEN 'stopped' "
    "WHEN n.renewed_at + make_interval(secs => n.lease_seconds) > now() THEN 'live' "
    "ELSE 'expired' END"
)
"""A node's state in SQL (the row ``n`` of ``nodes``): stopped, live or expired."""


async def list_nodes(connection: Connection) -> list[NodeRecord]:
    """Every node registered, by name, with the unexpired leases it holds in each of its
    two pools and the active monitors and heartbeats it runs under them (a monitor without
    ``regions`` and a heartbeat under the any-region pool's, a monitor listing the node's
    region under that region's)."""
    rows = await connection.fetch(
        "WITH held AS (SELECT region, bucket, node FROM pool_leases WHERE expires_at > now()) "
        "SELECT n.name, n.region, extract(epoch FROM n.started)::float8 AS started, "
        "extract(epoch FROM n.renewed_at)::float8 AS renewed_at, "
        "(SELECT count(*) FROM held b WHERE b.node = n.name AND b.region = '') AS buckets, "
        "(SELECT count(*) FROM held b WHERE b.node = n.name AND b.region = n.region) "
        " AS region_buckets, "
        "(SELECT count(*) FROM monitors m JOIN held b USING (bucket) "
        " WHERE b.node = n.name AND m.status <> 'paused' AND (m.regions IS NULL "
        " AND b.region = '' OR b.region = n.region AND n.region = ANY(m.regions)))"
        " AS monitors, "
        "(SELECT count(*) FROM heartbeats h JOIN held b USING (bucket) "
        " WHERE b.node = n.name AND b.region = '' AND h.status <> 'paused') AS heartbeats, "
        f"{_STATE} AS state FROM nodes n ORDER BY n.name"
    )
    return [
        NodeRecord(
            r["name"],
            r["started"],
            r["renewed_at"],
            int(r["buckets"]),
            r["state"],
            int(r["monitors"]),
            int(r["heartbeats"]),
            r["region"],
            int(r["region_buckets"]),
        )
        for r in rows
    ]


async def forget_node(connection: Connection, name: str) -> str | None:
    """Take node ``name`` off the list unless it is live; returns its state (``live``:
    kept; ``stopped`` or ``expired``: forgotten), None when there is no such node. Its
    lapsed leases are cleared (a live node holds none of its buckets anyway). A node
    forgotten that runs after all registers again at its next renewal. Run in a
    transaction."""
    state: str | None = await connection.fetchval(
        f"SELECT {_STATE} FROM nodes n WHERE n.name = $1 FOR UPDATE", name
    )
    if state is None or state == "live":
        return state
    await connection.execute("DELETE FROM nodes WHERE name = $1", name)
    await connection.execute(
        "UPDATE pool_leases SET node = NULL WHERE node = $1 AND expires_at <= now()", name
    )
    return state


async def prune_nodes(connection: Connection, older_than_seconds: float) -> list[str]:
    """Forget (as :func:`forget_node`) every node that is not live and last renewed more
    than ``older_than_seconds`` ago by the database's clock; returns their names."""
    names: list[str] = [
        r["name"]
        for r in await connection.fetch(
            f"DELETE FROM nodes n WHERE {_STATE} <> 'live' "
            "AND n.renewed_at < now() - make_interval(secs => $1) RETURNING n.name",
            older_than_seconds,
        )
    ]
    await connection.execute(
        "UPDATE pool_leases SET node = NULL WHERE node = ANY($1) AND expires_at <= now()",
        names,
    )
    return names
