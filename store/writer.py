"""The producers' side of the store actor (:mod:`store.actor`): its settings, the
messages of its inbox, the :class:`CheckWriter` handle monitor actors write through, and
the statistics and observer hook they share. Nothing here runs a task.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import trio

from .buffer import Item, WriteCheck, WritePing
from .checks import StatusChange
from .errors import StoreError
from .pings import HeartbeatChange
from .records import CheckRecord, PingRecord

__all__ = [
    "CheckWriter",
    "Flush",
    "StoreMessage",
    "StoreSettings",
    "WriterObserver",
    "WriterStatistics",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Flush:
    """Answer on ``reply`` once everything queued before this message is committed (or
    dropped by the buffer's bound)."""

    reply: trio.MemorySendChannel[None]


StoreMessage = WriteCheck | WritePing | Flush


class WriterObserver(Protocol):
    """Told of every committed batch (the service's metrics, ``web.metrics``). Called
    from the actor's task: it must be quick (microseconds) and must not raise."""

    def batch_written(
        self, size: int, flush_seconds: float, commit_delays_seconds: Sequence[float]
    ) -> None:
        """A batch of ``size`` results committed in ``flush_seconds`` seconds (its
        transaction); ``commit_delays_seconds`` holds, per result, the seconds from its
        hand-over (about its probe's end) to this commit."""


@dataclass(slots=True)
class WriterStatistics:
    """Counters of the store actor since start (metrics, ``readyz``, the benchmark).

    Attributes:
        batches: batches committed.
        rows_written: check rows inserted.
        last_batch_size: results in the last batch.
        last_flush_seconds: duration of the last batch's transaction, seconds.
        retries: failed write attempts that were retried.
        dropped: check results and status moves dropped: the buffer's bound during an
            outage, poison batches, and rows the fence refused (``fenced_refused``).
        dropped_overflow: of ``dropped``, those the buffer's bound dropped.
        batch_sizes: the size of each batch (the first 100,000).
        buffered: results in the buffer now (a batch being written included).
        max_buffered: the most results ever buffered at once.
        buffer_limit: the buffer's bound, results.
        database_available: False from a write failing with ``DatabaseUnavailable`` until
            the next successful write.
        outages: times the database became unavailable.
        fenced_refused: of ``dropped``, check rows and status changes refused because
            another node holds their bucket now, or at another lease epoch
            (``store.fencing``).
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


class CheckWriter:
    """The producers' handle on the store actor (one shared send channel, no clones)."""

    def __init__(self, send: trio.MemorySendChannel[StoreMessage], stats: WriterStatistics):
        self._send = send
        self.statistics = stats

    async def write(
        self,
        check: CheckRecord,
        change: StatusChange | None = None,
        lease_epoch: int | None = None,
    ) -> None:
        """Queue one result (probed under ``lease_epoch``, the fence of
        ``store.fencing``; None: not fenced); waits while the inbox is full
        (back-pressure; never during a database outage, when the actor keeps draining
        its inbox).

        Raises:
            trio.ClosedResourceError: the writer was closed.
        """
        await self._put(_result(check, change, lease_epoch))

    def write_nowait(
        self,
        check: CheckRecord,
        change: StatusChange | None = None,
        lease_epoch: int | None = None,
    ) -> bool:
        """Queue one result if the inbox has room; False (nothing queued) when it is full,
        and then `write` waits for room.

        Raises:
            trio.ClosedResourceError: the writer was closed.
        """
        return self._put_nowait(_result(check, change, lease_epoch))

    async def write_ping(
        self, ping: PingRecord | None, change: HeartbeatChange | None = None
    ) -> None:
        """Queue a heartbeat's ping and the move it caused (or a move alone), as
        :meth:`write` queues a result (the same inbox, the same back-pressure).

        Raises:
            trio.ClosedResourceError: the writer was closed.
        """
        await self._put(WritePing(ping=ping, change=change, queued_at=trio.current_time()))

    def write_ping_nowait(
        self, ping: PingRecord | None, change: HeartbeatChange | None = None
    ) -> bool:
        """Queue a ping (and its move) if the inbox has room, as :meth:`write_nowait`.

        Raises:
            trio.ClosedResourceError: the writer was closed.
        """
        return self._put_nowait(WritePing(ping=ping, change=change, queued_at=trio.current_time()))

    async def _put(self, item: Item) -> None:
        if not self._put_nowait(item):
            await self._send.send(item)

    def _put_nowait(self, item: Item) -> bool:
        try:
            self._send.send_nowait(item)
        except trio.WouldBlock:
            return False
        return True

    async def flush(self, timeout_seconds: float = 30.0) -> None:
        """Wait until every result queued before this call is committed.

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
        """Results not yet committed: waiting in the inbox or in the buffer."""
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
        batch_size: results per batch, at most (``--batch-size``, default 500).
        batch_age_seconds: the oldest result's age before a batch is written, seconds
            (``--batch-age-ms``, default 200 ms).
        buffer_limit: results buffered while the database is down, at most; past it the
            oldest are dropped (``--store-buffer``, default 100,000).
        inbox_size: messages the inbox holds before producers wait (default 10,000).
        retry_min_seconds: first back-off after a write failed because the database is
            unavailable, seconds (doubling each time).
        retry_max_seconds: the back-off's ceiling, seconds.
        partition_seconds: the width of a partition of the checks table, seconds (a day;
            tests use less). Shared with the maintenance actor (``store.maintenance``).
        write_timeout_seconds: bounds each batch's write, seconds (the shorter of it and
            the database's own deadline; None keeps the database's): past it the database
            counts as unavailable and the pump takes everything, so producers never wait
            on a database that hangs (issue 15).

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


def _result(check: CheckRecord, change: StatusChange | None, lease_epoch: int | None) -> WriteCheck:
    """A result as the buffer holds it, handed over now (``queued_at``)."""
    return WriteCheck(
        check=check, change=change, queued_at=trio.current_time(), lease_epoch=lease_epoch
    )
