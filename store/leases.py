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

Query functions (asyncio side), run each with :meth:`store.Database.transaction`. A node
that is not live is taken off the list by hand (:func:`forget_node`, ``uptrio nodes
forget``) or, three days after its last renewal, by the maintenance round
(:func:`prune_nodes`).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from .database import Connection
from .notify import notify_leases

__all__ = [
    "BUCKETS",
    "LeaseRound",
    "NodeRecord",
    "bucket_of",
    "forget_node",
    "list_nodes",
    "prune_nodes",
    "register_node",
    "release_buckets",
    "release_node",
    "renew_leases",
]

BUCKETS = 256
"""The fixed number of buckets (docs/several-nodes.md, Buckets; fixed, so a bucket's monitors
never move between buckets; 256 leaves a fair share for up to 256 nodes)."""

RELEASE_PER_ROUND = 32
"""At most this many buckets above its share a node gives back per renewal: a joining
node gets buckets within a few renewals, and no node drops half its work at once."""


def bucket_of(resource_id: str) -> int:
    """The bucket (0 to 255) of a monitor's or heartbeat's id: the first byte of its md5,
    as the ``bucket`` column computes it in SQL (``get_byte(decode(md5(id), 'hex'), 0)``)."""
    return hashlib.md5(resource_id.encode()).digest()[0]


@dataclass(frozen=True, slots=True)
class LeaseRound:
    """What one renewal found.

    Attributes:
        held: bucket to lease epoch, every bucket the node holds now (``surplus``
            included).
        surplus: buckets above its share, at most :data:`RELEASE_PER_ROUND`, to give back
            (:func:`release_buckets`) once their actors stopped and their results are
            stored.
        share: its fair share, ``ceil(256 / live nodes)``.
        live_nodes: nodes renewing (this one included), not stopping.
        settled: True when it holds its share or no bucket was left to claim (the
            others hold the rest, and give back what is above their share).
        next_expiry_seconds: seconds until the next lease of another node expires (the
            earliest moment a bucket may be claimed, and the share may grow: a node
            that stopped renewing is no longer live then), None when no other node
            holds a lease.
    """

    held: dict[int, int]
    share: int
    live_nodes: int
    settled: bool
    next_expiry_seconds: float | None = None
    surplus: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """A row of ``uptrio nodes list``: times in epoch seconds (the database's clock);
    ``state`` is ``live``, ``stopped`` (gave its buckets back) or ``expired`` (stopped
    renewing: its leases lapse); ``monitors`` and ``heartbeats``: the active (not paused)
    ones in the buckets it holds, which it runs."""

    name: str
    started: float
    renewed_at: float
    buckets: int
    state: str
    monitors: int = 0
    heartbeats: int = 0


async def register_node(connection: Connection, name: str, lease_seconds: float) -> None:
    """Register node ``name`` (a new start: whatever an earlier process of that name still
    held is freed first, so every bucket it claims gets a new epoch). Run in a
    transaction."""
    await connection.execute(
        "UPDATE bucket_leases SET node = NULL, expires_at = now() WHERE node = $1", name
    )
    await connection.execute(
        "INSERT INTO nodes (name, started, renewed_at, lease_seconds) "
        "VALUES ($1, now(), now(), $2) ON CONFLICT (name) DO UPDATE SET "
        "started = now(), renewed_at = now(), lease_seconds = $2, stopping = false",
        name,
        lease_seconds,
    )
    await notify_leases(connection, name)  # the others renew now: a fair share sooner


