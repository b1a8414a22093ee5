"""Fencing (extensions part 6; README: Several nodes): a node stores a monitor's checks
and status changes, and a heartbeat's status moves, only while it holds the monitor's or
heartbeat's bucket at the lease epoch its actor ran under, checked in the batch's own
transaction. (A heartbeat's pings are not fenced: a ping is a fact received from outside,
stored by whichever node received it; the moves it causes are decided by the owner's
actor, and those are fenced.)

The store actor of a node with leases (``StoreActor(fence_node=...)``) calls
:func:`fence` first in every batch's transaction: it locks this node's lease rows of the
batch's buckets ``FOR UPDATE`` (in bucket order, as the lease renewal does), so another
node taking one of them waits until this batch commits (or skips it: a claim takes only
unlocked rows), and the rows written are exactly the rows the lease covered.

A lease of this node that *expired* but that no other node claimed since (still this
node's, at the same epoch: a claim always bumps the epoch) still covers its rows: nobody
else probed or wrote for that bucket meanwhile. That is the case after a database outage
longer than a lease, when the store writes what it buffered before the lease actor's
next renewal: the fence renews such leases in the batch's transaction (``now()`` plus the
node's ``lease_seconds``) and writes the rows. Rows whose bucket another node holds now,
or holds at another epoch, are refused: counted, dropped, never retried, and the store
actor logs and counts them as dropped (``uptrio_store_rows_dropped_total`` and
``uptrio_fenced_writes_refused_total``). Rows with no epoch (None: a lone engine, or a write the web
layer made) are not fenced.
"""

from __future__ import annotations

from collections.abc import Sequence

from .buffer import Change
from .checks import StatusChange
from .database import Connection
from .leases import bucket_of
from .pings import HeartbeatChange
from .records import CheckRecord

__all__ = ["fence"]


async def fence(
    connection: Connection,
    node: str,
    checks: Sequence[tuple[CheckRecord, int | None]],
    changes: Sequence[Change],
) -> tuple[list[CheckRecord], list[Change], int]:
    """``(checks kept, changes kept, rows refused)`` of one batch of node ``node``:
    ``checks`` pairs each check with the lease epoch it was probed under; ``changes`` are
    monitors' status changes and heartbeats' moves, each with its own. Must run in the
    batch's transaction (the lease rows stay locked until it ends). This node's leases
    that expired unclaimed are renewed here (module docstring)."""
    fenced = [(c.monitor_id, epoch) for c, epoch in checks] + [_fence_of(c) for c in changes]
    buckets = {bucket_of(resource_id) for resource_id, epoch in fenced if epoch is not None}
    if not buckets:
        return [c for c, _ in checks], list(changes), 0
    rows = await connection.fetch(
        "SELECT bucket, epoch, expires_at > now() AS live FROM bucket_leases "
        "WHERE node = $1 AND bucket = ANY($2::smallint[]) ORDER BY bucket FOR UPDATE",
        node,
        sorted(buckets),
    )
    held = {r["bucket"]: r["epoch"] for r in rows}
    if lapsed := [r["bucket"] for r in rows if not r["live"]]:
        await connection.execute(
            "UPDATE bucket_leases b "
            "SET expires_at = now() + make_interval(secs => n.lease_seconds) FROM nodes n"
            " WHERE n.name = $1 AND b.node = $1 AND b.bucket = ANY($2::smallint[])",
            node,
            lapsed,
        )

    def covered(monitor_id: str, epoch: int | None) -> bool:
        return epoch is None or held.get(bucket_of(monitor_id)) == epoch

    kept_checks = [c for c, epoch in checks if covered(c.monitor_id, epoch)]
    kept_changes = [c for c in changes if covered(*_fence_of(c))]
    refused = len(checks) - len(kept_checks) + len(changes) - len(kept_changes)
    return kept_checks, kept_changes, refused


def _fence_of(change: Change) -> tuple[str, int | None]:
    """The monitor's or heartbeat's id a change belongs to, and its lease epoch."""
    if isinstance(change, StatusChange):
        return change.monitor_id, change.lease_epoch
    if isinstance(change, HeartbeatChange):
        return change.heartbeat_id, change.lease_epoch
    raise TypeError(f"not a change: {change!r}")
