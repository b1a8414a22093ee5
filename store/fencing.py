"""Fencing (extensions part 6; issue 14, item 2): a node stores a monitor's checks and
status changes only while it holds the monitor's bucket at the lease epoch its actor ran
under, unexpired, checked in the batch's own transaction.

The store actor of a node with leases (``StoreActor(fence_node=...)``) calls
:func:`fence` first in every batch's transaction: it reads this node's unexpired leases
on the batch's buckets ``FOR SHARE``, so another node taking one of them (an ``UPDATE``
of the lease row) waits until this batch commits, and the rows written are exactly the
rows the lease covered. Rows whose epoch does not match are refused: counted, dropped,
never retried (another node runs that monitor now). Rows with no epoch (None: a lone
engine, or a write the web layer made) are not fenced.
"""

from __future__ import annotations

from collections.abc import Sequence

from .buffer import Change
from .checks import StatusChange
from .database import Connection
from .leases import bucket_of
from .records import CheckRecord

__all__ = ["fence"]


async def fence(
    connection: Connection,
    node: str,
    checks: Sequence[tuple[CheckRecord, int | None]],
    changes: Sequence[Change],
) -> tuple[list[CheckRecord], list[Change], int]:
    """``(checks kept, changes kept, rows refused)`` of one batch of node ``node``:
    ``checks`` pairs each check with the lease epoch it was probed under. Must run in the
    batch's transaction (the lease rows stay locked ``FOR SHARE`` until it ends)."""
    epochs = {bucket_of(c.monitor_id) for c, epoch in checks if epoch is not None}
    epochs |= {
        bucket_of(c.monitor_id)
        for c in changes
        if isinstance(c, StatusChange) and c.lease_epoch is not None
    }
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
    kept_changes = [
        c
        for c in changes
        if not isinstance(c, StatusChange) or covered(c.monitor_id, c.lease_epoch)
    ]
    refused = len(checks) - len(kept_checks) + len(changes) - len(kept_changes)
    return kept_checks, kept_changes, refused
