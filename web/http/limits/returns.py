"""The ``limits`` actor: what a node's leased quota left unused goes back to the
database, and what stopped counting is forgotten (:mod:`web.http.limits.quota`)."""

from __future__ import annotations

import trio

from .lease import GIVE_BACK_SECONDS
from .quota import QuotaLimiter

__all__ = ["SWEEP_SECONDS", "run_quota_returns"]

SWEEP_SECONDS = 60.0
"""Period of the deletion of rows and leases whose every slice stopped counting, seconds."""


async def run_quota_returns(
    limiter: QuotaLimiter, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """The ``limits`` actor: every :data:`~web.http.limits.lease.GIVE_BACK_SECONDS` give back what
    ``limiter``'s leases left unused in slices that ended and charge its debts
    (:meth:`~web.http.limits.quota.QuotaLimiter.give_back`), and every :data:`SWEEP_SECONDS` forget
    what stopped counting (:meth:`~web.http.limits.quota.QuotaLimiter.sweep`). Cancelled (the node
    stopping), it gives back the current slices' unused parts too, within one exchange's deadline.
    Never raises a database error."""
    task_status.started()
    swept = trio.current_time()
    try:
        while True:
            await trio.sleep(GIVE_BACK_SECONDS)
            await limiter.give_back()
            if trio.current_time() - swept >= SWEEP_SECONDS:
                swept = trio.current_time()
                await limiter.sweep()
    finally:
        with trio.CancelScope(shield=True):
            await limiter.give_back(everything=True)
