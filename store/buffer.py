"""The store actor's buffer: items waiting for the database (docs/operations.md, "A
database outage"; the items and their moves: :mod:`store.family`).

Pure (no I/O, no clock: times come in with the items), so its rules are tested without a
database or a clock (tests/store/test_buffer.py).

Items wait in arrival order. The writer takes a batch from the front (:meth:`take`) and,
when the write fails, puts it back at the front (:meth:`put_back`), so items leave the
buffer strictly in arrival order, by commit (:meth:`committed`) or by drop. Progress is
two counters: ``entered`` (items ever appended) and ``left`` (items committed or
dropped); "everything appended before now is written" is ``left >= entered-then``, which
is how the store actor answers flushes.

The buffer is bounded (``limit`` items; ``uptrio serve --store-buffer``, default
100,000). :meth:`trim` drops the OLDEST items beyond the bound and counts them. A dropped
item's status move is not dropped with it: it is kept as an *orphan* and written with
the next batch, so a long outage never makes a resource's stored status miss a
transition (a move's log has no foreign key to the rows: the move then names a row that
was never stored). Orphans are bounded by ``limit`` too (the oldest go first, counted in
``dropped_changes``).

Only trim between writes (never while a taken batch is in flight): then the items
dropped are the oldest not yet written, and ``left`` counts in arrival order.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .family import Item, Move


@dataclass(frozen=True, slots=True)
class Batch:
    """Items taken from the front of the buffer, plus every orphan move (older than the
    items, so written first)."""

    items: list[Item]
    orphans: list[Move]

    @property
    def moves(self) -> list[Move]:
        """The status moves to apply, oldest first: orphans, then the items' own."""
        return self.orphans + [item.change for item in self.items if item.change is not None]


class StoreBuffer:
    """A bounded FIFO of items (:class:`store.family.Item`; see the module docstring).

    Attributes:
        limit: items held at most once trimmed.
        entered: items appended since creation.
        left: items that left by commit or drop since creation.
        dropped: items dropped by :meth:`trim` since creation.
        dropped_changes: orphan status moves dropped past the bound since creation.

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
        self._orphans: deque[Move] = deque()

    def __len__(self) -> int:
        """Results waiting (a taken batch not put back is not counted)."""
        return len(self._items)

    @property
    def orphan_count(self) -> int:
        """Status moves kept from dropped items, waiting for the next batch."""
        return len(self._orphans)

    def oldest_queued_at(self) -> float | None:
        """``queued_at`` of the front item (seconds, trio clock), None when empty."""
        return self._items[0].queued_at if self._items else None

    def append(self, item: Item) -> None:
        """Add one item at the back (the bound is enforced by :meth:`trim`)."""
        self._items.append(item)
        self.entered += 1

    def take(self, size: int) -> Batch:
        """Remove up to ``size`` items from the front, with every orphan move."""
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
        """Record that ``batch`` was written: its items have left."""
        self.left += len(batch.items)

    def discard(self, batch: Batch) -> None:
        """Record that ``batch`` was given up (a poison batch): its items have left,
        counted in ``dropped``, its moves in ``dropped_changes``."""
        self.left += len(batch.items)
        self.dropped += len(batch.items)
        self.dropped_changes += len(batch.moves)

    def trim(self) -> int:
        """Drop the oldest items beyond ``limit`` (keeping their status moves as
        orphans, themselves bounded by ``limit``); return how many items were dropped."""
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
