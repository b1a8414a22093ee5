"""Fencing (extensions part 6; issue 14, item 2): a node stores a monitor's checks and
status changes, and a heartbeat's status moves, only while it holds the monitor's or
heartbeat's bucket at the lease epoch its actor ran under, unexpired, checked in the
batch's own transaction. (A heartbeat's pings are not fenced: a ping is a fact received
from outside, stored by whichever node received it; the moves it causes are decided by
the owner's actor, and those are fenced.)

The store actor of a node with leases (``StoreActor(fence_node=...)``) calls
:func:`fence` first in every batch's transaction: it reads this node's unexpired leases
on the batch's buckets ``FOR SHARE``, so another node taking one of them (an ``UPDATE``
of the lease row) waits until this batch commits, and the rows written are exactly the
rows the lease covered. Rows whose epoch does not match are refused: counted, dropped,
never retried (another node runs that monitor or heartbeat now). Rows with no epoch
(None: a lone engine, or a write the web layer made) are not fenced.
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
    batch's transaction (the lease rows stay locked ``FOR SHARE`` until it ends)."""
    fenced = [(c.monitor_id, epoch) for c, epoch in checks] + [_fence_of(c) for c in changes]
    epochs = {bucket_of(resource_id) for resource_id, epoch in fenced if epoch is not None}
    if not epochs:
        return [c for c, _ in checks], list(changes), 0
    rows = await connection.fetch(
        "SELECT bucket, epoch FROM bucket_leases WHERE node = $1 AND expires_at > now() "
        "AND bucket = ANY($2::smallint[]) ORDER BY bucket FOR SHARE",
        node,
        sorted(epochs),
    )
    held = {r["bucket"]: r["epoch"] for r in rows}

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
