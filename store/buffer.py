"""The store actor's buffer: check results and heartbeats' pings waiting for the database
(operations issue, 5; extensions part 7).

Pure (no I/O, no clock: times come in with the results), so its rules are tested without
a database or a clock (tests/store/test_buffer.py).

Results wait in arrival order. The writer takes a batch from the front (:meth:`take`) and,
when the write fails, puts it back at the front (:meth:`put_back`), so results leave the
buffer strictly in arrival order, by commit (:meth:`committed`) or by drop. Progress is
two counters: ``entered`` (results ever appended) and ``left`` (results committed or
dropped); "everything appended before now is written" is ``left >= entered-then``, which
is how the store actor answers flushes.

The buffer is bounded (``limit`` results; ``uptrio serve --store-buffer``, default
100,000). :meth:`trim` drops the OLDEST results beyond the bound and counts them. A dropped
result's status change is not dropped with it: it is kept as an *orphan* and written with
the next batch, so a long outage never makes the stored status of a monitor miss a
transition (``status_changes`` has no foreign key to ``checks``: the change then names a
check that was never stored). Orphans are bounded by ``limit`` too (the oldest go first,
counted in ``dropped_changes``).

Only trim between writes (never while a taken batch is in flight): then the results
dropped are the oldest not yet written, and ``left`` counts in arrival order.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .checks import StatusChange
from .pings import HeartbeatChange
from .records import CheckRecord, PingRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteCheck:
    """One check result, with the status change it caused (or None).

    ``queued_at`` is when the producer handed it over (trio clock, seconds; about when
    its probe ended): the store measures each result's delay to the commit of its batch
    from it (``uptrio_store_commit_delay_seconds``).
    """

    check: CheckRecord
    change: StatusChange | None = None
    queued_at: float = 0.0
    lease_epoch: int | None = None
    """The lease epoch the monitor's actor ran under (``store.fencing``), or None."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WritePing:
    """One ping of a heartbeat with the status move it caused, or a move alone (``ping``
    None: a deadline passed); ``queued_at`` as :class:`WriteCheck`'s. A ping handed over
    is in the store's durable path: its HTTP answer may go (README, Heartbeats)."""

    ping: PingRecord | None
    change: HeartbeatChange | None = None
    queued_at: float = 0.0


Item = WriteCheck | WritePing
"""What the buffer holds: a check result or a ping (each with its status change)."""
Change = StatusChange | HeartbeatChange
"""A status move of a monitor or of a heartbeat."""


@dataclass(frozen=True, slots=True)
class Batch:
    """Results taken from the front of the buffer, plus every orphan status change (older
    than the results, so written first)."""

    items: list[Item]
    orphans: list[Change]

    @property
    def checks(self) -> list[CheckRecord]:
        """The check rows to insert, in arrival order."""
        return [item.check for item in self.items if isinstance(item, WriteCheck)]

    @property
    def pings(self) -> list[PingRecord]:
        """The ping rows to insert, in arrival order."""
        return [i.ping for i in self.items if isinstance(i, WritePing) and i.ping is not None]

    @property
    def changes(self) -> list[Change]:
        """The status changes to apply, oldest first: orphans, then the items' own."""
        return self.orphans + [item.change for item in self.items if item.change is not None]


class CheckBuffer:
    """A bounded FIFO of :class:`WriteCheck` and :class:`WritePing` (see the module
    docstring; a ping counts as a result).

    Attributes:
        limit: results held at most once trimmed.
        entered: results appended since creation.
        left: results that left by commit or drop since creation.
        dropped: results dropped by :meth:`trim` since creation.
        dropped_changes: orphan status changes dropped past the bound since creation.

    Raises:
        ValueError: ``limit`` below 1.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"the buffer limit must be at least 1, got {limit}")
        self.limit = limit
        self.entered = 0
        self.left = 0
        self.dropped = 0
        self.dropped_changes = 0
        self._items: deque[Item] = deque()
        self._orphans: deque[Change] = deque()

    def __len__(self) -> int:
        """Results waiting (a taken batch not put back is not counted)."""
        return len(self._items)

    @property
    def orphan_count(self) -> int:
        """Status changes kept from dropped results, waiting for the next batch."""
        return len(self._orphans)

    def oldest_queued_at(self) -> float | None:
        """``queued_at`` of the front result (seconds, trio clock), None when empty."""
        return self._items[0].queued_at if self._items else None

    def append(self, item: Item) -> None:
        """Add one result at the back (the bound is enforced by :meth:`trim`)."""
        self._items.append(item)
        self.entered += 1

    def take(self, size: int) -> Batch:
        """Remove up to ``size`` results from the front, with every orphan change."""
        items = self._items
        count = min(size, len(items))
        batch = Batch([items.popleft() for _ in range(count)], list(self._orphans))
        self._orphans.clear()
        return batch

    def put_back(self, batch: Batch) -> None:
        """Return a batch whose write failed to the front, in its order."""
        self._items.extendleft(reversed(batch.items))
        self._orphans.extendleft(reversed(batch.orphans))

    def committed(self, batch: Batch) -> None:
        """Record that ``batch`` was written: its results have left."""
        self.left += len(batch.items)

    def discard(self, batch: Batch) -> None:
        """Record that ``batch`` was given up (a poison batch): its results have left,
        counted in ``dropped``, its changes in ``dropped_changes``."""
        self.left += len(batch.items)
        self.dropped += len(batch.items)
        self.dropped_changes += len(batch.changes)

    def trim(self) -> int:
        """Drop the oldest results beyond ``limit`` (keeping their status changes as
        orphans, themselves bounded by ``limit``); return how many results were dropped."""
        items, orphans = self._items, self._orphans
        excess = len(items) - self.limit
        for _ in range(max(0, excess)):
            item = items.popleft()
            if item.change is not None:
                orphans.append(item.change)
        while len(orphans) > self.limit:
            orphans.popleft()
            self.dropped_changes += 1
        if excess <= 0:
            return 0
        self.left += excess
        self.dropped += excess
        return excess
