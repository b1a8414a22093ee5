"""One node's lease on one window of one key, and the decisions read from it (pure: no I/O,
no clock of its own): the bookkeeping of :class:`web.http.limits.quota.QuotaLimiter`
(docs/several-nodes.md, Rate limits across nodes).

A :class:`Lease` holds what the node may still admit in its slice, what it owes the
database (unused parts to give back, requests admitted alone to charge) and what the
database said at the last exchange (the window's count, its oldest slice, and when full,
the slice whose end leaves room), from which :func:`allowed_decision` and
:func:`refused_decision` give the same figures as :class:`web.http.limits.rolling.RateLimiter`
does for a window it counts alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import trio

from store.rate_limits import QuotaItem

from .rolling import SUB_WINDOWS, Decision, Window

__all__ = [
    "GIVE_BACK_SECONDS",
    "RECHECK_SECONDS",
    "SETTLE_SECONDS",
    "Flight",
    "Lease",
    "allowed_decision",
    "quota_item",
    "recheck_at",
    "refused_decision",
]

RECHECK_SECONDS = 1.0
"""Longest a node refuses from memory a window found full before it asks again, seconds."""

GIVE_BACK_SECONDS = 0.25
"""Period of :func:`web.http.limits.returns.run_quota_returns`, seconds: how late an idle key's
unused lease goes back after its slice ended."""

SETTLE_SECONDS = GIVE_BACK_SECONDS + 0.05
"""After a slice ends, seconds by which the nodes gave back its unused leases (a period
of :func:`web.http.limits.returns.run_quota_returns` and its statement)."""


class Flight:
    """One exchange in progress: the requests needing one of its leases wait for it."""

    __slots__ = ("done", "ok")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.ok = False


class Lease:
    """This node's lease on one window of one key, and what the database last said.

    ``left``: requests this node may still admit in ``slice``. ``pending``: slice ->
    requests to charge there at the next exchange (negative: unused, to give back).
    ``counted``, ``oldest``, ``retry``: the window's count, its oldest slice and, when
    full, the slice whose end leaves room, as of the last exchange for ``slice``.
    ``full_until``: clock time before which the window is refused without asking;
    ``full``: the last exchange found no room (a peek asks again before it allows).
    ``waiting``: requests waiting for a lease (the next one asked is at least that)."""

    __slots__ = (
        "counted",
        "flight",
        "full",
        "full_until",
        "key",
        "left",
        "limit",
        "name",
        "oldest",
        "pending",
        "retry",
        "slice",
        "slice_seconds",
        "waiting",
    )

    def __init__(self, window: Window, key: str) -> None:
        self.name = window.name
        self.key = key
        self.limit = window.limit
        self.slice_seconds = window.period_seconds / SUB_WINDOWS
        self.slice = -1
        self.left = 0
        self.pending: dict[int, int] = {}
        self.counted = 0
        self.oldest: int | None = None
        self.retry: int | None = None
        self.full_until = -math.inf
        self.full = False
        self.flight: Flight | None = None
        self.waiting = 0

    def expiry(self, slice_number: int) -> float:
        """When slice ``slice_number`` stops counting (clock seconds)."""
        return (slice_number + 1 + SUB_WINDOWS) * self.slice_seconds

    def reset_after(self, now: float) -> float:
        """Seconds until the oldest slice counted stops counting (0: none)."""
        return max(self.expiry(self.oldest) - now, 0.0) if self.oldest is not None else 0.0

    def owe(self, slice_number: int, requests: int) -> None:
        """Add ``requests`` (negative: unused) to what goes to ``slice_number``."""
        owed = self.pending.get(slice_number, 0) + requests
        if owed:
            self.pending[slice_number] = owed
        else:
            self.pending.pop(slice_number, None)


def recheck_at(held: Lease, retry_slice: int | None, now: float) -> float:
    """When a window found full at ``now`` is asked again (clock seconds): room comes
    back when slice ``retry_slice`` stops counting, or with the other nodes' unused
    leases, given back within :data:`SETTLE_SECONDS` of the end of the slice they were
    for; at the latest after :data:`RECHECK_SECONDS`."""
    start = held.slice * held.slice_seconds
    returned = start + SETTLE_SECONDS  # the previous slice's leases, back by then
    if now >= returned:
        returned += held.slice_seconds  # this slice's
    until = min(now + RECHECK_SECONDS, returned)
    if retry_slice is not None:
        until = min(until, held.expiry(retry_slice))
    return until


def quota_item(held: Lease, *, lease: bool, charge: tuple[int, int] = (0, 0)) -> QuotaItem:
    """The exchange's item for ``held``: a lease at its slice, or ``charge`` (slice,
    requests) sent."""
    return QuotaItem(
        name=held.name,
        key=held.key,
        limit=held.limit,
        slice=held.slice,
        slice_seconds=held.slice_seconds,
        lease=lease,
        need=max(held.waiting, 1),
        charge_slice=charge[0],
        charge=charge[1],
    )


def allowed_decision(
    checks: Sequence[tuple[Window, str]], leases: list[Lease], now: float, *, taking: int = 0
) -> Decision:
    """The admission's decision for the most constraining window: the fewest left (what
    the window leaves plus this node's unused lease, less ``taking``: 1 for a request
    not yet counted), then the one recovering last."""
    best: tuple[int, float, Window] | None = None
    for (window, _), held in zip(checks, leases, strict=True):
        remaining = max(window.limit - held.counted + held.left - taking, 0)
        reset_after = held.reset_after(now)
        if best is None or (remaining, -reset_after) < (best[0], -best[1]):
            best = (remaining, reset_after, window)
    assert best is not None
    remaining, reset_after, window = best
    return Decision(
        allowed=True,
        window=window.name,
        limit=window.limit,
        remaining=remaining,
        reset_after_seconds=reset_after,
        retry_after_seconds=0.0,
    )


def refused_decision(refused: list[tuple[Window, Lease]], now: float) -> Decision:
    """The refusal for the window of ``refused`` that needs the longest wait."""
    waits = []
    for window, held in refused:
        retry = held.retry if held.retry is not None else held.slice
        waits.append((max(held.expiry(retry) - now, 0.0), window, held))
    retry_after, window, held = max(waits, key=lambda w: w[0])
    return Decision(
        allowed=False,
        window=window.name,
        limit=window.limit,
        remaining=0,
        reset_after_seconds=held.reset_after(now),
        retry_after_seconds=retry_after,
    )
