"""The rate-limit sync: the actor that makes the limits of spec part 8 hold across nodes
(extensions part 6: "rate limits hold for the whole service"; issue 14, item 4).

Kong's "cluster" rate limiting with a sync rate: every node keeps deciding alone from
memory (:class:`web.ratelimit.RateLimiter`; no request ever waits on the database), and
this actor, every :data:`SYNC_SECONDS`, runs one statement (:func:`store.rate_limits.
sync_counts`, at most :data:`SYNC_DEADLINE_SECONDS`): it stores this node's counts of the
slices counted in since the last sync, deletes expired slices, and reads back the other
nodes' counts of the keys this node holds, which the limiter then counts beside its own.

Overshoot (README, "Rate limits across nodes"): a node learns of another's requests at
most about two sync intervals plus two round trips after they were admitted (the other's
next sync, then its own), so over a limit the whole service admits at most what the
other nodes admit for that key in that time, ~1 s.

The database unreachable: one warning ``rate limits counted by this node alone``; the
node goes on deciding with what it knows (its own counts, and the others' last known
counts until they expire), and the changes it could not store are sent at the next
sync that works (``rate limits shared again``). Never a 500, never a waiting request.
"""

from __future__ import annotations

import structlog
import trio

from store import Database, StoreError, rate_limits

from .ratelimit import RateLimiter

__all__ = ["SYNC_DEADLINE_SECONDS", "SYNC_SECONDS", "run_limit_sync"]

log = structlog.get_logger("uptrio.limits")

SYNC_SECONDS = 0.5
"""Seconds between two syncs (design decision: half a second bounds the overshoot to
about one second of the other nodes' traffic at two small statements a second a node)."""

SYNC_DEADLINE_SECONDS = 2.0
"""Longest one sync statement may take, in seconds; past it the sync counts as failed."""


async def sync_once(db: Database, limiter: RateLimiter, node: str) -> None:
    """One sync of ``limiter`` for node ``node`` (module docstring); the changes taken are
    handed back to the limiter when the statement fails.

    Raises:
        store.StoreError: the statement failed or passed its deadline.
    """
    changes = limiter.take_changes()
    keys = limiter.shared_keys()
    if not changes and not keys:
        return
    try:
        counts = await db.run(rate_limits.sync_counts, node, changes, keys, limiter.clock())
    except BaseException:
        limiter.requeue(changes)
        raise
    limiter.merge_remote(keys, counts)


async def run_limit_sync(
    db: Database,
    limiter: RateLimiter,
    node: str,
    *,
    interval_seconds: float = SYNC_SECONDS,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Sync ``limiter`` every ``interval_seconds`` (seconds) until cancelled (module
    docstring); ``db`` is given :data:`SYNC_DEADLINE_SECONDS`. Never raises a database
    error: a failed sync is logged once, when sharing stops, and retried."""
    db = db.with_deadline(SYNC_DEADLINE_SECONDS)
    alone = False
    task_status.started()
    while True:
        await trio.sleep(interval_seconds)
        try:
            await sync_once(db, limiter, node)
        except StoreError as exc:
            if not alone:
                log.warning("rate limits counted by this node alone", node=node, error=str(exc))
            alone = True
            continue
        if alone:
            log.info("rate limits shared again", node=node)
        alone = False