async def renew_leases(connection: Connection, name: str, lease_seconds: float) -> LeaseRound:
    """One renewal of node ``name`` (module docstring): extend its leases to
    ``now() + lease_seconds``, then claim up to its share or name the surplus above it (at
    most :data:`RELEASE_PER_ROUND`, given back later by :func:`release_buckets`). A lease of
    its own that expired (a database outage) and that no node claimed meanwhile is extended
    at the same epoch: nobody else wrote for that bucket, so the results the node buffered
    meanwhile are still its to store. Run in a transaction."""
    await connection.execute(
        "INSERT INTO nodes (name, started, renewed_at, lease_seconds) "
        "VALUES ($1, now(), now(), $2) ON CONFLICT (name) DO UPDATE SET "
        "renewed_at = now(), lease_seconds = $2, stopping = false",
        name,
        lease_seconds,
    )
    # Rows locked in bucket order, as the store actor's fence takes them (FOR SHARE,
    # ORDER BY bucket: store.fencing); a plain UPDATE locks in the table's physical order
    # and deadlocked with a batch of this node's once in a 10-minute run at 40,000.
    rows = await connection.fetch(
        "WITH mine AS (SELECT bucket FROM bucket_leases WHERE node = $1 "
        "ORDER BY bucket FOR UPDATE) "
        "UPDATE bucket_leases b SET expires_at = now() + make_interval(secs => $2) "
        "FROM mine WHERE b.bucket = mine.bucket AND b.node = $1 RETURNING b.bucket, b.epoch",
        name,
        lease_seconds,
    )
    held = {r["bucket"]: r["epoch"] for r in rows}
    live = await connection.fetchval(
        "SELECT count(*) FROM nodes WHERE NOT stopping "
        "AND renewed_at + make_interval(secs => lease_seconds) > now()"
    )
    live = max(1, int(live))
    share = math.ceil(BUCKETS / live)
    settled = True
    if len(held) < share:
        wanted = share - len(held)
        claimed = await connection.fetch(
            "UPDATE bucket_leases b SET node = $1, epoch = b.epoch + 1, "
            "expires_at = now() + make_interval(secs => $2) WHERE b.bucket IN ("
            " SELECT bucket FROM bucket_leases WHERE node IS NULL OR expires_at <= now()"
            " ORDER BY bucket LIMIT $3 FOR UPDATE SKIP LOCKED) RETURNING bucket, epoch",
            name,
            lease_seconds,
            wanted,
        )
        held.update((r["bucket"], r["epoch"]) for r in claimed)
        settled = len(claimed) == wanted or not await connection.fetchval(
            "SELECT EXISTS (SELECT 1 FROM bucket_leases WHERE node IS NULL OR expires_at <= now())"
        )
    next_expiry = await connection.fetchval(
        "SELECT extract(epoch FROM min(expires_at) - now())::float8 FROM bucket_leases "
        "WHERE node <> $1 AND expires_at > now()",
        name,
    )
    surplus: frozenset[int] = frozenset()
    if len(held) > share:
        surplus = frozenset(sorted(held)[-min(RELEASE_PER_ROUND, len(held) - share) :])
    return LeaseRound(
        held=held,
        share=share,
        live_nodes=live,
        settled=settled,
        next_expiry_seconds=next_expiry,
        surplus=surplus,
    )


async def release_buckets(connection: Connection, name: str, buckets: dict[int, int]) -> int:
    """Give back the leases of node ``name`` on ``buckets`` (bucket to the epoch it holds
    them at; a bucket it no longer holds at that epoch is left alone) and tell the other
    nodes, which claim them at once. Returns the buckets given back. Run in a
    transaction."""
    released = await connection.fetch(
        "WITH gone AS (SELECT b.bucket FROM bucket_leases b "
        "JOIN unnest($2::smallint[], $3::bigint[]) AS g(bucket, epoch) "
        "ON g.bucket = b.bucket AND g.epoch = b.epoch "
        "WHERE b.node = $1 ORDER BY b.bucket FOR UPDATE OF b) "
        "UPDATE bucket_leases b SET node = NULL, expires_at = now() "
        "FROM gone WHERE b.bucket = gone.bucket RETURNING b.bucket",
        name,
        list(buckets),
        list(buckets.values()),
    )
    if released:
        await notify_leases(connection, name)  # claimed at once by a node below its share
    return len(released)


async def release_node(connection: Connection, name: str) -> int:
    """A graceful stop: give back every bucket node ``name`` holds, at once, and mark it
    stopping (no longer counted in the others' share). Returns the buckets given back.
    Run in a transaction."""
    released = await connection.fetch(
        "UPDATE bucket_leases SET node = NULL, expires_at = now() WHERE node = $1 RETURNING bucket",
        name,
    )
    await connection.execute(
        "UPDATE nodes SET stopping = true, renewed_at = now() WHERE name = $1", name
    )
    await notify_leases(connection, name)
    return len(released)


_STATE = (
    "CASE WHEN n.stopping THEN 'stopped' "
    "WHEN n.renewed_at + make_interval(secs => n.lease_seconds) > now() THEN 'live' "
    "ELSE 'expired' END"
)
"""A node's state in SQL (the row ``n`` of ``nodes``): stopped, live or expired."""


async def list_nodes(connection: Connection) -> list[NodeRecord]:
    """Every node registered, by name, with the unexpired buckets it holds and the active
    monitors and heartbeats in them."""
    rows = await connection.fetch(
        "WITH held AS (SELECT bucket, node FROM bucket_leases WHERE expires_at > now()) "
        "SELECT n.name, extract(epoch FROM n.started)::float8 AS started, "
        "extract(epoch FROM n.renewed_at)::float8 AS renewed_at, "
        "(SELECT count(*) FROM held b WHERE b.node = n.name) AS buckets, "
        "(SELECT count(*) FROM monitors m JOIN held b USING (bucket) "
        " WHERE b.node = n.name AND m.status <> 'paused') AS monitors, "
        "(SELECT count(*) FROM heartbeats h JOIN held b USING (bucket) "
        f" WHERE b.node = n.name AND h.status <> 'paused') AS heartbeats, {_STATE} AS state "
        "FROM nodes n ORDER BY n.name"
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
        "UPDATE bucket_leases SET node = NULL WHERE node = $1 AND expires_at <= now()", name
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
        "UPDATE bucket_leases SET node = NULL WHERE node = ANY($1) AND expires_at <= now()",
        names,
    )
    return names
