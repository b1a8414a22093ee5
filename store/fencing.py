"""Fencing (docs/several-nodes.md; docs/several-nodes.md, "Fencing" and the section after it):
a node stores an item or a status move of a batch (:mod:`store.family`) only while it holds
the bucket of the item's or move's resource, in the pool its actor ran under
(``lease_region``: docs/several-nodes.md, Regions), at the lease epoch its actor ran under,
as its batch's own transaction finds it. Items and moves without an epoch (None: a lone
engine, a write the web layer made, or a row that is a fact received from outside, stored by
whichever node received it) are not fenced.

The store actor of a node with leases (``StoreActor(fence_node=...)``) calls
:func:`fence` first in every batch's transaction: it locks this node's lease rows of the
batch's buckets ``FOR UPDATE`` (in (region, bucket) order, as the lease renewal does), so another
node taking one of them waits until this batch commits (or skips it: a claim takes only
unlocked rows), and the rows written are exactly the rows the lease covered.

A lease of this node that *expired* but that no other node claimed since (still this
node's, at the same epoch: a claim always bumps the epoch) still covers its rows: nobody
else worked for that bucket meanwhile. That is the case after a database outage longer
than a lease, when the store writes what it buffered before the lease actor's next
renewal: the fence renews such leases in the batch's transaction (``now()`` plus the
node's ``lease_seconds``) and writes the rows. Items and moves whose bucket another node
holds now, or holds at another epoch, are refused: counted, dropped, never retried, and
the store actor logs and counts them as dropped (``uptrio_store_rows_dropped_total`` and
``uptrio_fenced_writes_refused_total``).
"""

from __future__ import annotations

from collections.abc import Sequence

from .database import Connection
from .family import Fenced, Part
from .leases import ANY_REGION, bucket_of

__all__ = ["fence"]


async def fence(connection: Connection, node: str, parts: Sequence[Part]) -> tuple[list[Part], int]:
    """``(parts kept, items and moves refused)`` of one batch of node ``node``: each part
    with the items and moves this node's leases cover (module docstring), each one tested
    against the lease of its pool (``lease_region``: a region's, or None: the any-region
    pool's; docs/several-nodes.md, Regions). Must run in the batch's transaction (the
    lease rows stay locked until it ends). This node's leases that expired unclaimed are
    renewed here."""
    fenced = [
        (row, _key(row))
        for part in parts
        for rows in (part.items, part.moves)
        for row in rows
        if row.lease_epoch is not None
    ]
    if not fenced:
        return list(parts), 0
    ordered = sorted({key for _, key in fenced})
    rows = await connection.fetch(
        "SELECT b.region, b.bucket, b.epoch, b.expires_at > now() AS live "
        "FROM pool_leases b JOIN unnest($2::text[], $3::smallint[]) AS k(region, bucket) "
        "ON k.region = b.region AND k.bucket = b.bucket "
        "WHERE b.node = $1 ORDER BY b.region, b.bucket FOR UPDATE OF b",
        node,
        [region for region, _ in ordered],
        [bucket for _, bucket in ordered],
    )
    held = {(r["region"], r["bucket"]): r["epoch"] for r in rows}
    if lapsed := [(r["region"], r["bucket"]) for r in rows if not r["live"]]:
        await connection.execute(
            "UPDATE pool_leases b "
            "SET expires_at = now() + make_interval(secs => n.lease_seconds) FROM nodes n, "
            "unnest($2::text[], $3::smallint[]) AS k(region, bucket)"
            " WHERE n.name = $1 AND b.node = $1 AND b.region = k.region AND b.bucket = k.bucket",
            node,
            [region for region, _ in lapsed],
            [bucket for _, bucket in lapsed],
        )
    refused = {id(row) for row, key in fenced if held.get(key) != row.lease_epoch}
    if not refused:
        return list(parts), 0
    kept = [
        Part(
            part.family,
            [item for item in part.items if id(item) not in refused],
            [move for move in part.moves if id(move) not in refused],
        )
        for part in parts
    ]
    return kept, len(refused)


def _key(row: Fenced) -> tuple[str, int]:
    """The lease row covering ``row``: (its pool's region, its bucket)."""
    region = row.lease_region
    return (ANY_REGION if region is None else region, bucket_of(row.resource_id))
