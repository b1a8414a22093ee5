"""The producers' side of the store actor (:mod:`store.actor`): its settings, the
messages of its inbox, the :class:`StoreWriter` handle producers write items through
(:mod:`store.family`: each family's module builds its items), and the statistics and
observer hook they share. Nothing here runs a task (docs/operations.md, "A database
outage" and "Metrics and health").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import trio

from .errors import StoreError
from .family import Item

__all__ = [
    "Flush",
    "StoreMessage",
    "StoreSettings",
    "StoreWriter",
    "WriterObserver",
    "WriterStatistics",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Flush:
    """Answer on ``reply`` once everything queued before this message is committed (or
    dropped by the buffer's bound)."""

    reply: trio.MemorySendChannel[None]


StoreMessage = Item | Flush
"""What the store actor's inbox holds: items, and flushes."""


class WriterObserver(Protocol):
    """Told of every committed batch (the service's metrics, ``web.metrics``). Called
    from the actor's task: it must be quick (microseconds) and must not raise."""

    def batch_written(
        self, size: int, flush_seconds: float, commit_delays_seconds: Sequence[float]
    ) -> None:
        """A batch of ``size`` items committed in ``flush_seconds`` seconds (its
        transaction); ``commit_delays_seconds`` holds, per item, the seconds from its
        hand-over (``queued_at``) to this commit."""


@dataclass(slots=True)
class WriterStatistics:
    """Counters of the store actor since start (metrics, ``readyz``, the benchmark).

    Attributes:
        batches: batches committed.
        rows_written: rows the families' writes inserted (every family's items:
            ``uptrio_store_rows_written_total``), moves not counted.
        last_batch_size: items in the last batch.
        last_flush_seconds: duration of the last batch's transaction, seconds.
        retries: failed write attempts that were retried.
        dropped: items and status moves dropped: items by the buffer's bound during an
            outage and in poison batches, items and moves the fence refused
            (``fenced_refused``).
        dropped_overflow: of ``dropped``, those the buffer's bound dropped.
        batch_sizes: the size of each batch (the first 100,000).
        buffered: items in the buffer now (a batch being written included).
        max_buffered: the most items ever buffered at once.
        buffer_limit: the buffer's bound, items.
        database_available: False from a write failing with ``DatabaseUnavailable`` until
            the next successful write.
        outages: times the database became unavailable.
        fenced_refused: of ``dropped``, items and status moves refused because another
            node holds their bucket now, or at another lease epoch (``store.fencing``).
    """

    batches: int = 0
    rows_written: int = 0
    last_batch_size: int = 0
    last_flush_seconds: float = 0.0
    retries: int = 0
    fenced_refused: int = 0
    dropped: int = 0
    dropped_overflow: int = 0
    batch_sizes: list[int] = field(default_factory=list)
    buffered: int = 0
    max_buffered: int = 0
    buffer_limit: int = 0
    database_available: bool = True
    outages: int = 0


class StoreWriter:
    """The producers' handle on the store actor (one shared send channel, no clones).
    Items are built by their family's module (:mod:`store.family`) and stamped with
    their hand-over time when built."""

    def __init__(self, send: trio.MemorySendChannel[StoreMessage], stats: WriterStatistics):
        self._send = send
        self.statistics = stats

    async def write(self, item: Item) -> None:
        """Queue one item; waits while the inbox is full (back-pressure; never during a
        database outage, when the actor keeps draining its inbox).

        Raises:
            trio.ClosedResourceError: the writer was closed.
        """
        if not self.write_nowait(item):
            await self._send.send(item)

    def write_nowait(self, item: Item) -> bool:
        """Queue one item if the inbox has room; False (nothing queued) when it is full,
        and then :meth:`write` waits for room.

        Raises:
            trio.ClosedResourceError: the writer was closed.
        """
        try:
            self._send.send_nowait(item)
        except trio.WouldBlock:
            return False
        return True

    async def flush(self, timeout_seconds: float = 30.0) -> None:
        """Wait until every item queued before this call is committed (or dropped by the
        buffer's bound).

        Raises:
            TimeoutError: not committed within ``timeout_seconds``.
            StoreError: the store actor stopped before the flush.
            trio.ClosedResourceError: the writer was closed.
        """
        reply_send, reply_receive = trio.open_memory_channel[None](1)
        with trio.fail_after(timeout_seconds):
            await self._send.send(Flush(reply=reply_send))
            try:
                await reply_receive.receive()
            except trio.EndOfChannel:
                raise StoreError("the store actor stopped before the flush") from None

    def queued(self) -> int:
        """Items not yet committed: waiting in the inbox or in the buffer."""
        return self._send.statistics().current_buffer_used + self.statistics.buffered

    def close(self) -> None:
        """Close the inbox (synchronous form of :meth:`aclose`)."""
        self._send.close()

    async def aclose(self) -> None:
        """Close the inbox: the actor writes what is queued and returns."""
        await self._send.aclose()


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreSettings:
    """How the store actor batches and buffers (``uptrio serve`` flags; every default is
    defined here and only here).

    Attributes:
        batch_size: items per batch, at most (``--batch-size``, default 500).
        batch_age_seconds: the oldest item's age before a batch is written, seconds
            (``--batch-age-ms``, default 200 ms).
        buffer_limit: items buffered while the database is down, at most; past it the
            oldest are dropped (``--store-buffer``, default 100,000).
        inbox_size: messages the inbox holds before producers wait (default 10,000).
        retry_min_seconds: first back-off after a write failed because the database is
            unavailable, seconds (doubling each time).
        retry_max_seconds: the back-off's ceiling, seconds.
        partition_seconds: the width of a partition of a table partitioned by time
            (``store.family.Partitions``), seconds (a day; tests use less). Shared with
            the maintenance actor (``store.maintenance``).
        write_timeout_seconds: bounds each batch's write, seconds (the shorter of it and
            the database's own deadline; None keeps the database's): past it the database
            counts as unavailable and the pump takes everything, so producers never wait
            on a database that hangs (docs/operations.md, "A database outage").

    Raises:
        ValueError: ``batch_size``, ``buffer_limit`` or ``inbox_size`` below 1.
    """

    batch_size: int = 500
    batch_age_seconds: float = 0.2
    buffer_limit: int = 100_000
    inbox_size: int = 10_000
    retry_min_seconds: float = 0.1
    retry_max_seconds: float = 2.0
    partition_seconds: int = 86_400
    write_timeout_seconds: float | None = 5.0

    def __post_init__(self) -> None:
        if min(self.batch_size, self.buffer_limit, self.inbox_size) < 1:
            raise ValueError("batch_size, buffer_limit and inbox_size must be at least 1")
